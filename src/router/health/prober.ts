// The prober moves endpoint states and nothing else: active model-aware probes on a timer per endpoint,
// plus passive health from forwarded requests (a run of failures marks an endpoint failed at once).
import { Agent } from 'undici';
import { tlsConnectOptions, type EngineTls } from '../config/engine-tls.js';
import type { CatalogEvent, ModelCatalog } from '../catalog/catalog.js';
import type { Endpoint } from '../core/endpoint.js';
import type { ProbeConfig } from '../config/config.js';
import type { EngineKind } from '../core/engine.js';
import type { FailureKind } from '../core/forward.js';
import type { ForwardObserver } from '../core/forward.js';
import { realClock, type Clock, type ClockTimer } from '../util/clock.js';
import type { Logger } from '../util/log.js';
import { afterProbe, nextProbeDelay, type ProbeCounters } from './lifecycle.js';
import { probe, warmup, type ProbeOptions, type ProbeResult, type ProbeTarget } from './rules.js';

interface Tracked extends ProbeCounters {
  timer: ClockTimer | undefined;
  running: boolean;
  /** a probe was asked for while one was running */
  again: boolean;
  passiveFailures: number;
  /** a run of engine 5xx answers asked the prober to confirm: a bad probe now means failed at once */
  suspect: boolean;
  warmedUp: boolean;
  /** consecutive probes that got no HTTP answer at all, and since when (ms since epoch) */
  unanswered: number;
  unansweredSince: number;
  /** when the last WARN about the endpoint being unreachable was logged (0: not logged in this spell) */
  warnedAt: number;
  /** its models a WARN said the engine does not serve (a name mismatch), until it serves them */
  mismatchWarned: Set<string>;
}

/**
 * Unreachable versus loading. An endpoint whose probes get no HTTP answer at all (connection refused, timed out, a
 * TLS failure) is *unreachable* once it has been ready before, or once nothing has answered for
 * UNREACHABLE_AFTER_PROBES probes in a row and UNREACHABLE_AFTER_MS since its discovery (or since its last answer).
 * Before that, or while it answers HTTP without serving the model yet (vLLM's /health 503, a /v1/models without it),
 * it is *loading*. An engine that does not listen at all while it loads its weights is therefore reported unreachable
 * after 10 s, with the reason; its model's state (x-llm-router-model-state, holds, --probe-startup-timeout) is
 * unchanged: only the words say what is seen.
 */
export const UNREACHABLE_AFTER_PROBES = 3;
export const UNREACHABLE_AFTER_MS = 10_000;
/** while an endpoint stays unreachable, its WARN line is repeated at most this often */
export const UNREACHABLE_WARN_EVERY_MS = 5 * 60_000;

/** "connection refused", "timed out", "TLS error" or "no answer", from a probe's transport failure. */
export function unreachableKind(refused: boolean, detail: string): string {
  if (refused) return 'connection refused';
  if (/TIMEOUT|Timeout|ETIMEDOUT|timed out/.test(detail)) return 'timed out';
  if (/TLS|CERT|SSL|EPROTO|SELF_SIGNED|UNABLE_TO_VERIFY|certificate/i.test(detail)) return 'TLS error';
  if (/ENOTFOUND|EAI_AGAIN/.test(detail)) return 'name not resolved';
  return 'no answer';
}

export interface ProberOptions {
  readonly kind: EngineKind;
  readonly probe: ProbeConfig;
  readonly apiKey: string | undefined;
  readonly passiveFailureThreshold: number;
  /** https engines: trust and client certificate, as for requests */
  readonly tls?: EngineTls;
  readonly onFailover?: (model: string) => void;
  /** a forwarded request failed on the endpoint (counted in llm_router_upstream_failures_total) */
  readonly onFailure?: (endpoint: Endpoint, failure: FailureKind) => void;
  /** requests are waiting for one of these models now (the hold queue): probe its endpoints at the wake interval */
  readonly wanted?: (models: readonly string[]) => boolean;
  /** default: the real clock */
  readonly clock?: Clock;
  /** the model-aware check of one endpoint; default: ./rules.ts's probe over HTTP */
  readonly check?: (target: ProbeTarget, opts: ProbeOptions) => Promise<ProbeResult>;
}

export class Prober implements ForwardObserver {
  private readonly tracked = new Map<Endpoint, Tracked>();
  private readonly dispatcher: Agent;
  private readonly probeOpts: ProbeOptions;
  private readonly clock: Clock;
  private readonly check: (target: ProbeTarget, opts: ProbeOptions) => Promise<ProbeResult>;
  private unsubscribe: (() => void) | undefined;
  private stopped = false;

  constructor(
    private readonly catalog: ModelCatalog,
    private readonly opts: ProberOptions,
    private readonly log: Logger,
  ) {
    this.dispatcher = new Agent({
      connections: 4,
      pipelining: 1,
      keepAliveTimeout: 10_000,
      ...(opts.tls ? { connect: tlsConnectOptions(opts.tls) } : {}),
    });
    this.clock = opts.clock ?? realClock;
    this.check = opts.check ?? probe;
    this.probeOpts = { kind: opts.kind, timeoutMs: opts.probe.timeoutMs, apiKey: opts.apiKey, dispatcher: this.dispatcher };
  }

  start(): void {
    this.unsubscribe = this.catalog.onChange((e) => this.onCatalog(e));
    for (const e of this.catalog.endpoints()) this.track(e);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.unsubscribe?.();
    for (const t of this.tracked.values()) this.clock.clearTimeout(t.timer);
    this.tracked.clear();
    await this.dispatcher.destroy().catch(() => undefined);
  }

  /** Probes an endpoint as soon as possible (e.g. after a request to it failed). */
  probeNow(endpoint: Endpoint): void {
    const t = this.tracked.get(endpoint);
    if (!t) return;
    if (t.running) {
      t.again = true;
      return;
    }
    this.clock.clearTimeout(t.timer);
    t.timer = this.clock.setTimeout(() => void this.run(endpoint), 0);
  }

  /** Requests started waiting for `model`: its endpoints that are not ready are probed now, then at the wake interval. */
  expedite(model: string): void {
    for (const [endpoint, t] of this.tracked) {
      // a probe under way is as good as a new one: the next comes at the wake interval anyway
      if (endpoint.state === 'ready' || endpoint.draining || t.running || !endpoint.models.includes(model)) continue;
      this.probeNow(endpoint);
    }
  }

  succeeded(endpoint: Endpoint): void {
    const t = this.tracked.get(endpoint);
    if (t) t.passiveFailures = 0;
  }

  failed(endpoint: Endpoint, failure: FailureKind, detail: string): void {
    this.opts.onFailure?.(endpoint, failure);
    const t = this.tracked.get(endpoint);
    if (!t) return;
    t.passiveFailures++;
    const run = t.passiveFailures >= this.opts.passiveFailureThreshold;
    if (failure === 'engine-5xx') {
      // the engine answered: its 5xx may come from one client's input, so a run of them is confirmed by a probe
      // before the endpoint is failed — one client's bad requests must not take the model away from the others
      if (run && endpoint.state === 'ready') {
        t.suspect = true;
        this.probeNow(endpoint);
      }
      return;
    }
    if (run && endpoint.state === 'ready') {
      t.backoff = 1;
      this.transition(endpoint, 'failed', `${t.passiveFailures} requests failed in a row; last: ${detail}`);
    }
    if (failure === 'connect' || failure === 'reset') this.probeNow(endpoint);
  }

  failover(model: string): void {
    this.opts.onFailover?.(model);
  }

  private onCatalog(e: CatalogEvent): void {
    if (e.type === 'endpoint-added') this.track(e.endpoint);
    else if (e.type === 'endpoint-removed') this.untrack(e.endpoint);
  }

  private track(endpoint: Endpoint): void {
    if (this.tracked.has(endpoint) || this.stopped) return;
    const t: Tracked = {
      successes: 0,
      failures: 0,
      backoff: 0,
      timer: undefined,
      running: false,
      again: false,
      passiveFailures: 0,
      suspect: false,
      warmedUp: !this.opts.probe.warmup,
      unanswered: 0,
      unansweredSince: 0,
      warnedAt: 0,
      mismatchWarned: new Set(),
    };
    this.tracked.set(endpoint, t);
    t.timer = this.clock.setTimeout(() => void this.run(endpoint), 0);
  }

  private untrack(endpoint: Endpoint): void {
    const t = this.tracked.get(endpoint);
    if (!t) return;
    this.clock.clearTimeout(t.timer);
    this.tracked.delete(endpoint);
  }

  private async run(endpoint: Endpoint): Promise<void> {
    const t = this.tracked.get(endpoint);
    if (!t || t.running || this.stopped) return;
    if (endpoint.draining) return; // draining endpoints only finish what they have; nothing to learn
    t.running = true;
    try {
      // the probe URL: a decode pod behind a routing sidecar is probed on its engine's own port (llm-router/probe-port)
      const target = { url: endpoint.probeUrl, models: endpoint.models };
      const sent = this.clock.now();
      let result = await this.check(target, this.probeOpts);
      if (this.tracked.get(endpoint) !== t) return;
      // what the engine holds now: an adapter a restarted engine no longer lists is no longer routed to it
      if (result.adapters) this.catalog.recordAdapters(endpoint, result.adapters, sent);
      // what its models are loaded from: kvaware's tokenizer, when nothing else names one (--tokenizer auto)
      if (result.roots) this.catalog.recordModelRoots(endpoint, result.roots);
      if (result.verdict === 'ready' && !t.warmedUp) {
        const w = await warmup(target, endpoint.models[0] as string, {
          ...this.probeOpts,
          timeoutMs: Math.max(this.opts.probe.timeoutMs, 30_000),
        });
        if (w.ok) t.warmedUp = true;
        else result = { verdict: 'serving-api', refused: false, detail: w.detail };
      }
      this.catalog.recordProbe(endpoint, { at: this.clock.now(), ok: result.verdict === 'ready', detail: result.detail });
      this.noteReachability(endpoint, t, result);
      this.noteMismatch(endpoint, t, result);
      if (t.suspect) {
        t.suspect = false;
        if (result.verdict !== 'ready' && endpoint.state === 'ready') {
          t.backoff = 1;
          this.transition(endpoint, 'failed', `${t.passiveFailures} requests answered 5xx in a row and the probe failed: ${result.detail}`);
          return;
        }
        t.passiveFailures = 0;
      }
      const next = afterProbe(endpoint, t, result, this.opts.probe, this.clock.now());
      if (next.state === 'ready') t.passiveFailures = 0;
      this.transition(endpoint, next.state, next.error);
    } finally {
      t.running = false;
      if (this.tracked.get(endpoint) === t && !this.stopped) {
        const delay = t.again ? 0 : nextProbeDelay(endpoint.state, t, this.opts.probe, this.opts.wanted?.(endpoint.models) ?? false);
        t.again = false;
        this.clock.clearTimeout(t.timer);
        t.timer = this.clock.setTimeout(() => void this.run(endpoint), delay);
      }
    }
  }

  /** Says out loud that an endpoint answers nothing at all (WARN, then every few minutes), and when it answers again. */
  private noteReachability(endpoint: Endpoint, t: Tracked, result: ProbeResult): void {
    const now = this.clock.now();
    if (result.verdict !== 'unreachable') {
      if (endpoint.unreachable !== undefined) {
        this.log.info(
          { endpoint: endpoint.url, models: endpoint.models, unreachableForMs: now - t.unansweredSince, probe: result.detail },
          'engine reachable again',
        );
        this.catalog.setUnreachable(endpoint, undefined);
      }
      t.unanswered = 0;
      t.warnedAt = 0;
      return;
    }
    if (t.unanswered === 0) t.unansweredSince = endpoint.everReady ? now : Math.min(now, endpoint.discoveredAt);
    t.unanswered++;
    const graceOver = t.unanswered >= UNREACHABLE_AFTER_PROBES && now - t.unansweredSince >= UNREACHABLE_AFTER_MS;
    if (!endpoint.everReady && !graceOver) return;
    const kind = unreachableKind(result.refused, result.detail);
    const seconds = Math.round((now - t.unansweredSince) / 1000);
    this.catalog.setUnreachable(endpoint, { why: `${kind} (${result.detail})`, seconds });
    if (t.warnedAt === 0 || now - t.warnedAt >= UNREACHABLE_WARN_EVERY_MS) {
      t.warnedAt = now;
      this.log.warn(
        { endpoint: endpoint.url, models: endpoint.models, error: result.detail, unreachableForMs: now - t.unansweredSince },
        `engine unreachable: ${endpoint.url} (${kind}: ${result.detail})`,
      );
    }
  }

  /**
   * Says at once, in a WARN line per endpoint and model, that the engine serves other models than the one declared (a
   * name mismatch is no load: nothing changes by waiting); the catalog answers its model unavailable, naming them.
   */
  private noteMismatch(endpoint: Endpoint, t: Tracked, result: ProbeResult): void {
    const mismatch = result.mismatch;
    this.catalog.setServesInstead(endpoint, mismatch?.serves);
    if (mismatch === undefined) {
      if (result.verdict === 'ready') t.mismatchWarned.clear();
      return;
    }
    const serves = mismatch.serves.map((n) => JSON.stringify(n)).join(', ');
    for (const model of mismatch.missing) {
      if (t.mismatchWarned.has(model)) continue;
      t.mismatchWarned.add(model);
      this.log.warn(
        { endpoint: endpoint.url, model, serves: mismatch.serves },
        `engine serves a different model: ${endpoint.url} serves ${serves}, not ${JSON.stringify(model)}; declare that name or an alias`,
      );
    }
  }

  private transition(endpoint: Endpoint, state: Endpoint['state'], error: string | undefined): void {
    const from = endpoint.state;
    this.catalog.setState(endpoint, state, error);
    if (from !== endpoint.state) {
      const level = endpoint.state === 'failed' ? 'warn' : 'info';
      this.log[level](
        { endpoint: endpoint.url, models: endpoint.models, from, to: endpoint.state, reason: error ?? endpoint.lastProbe?.detail },
        'endpoint state changed',
      );
    }
  }
}
