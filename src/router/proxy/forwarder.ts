// Forwards a request to a picked endpoint and fails over to another one while nothing has reached the client.
import { totalDeadline } from './total-deadline.js';
import type { Endpoint } from '../core/endpoint.js';
import type { TimeoutConfig } from '../config/config.js';
import type { Dispatch, RouteRequest, RoutingPolicy } from '../routing/policy.js';
import type { ResponseSink } from '../core/exchange.js';
import type { ClientGone } from '../core/client-gone.js';
import { attempt, type AttemptOutcome } from './attempt.js';
import type { FailureKind } from '../core/forward.js';
import type { UpstreamPools } from './pools.js';
import type { ForwardObserver, InFlightLedger } from '../core/forward.js';
import type { AdapterLedger, MissingAdapterAnswer } from '../core/lora.js';
import type { EndpointRole } from '../core/pd.js';
import type { TraceSpan } from '../core/trace.js';
import { engineSpan, endEngineSpan } from './attempt-span.js';
import { ENDPOINT, POLICY, SPAN } from '../tracing/attributes.js';
import type { StreamRelay } from './migration/relay.js';

export interface ForwardJob {
  readonly route: RouteRequest;
  /** the ready endpoints of the model now; called again before each failover */
  readonly candidates: () => readonly Endpoint[];
  readonly method: string;
  readonly path: string;
  readonly headers: string[];
  readonly body: Buffer;
  readonly requestId: string;
  /** the request's "client gone" signal (src/router/core/client-gone.ts): it ends the attempt under way */
  readonly gone: ClientGone;
  /** called once, when the first body byte goes to the client */
  readonly onFirstByte?: () => void;
  /** tried first instead of the policy's pick (P/D: the decode endpoint chosen with its prefill) */
  readonly first?: Endpoint;
  /** a request for a LoRA adapter: its use per endpoint is counted there, and an engine's 404 reported */
  readonly adapter?: AdapterLedger;
  /** an engine's answer that it does not hold the adapter: another holder is tried (generation paths of an adapter) */
  readonly adapterMissing?: MissingAdapterAnswer;
  /**
   * tracing on: the request's span. The pick gets a route span under it, each attempt a CLIENT span whose context the
   * engine gets (job.headers carry no traceparent of the client's then)
   */
  readonly trace?: TraceSpan;
  /** the endpoints' role, for the attempt spans (P/D: decode); default both */
  readonly role?: EndpointRole;
  /** a stream that may be continued on another engine (src/router/proxy/migration): a broken one is left open */
  readonly relay?: StreamRelay;
  /** endpoints not to pick (a migration: those whose stream broke) */
  readonly exclude?: ReadonlySet<Endpoint>;
  /** the whole request's deadline (--total-timeout), when it began before this call (a migration); else from now */
  readonly deadline?: number;
}

export type ForwardResult =
  | { readonly kind: 'answered'; readonly status: number; readonly endpoint: Endpoint }
  | { readonly kind: 'broken'; readonly status: number; readonly endpoint: Endpoint; readonly failure: FailureKind }
  | { readonly kind: 'client-gone'; readonly endpoint: Endpoint | undefined }
  /** nothing was sent; the caller answers with an error */
  | {
      readonly kind: 'unanswered';
      readonly failure: FailureKind | 'no-endpoint';
      readonly detail: string;
      readonly endpoint: Endpoint | undefined;
    };

export class Forwarder {
  constructor(
    private readonly pools: UpstreamPools,
    private policy: RoutingPolicy,
    private readonly observer: ForwardObserver,
    /** the catalog: the endpoint's owner counts its requests in flight */
    private readonly ledger: InFlightLedger,
    private readonly timeouts: TimeoutConfig,
    private readonly maxFailoverAttempts: number,
  ) {}

  /** The routing policy from now on (the configuration changed); a request under way keeps the one it started with. */
  setPolicy(policy: RoutingPolicy): void {
    this.policy = policy;
  }

  async forward(job: ForwardJob, res: ResponseSink): Promise<ForwardResult> {
    const policy = this.policy;
    const deadline = job.deadline ?? totalDeadline(this.timeouts.totalMs);
    let tried: Set<Endpoint> | undefined = job.exclude !== undefined ? new Set(job.exclude) : undefined;
    let candidates = job.candidates();
    const trace = job.trace;
    // a pick that takes I/O (kvaware's /tokenize) has a span of its own; others take no time
    const routeSpan =
      trace !== undefined && job.first === undefined && policy.prepare !== undefined
        ? trace.child(SPAN.route, 'internal', { [POLICY]: policy.name })
        : undefined;
    // kvaware tokenizes here (bounded by its own timeout; it never fails the request)
    if (job.first === undefined && policy.prepare !== undefined) await policy.prepare(candidates, job.route, routeSpan);
    let endpoint = job.first ?? policy.pick(candidates, job.route, job.exclude, routeSpan);
    if (routeSpan !== undefined) {
      if (endpoint !== undefined) routeSpan.set(ENDPOINT, endpoint.url);
      else routeSpan.fail('no endpoint');
      routeSpan.end();
    }
    let last: { failure: FailureKind; detail: string } | undefined;
    for (let failovers = 0; endpoint !== undefined; failovers++) {
      // a client that left costs no (further) engine request
      if (job.gone.gone) return { kind: 'client-gone', endpoint: undefined };
      const mayRetry = failovers < this.maxFailoverAttempts && candidates.some((c) => c !== endpoint && !tried?.has(c));
      this.ledger.requestStarted(endpoint);
      job.adapter?.requestStarted(endpoint);
      // the policy follows the work it sent (kvaware: a prefill is under way until the answer's first byte)
      const dispatch = policy.dispatched?.(endpoint, job.route);
      let outcome: AttemptOutcome;
      const span =
        trace !== undefined ? engineSpan(trace, SPAN.engine, endpoint, job.role ?? 'both', failovers + 1, job.method, job.path) : undefined;
      const onFirstByte = withDispatch(dispatch, span !== undefined ? span.onFirstByte(job.onFirstByte) : job.onFirstByte);
      try {
        outcome = await attempt(
          this.pools.get(endpoint.url),
          {
            method: job.method,
            path: job.path,
            headers: span !== undefined ? job.headers.concat(span.span.propagation()) : job.headers,
            body: job.body,
            requestId: job.requestId,
            retryOnEngine503: mayRetry,
            ...(job.adapterMissing ? { adapterMissing: job.adapterMissing } : {}),
            headersTimeoutMs: this.timeouts.headersMs,
            idleTimeoutMs: this.timeouts.idleMs,
            gone: job.gone,
            ...(onFirstByte ? { onFirstByte } : {}),
            ...(job.relay !== undefined ? { relay: job.relay } : {}),
          },
          res,
          deadline,
        );
      } finally {
        this.ledger.requestEnded(endpoint);
        job.adapter?.requestEnded(endpoint);
        dispatch?.ended();
      }
      if (span !== undefined) endEngineSpan(span, outcome);
      switch (outcome.kind) {
        case 'done':
          if (outcome.status >= 500 && outcome.status !== 503)
            this.observer.failed(endpoint, 'engine-5xx', `engine answered ${outcome.status}`);
          else this.observer.succeeded(endpoint);
          return { kind: 'answered', status: outcome.status, endpoint };
        case 'client-gone':
          return { kind: 'client-gone', endpoint };
        case 'broken':
          this.observer.failed(endpoint, outcome.failure, outcome.detail);
          return { kind: 'broken', status: outcome.status, endpoint, failure: outcome.failure };
        case 'failed':
          // an engine that refused a continuation said nothing against its health
          if (outcome.failure !== 'engine-4xx') this.observer.failed(endpoint, outcome.failure, outcome.detail);
          return { kind: 'unanswered', failure: outcome.failure, detail: outcome.detail, endpoint };
        case 'retryable': {
          // an engine's own 503 is back-pressure or loading, its 404 for an adapter says it does not hold it: neither
          // says anything against the endpoint's health
          if (outcome.failure === 'model-missing') job.adapter?.missing(endpoint);
          else if (outcome.failure !== 'engine-busy') this.observer.failed(endpoint, outcome.failure, outcome.detail);
          last = { failure: outcome.failure, detail: outcome.detail };
          if (!mayRetry || res.destroyed) return { kind: 'unanswered', ...last, endpoint };
          tried ??= new Set();
          tried.add(endpoint);
          candidates = job.candidates();
          const next = policy.pick(candidates, job.route, tried);
          if (!next) return { kind: 'unanswered', ...last, endpoint };
          this.observer.failover(job.route.model);
          trace?.event('failover', { from: endpoint.url, to: next.url, failure: outcome.failure });
          endpoint = next;
        }
      }
    }
    return {
      kind: 'unanswered',
      failure: last?.failure ?? 'no-endpoint',
      detail: last?.detail ?? 'no ready endpoint',
      endpoint: undefined,
    };
  }
}

/** The first-byte callback with the policy's dispatch told first. */
function withDispatch(dispatch: Dispatch | undefined, inner: (() => void) | undefined): (() => void) | undefined {
  if (dispatch === undefined) return inner;
  return () => {
    dispatch.firstByte();
    inner?.();
  };
}
