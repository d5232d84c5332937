// Forwards a request for a model served P/D: picks the pair (decode by the routing policy, prefill by least load or
// prefix affinity), decides whether a prefill hop is wanted at all, and runs the model's protocol over the pair.
// The decode hop is the ordinary forwarder's (attempt, stream, failover before the first byte), so everything a
// non-P/D request gets (framing checks, SSE error events, passive health) holds for the decode answer too.
import type { PdConfig, TimeoutConfig } from '../../config/config.js';
import type { Endpoint } from '../../core/endpoint.js';
import type { ResponseSink } from '../../core/exchange.js';
import { ClientGone } from '../../core/client-gone.js';
import type { ForwardObserver, InFlightLedger } from '../../core/forward.js';
import { saysAdapterMissing, VLLM_MISSING, type AdapterLedger, type MissingAdapterAnswer } from '../../core/lora.js';
import { allowsDecodeOnly, type DecodeOnlyReason, type PdObserver, type PdProtocol } from '../../core/pd.js';
import type { RouteRequest, RoutingPolicy } from '../../routing/policy.js';
import type { TraceSpan } from '../../core/trace.js';
import { DECODE_ENDPOINT, PD_PROTOCOL, POLICY, PREFILL_ENDPOINT, SPAN } from '../../tracing/attributes.js';
import { endCallSpan, engineSpan } from '../attempt-span.js';
import type { Forwarder, ForwardResult } from '../forwarder.js';
import { downstreamResponseHeaders, upstreamRequestHeaders } from '../headers.js';
import type { UpstreamPools } from '../pools.js';
import { totalDeadline } from '../total-deadline.js';
import { kvTransferParamsOf, withoutKvTransferParams } from './bodies.js';
import { callEngine, type CallOutcome, type EngineCall } from './engine-call.js';
import { runLlmdSidecar } from './llm-d-sidecar.js';
import { promptChars } from './prompt-chars.js';
import type { PdPair, PdProtocolRunner, PrefillVerdict } from './protocol.js';
import type { StreamRelay } from '../migration/relay.js';
import { runSglang } from './sglang.js';
import { runVllmNixl } from './vllm-nixl.js';

const RUNNERS: Readonly<Record<PdProtocol, PdProtocolRunner>> = {
  'vllm-nixl': runVllmNixl,
  'llm-d-sidecar': runLlmdSidecar,
  sglang: runSglang,
};

/** The paths a prefill hop is made for (the sidecar of llm-d intercepts the same ones); others go to decode alone. */
const PD_PATHS = new Set(['/v1/chat/completions', '/v1/completions', '/v1/responses']);

export interface PdJob {
  readonly model: string;
  readonly protocol: PdProtocol;
  readonly route: RouteRequest;
  /** the route path, without query */
  readonly path: string;
  /** the request-target sent to engines (query included) */
  readonly target: string;
  readonly body: Buffer;
  /** the client's headers, flat; filtered per call (src/router/proxy/headers.ts) */
  readonly rawHeaders: readonly string[];
  readonly requestId: string;
  /** the request's "client gone" signal: it ends the prefill call and the decode attempt */
  readonly gone: ClientGone;
  /** called once, when the first body byte goes to the client */
  readonly onFirstByte?: () => void;
  /** the decode side now (decode and both endpoints); called again before each failover */
  readonly candidates: () => readonly Endpoint[];
  /** the ready prefill endpoints */
  readonly prefill: readonly Endpoint[];
  /** a request for a LoRA adapter of the P/D model: its use per endpoint, and engines' 404s for it */
  readonly adapter?: AdapterLedger;
  /** how its engines say they do not hold the adapter (default vLLM's 404) */
  readonly adapterMissing?: MissingAdapterAnswer;
  /**
   * tracing on: the request's span; the pair's pick gets a route span under it, the prefill call and each decode
   * attempt a CLIENT span whose context their engine gets
   */
  readonly trace?: TraceSpan;
  /**
   * A migration (src/router/proxy/migration): the stream's relay, the decode endpoints whose stream broke (not picked
   * again), the request's deadline. The continuation goes through a prefill endpoint again: its prompt grew.
   */
  readonly relay?: StreamRelay;
  readonly exclude?: ReadonlySet<Endpoint>;
  readonly deadline?: number;
}

export interface PdForwarderOptions {
  readonly pd: PdConfig;
  readonly timeouts: TimeoutConfig;
  readonly engineAuthorization: string | undefined;
  readonly forwardClientAuth: boolean;
}

export interface PdPolicies {
  /** the configured routing policy: picks the decode endpoint */
  readonly decode: RoutingPolicy;
  /** least load, or prefix affinity under prefixaware */
  readonly prefill: RoutingPolicy;
}

export class PdForwarder {
  constructor(
    private readonly forwarder: Forwarder,
    private readonly pools: UpstreamPools,
    private policies: PdPolicies,
    /** passive health of prefill endpoints (the prober) */
    private readonly health: ForwardObserver,
    private readonly ledger: InFlightLedger,
    private readonly observer: PdObserver,
    private readonly opts: PdForwarderOptions,
  ) {}

  /** The policies from now on (the configuration changed); requests under way may make their later picks with them. */
  setPolicies(policies: PdPolicies): void {
    this.policies = policies;
  }

  async forward(job: PdJob, res: ResponseSink): Promise<ForwardResult> {
    if (job.gone.gone) return { kind: 'client-gone', endpoint: undefined };
    if (job.trace === undefined) return this.forwardPicked(job, res, undefined);
    job.trace.set(PD_PROTOCOL, job.protocol);
    // a pick that takes I/O (kvaware's /tokenize for the prefill) has a span of its own; others take no time
    if (this.policies.prefill.prepare === undefined) return this.forwardPicked(job, res, undefined);
    const route = job.trace.child(SPAN.route, 'internal', { [POLICY]: this.policies.prefill.name });
    return this.forwardPicked(job, res, route);
  }

  /** `route` (tracing on): the route span, ended once the pair is picked */
  private async forwardPicked(job: PdJob, res: ResponseSink, route: TraceSpan | undefined): Promise<ForwardResult> {
    const policies = this.policies;
    const decode = policies.decode.pick(job.candidates(), job.route, job.exclude, route);
    if (route !== undefined && decode !== undefined) route.set(DECODE_ENDPOINT, decode.url);
    if (decode === undefined || !PD_PATHS.has(job.path) || decode.role === 'both') route?.end();
    if (decode === undefined)
      return { kind: 'unanswered', failure: 'no-endpoint', detail: 'no ready decode endpoint', endpoint: undefined };
    // other paths (embeddings, tokenize, ...) have no prefill half
    if (!PD_PATHS.has(job.path)) return this.decodeHop(job, decode, job.body, undefined, res, res);
    // the KV transfer of a P/D model is the router's to name: a client's own would point an engine at any host
    const body = withoutKvTransferParams(job.body);
    // a `both` endpoint serves whole requests
    if (decode.role === 'both') return this.decodeHop(job, decode, body, undefined, res, res);
    const canSkip = allowsDecodeOnly(job.protocol);
    if (job.prefill.length > 0 && policies.prefill.prepare !== undefined) await policies.prefill.prepare(job.prefill, job.route, route);
    const prefill = job.prefill.length > 0 ? policies.prefill.pick(job.prefill, job.route, undefined, route) : undefined;
    if (route !== undefined) {
      if (prefill !== undefined) route.set(PREFILL_ENDPOINT, prefill.url);
      route.end();
    }
    if (prefill === undefined) {
      // the catalog says ready only when the protocol can do without a prefill; the list was empty at resolve time
      if (canSkip) return this.decodeOnly(job, body, decode, 'no-prefill', res);
      return { kind: 'unanswered', failure: 'no-endpoint', detail: 'no ready prefill endpoint', endpoint: undefined };
    }
    const min = this.opts.pd.minPromptChars;
    if (canSkip && min > 0 && promptChars(job.route.body, min) < min) return this.decodeOnly(job, body, decode, 'short-prompt', res);
    return RUNNERS[job.protocol](this.pair(job, body, decode, prefill, res));
  }

  private pair(job: PdJob, body: Buffer, decode: Endpoint, prefill: Endpoint, res: ResponseSink, tried?: Set<Endpoint>): PdPair {
    return {
      sink: res,
      body,
      path: job.path,
      decode,
      prefill,
      bootstrapPort: prefill.bootstrapPort ?? this.opts.pd.sglangBootstrapPort,
      callPrefill: (b, onStatus) => this.prefillHop(job, prefill, b, onStatus),
      judgePrefill: (outcome, expectKv) => this.judge(job, prefill, outcome, expectKv),
      forwardDecode: (b, extra, sink) => this.decodeHop(job, decode, b, extra, sink ?? res, res),
      decodeOnly: (reason) => this.decodeOnly(job, body, decode, reason, res),
      passBack: (verdict) => this.passBack(job, prefill, verdict.answer, res),
      otherPrefill: () => {
        const exclude = tried ?? new Set<Endpoint>();
        exclude.add(prefill);
        const next = this.policies.prefill.pick(job.prefill, job.route, exclude);
        if (next === undefined) return undefined;
        this.health.failover(job.model);
        return this.pair(job, body, decode, next, res, exclude);
      },
    };
  }

  /** The request to the decode endpoint alone, counted as a decode-only fallback. */
  private decodeOnly(job: PdJob, body: Buffer, decode: Endpoint, reason: DecodeOnlyReason, res: ResponseSink): Promise<ForwardResult> {
    this.observer.decodeOnly(job.model, reason);
    return this.decodeHop(job, decode, body, undefined, res, res);
  }

  private headers(job: PdJob, length: number, extra: readonly string[] | undefined): string[] {
    const headers = upstreamRequestHeaders(job.rawHeaders, {
      requestId: job.requestId,
      contentLength: length,
      engineAuthorization: this.opts.engineAuthorization,
      forwardClientAuth: this.opts.forwardClientAuth,
      dropTraceContext: job.trace !== undefined,
    });
    if (extra) headers.push(...extra);
    return headers;
  }

  private async decodeHop(
    job: PdJob,
    decode: Endpoint,
    body: Buffer,
    extra: readonly string[] | undefined,
    sink: ResponseSink,
    res: ResponseSink,
  ): Promise<ForwardResult> {
    const started = performance.now();
    try {
      return await this.forwarder.forward(
        {
          route: job.route,
          candidates: job.candidates,
          method: 'POST',
          path: job.target,
          headers: this.headers(job, body.length, extra),
          body,
          requestId: job.requestId,
          // the client's own signal, or the one of the sink the decode answer is held in (sglang's gate, which its
          // cancel fires too)
          gone: sink === res ? job.gone : new ClientGone(sink),
          ...(job.onFirstByte ? { onFirstByte: job.onFirstByte } : {}),
          first: decode,
          ...(job.adapter ? { adapter: job.adapter, adapterMissing: job.adapterMissing ?? VLLM_MISSING } : {}),
          ...(job.trace ? { trace: job.trace, role: decode.role } : {}),
          ...(job.relay !== undefined ? { relay: job.relay } : {}),
          ...(job.exclude !== undefined ? { exclude: job.exclude } : {}),
          ...(job.deadline !== undefined ? { deadline: job.deadline } : {}),
        },
        sink,
      );
    } finally {
      if (decode.role !== 'both') this.observer.call(job.model, 'decode', (performance.now() - started) / 1000);
    }
  }

  private prefillHop(job: PdJob, prefill: Endpoint, body: Buffer, onStatus?: (status: number) => void): EngineCall {
    const started = performance.now();
    const t = this.opts.timeouts;
    this.ledger.requestStarted(prefill);
    job.adapter?.requestStarted(prefill);
    // a prefill call's answer is the prefill's end: the policy's work there is done when the call is
    const dispatch = this.policies.prefill.dispatched?.(prefill, job.route);
    const span = job.trace !== undefined ? engineSpan(job.trace, SPAN.prefill, prefill, 'prefill', 1, 'POST', job.target) : undefined;
    const call = callEngine(this.pools.get(prefill.url), {
      path: job.target,
      headers: this.headers(job, body.length, span?.span.propagation()),
      body,
      headersTimeoutMs: t.headersMs,
      idleTimeoutMs: t.idleMs,
      deadline: totalDeadline(t.totalMs),
      ...(onStatus ? { onStatus } : {}),
    });
    const leave = (): void => call.abort();
    job.gone.on(leave);
    void call.done.then((outcome) => {
      if (span !== undefined) endCallSpan(span, outcome);
      job.gone.off(leave);
      this.ledger.requestEnded(prefill);
      job.adapter?.requestEnded(prefill);
      dispatch?.ended();
      this.observer.call(job.model, 'prefill', (performance.now() - started) / 1000);
    });
    return call;
  }

  private judge(job: PdJob, prefill: Endpoint, outcome: CallOutcome, expectKv: boolean): PrefillVerdict {
    const model = job.model;
    if (outcome.kind === 'aborted') return { kind: 'client-gone' };
    if (
      outcome.kind === 'answered' &&
      job.adapter &&
      saysAdapterMissing(job.adapterMissing ?? VLLM_MISSING, outcome.status, outcome.body)
    ) {
      // the prefill engine does not hold the adapter (any more): it is learned, and the request goes on without it
      job.adapter.missing(prefill);
      this.observer.prefillFailed(model, 'model-missing');
      return { kind: 'failed', detail: 'the prefill engine does not hold the adapter', elsewhere: true };
    }
    if (outcome.kind === 'failed') {
      this.health.failed(prefill, outcome.failure, outcome.detail);
      this.observer.prefillFailed(model, outcome.failure);
      // the outcomes the plain path fails over on before the first byte (attempt.ts): nothing was computed
      const elsewhere = outcome.failure === 'connect' || outcome.failure === 'reset' || outcome.failure === 'other';
      return { kind: 'failed', detail: outcome.detail, elsewhere };
    }
    const status = outcome.status;
    if (status >= 400 && status < 500) {
      this.observer.prefillFailed(model, 'engine-4xx');
      return { kind: 'refused', answer: outcome };
    }
    if (status >= 500 || status < 200 || status >= 300) {
      // an engine's own 503 is back-pressure or loading: it says nothing against the endpoint's health
      if (status === 503) {
        this.observer.prefillFailed(model, 'engine-busy');
        return { kind: 'failed', detail: 'prefill answered 503', elsewhere: true };
      }
      this.health.failed(prefill, 'engine-5xx', `prefill answered ${status}`);
      this.observer.prefillFailed(model, 'engine-5xx');
      return { kind: 'failed', detail: `prefill answered ${status}` };
    }
    this.health.succeeded(prefill);
    if (expectKv && kvTransferParamsOf(outcome.body) === undefined) {
      this.observer.prefillFailed(model, 'invalid-answer');
      return { kind: 'failed', detail: 'the prefill answer has no kv_transfer_params object' };
    }
    return { kind: 'ok', answer: outcome };
  }

  private passBack(job: PdJob, prefill: Endpoint, answer: Extract<CallOutcome, { kind: 'answered' }>, res: ResponseSink): ForwardResult {
    if (res.destroyed) return { kind: 'client-gone', endpoint: prefill };
    // a migration's prefill refused the continuation: the client has the stream's head already
    if (res.headersSent)
      return { kind: 'unanswered', failure: 'engine-4xx', detail: `prefill answered ${answer.status}`, endpoint: prefill };
    const head = downstreamResponseHeaders(answer.headers, job.requestId);
    head.headers.push('content-length', String(answer.body.length));
    if (answer.body.length > 0) job.onFirstByte?.();
    res.writeHead(answer.status, head.headers);
    res.end(answer.body);
    return { kind: 'answered', status: answer.status, endpoint: prefill };
  }
}
