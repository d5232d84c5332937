// Learns how long each model takes to come up, so that Retry-After says how long the client should really wait.
// Two measurements per model: an endpoint's load (discovered -> ready, counted only when a probe saw it not ready
// first: an engine already up when the router found it loaded nothing the router saw) and a wake from zero (the model
// leaving scaled-to-zero -> its first ready endpoint, which includes the autoscaler and pod scheduling).
import type { CatalogEvent, ModelCatalog } from '../catalog/catalog.js';
import type { ModelState } from '../core/model.js';

export interface RetryAfterOptions {
  /** used until a model has a measurement */
  readonly defaultSeconds: number;
  readonly maxSeconds: number;
}

/** One measured cold start: an endpoint's load (discovered -> first ready) or a model's wake (left zero -> ready). */
export interface ColdStart {
  readonly model: string;
  readonly kind: 'load' | 'wake';
  readonly ms: number;
  /** ms since epoch when it ended */
  readonly at: number;
  /** the endpoint that loaded (kind load) */
  readonly endpoint?: string;
}

interface Learned {
  /** last measured endpoint load time, ms */
  loadMs?: number;
  /** last measured wake-from-zero time, ms */
  wakeMs?: number;
  /** when the model last left scaled-to-zero (a wake in progress) */
  wakeStartedAt?: number;
  state?: ModelState;
}

/** Pure: whole seconds to wait, from what was learned and how long the current cold start has run. */
export function expectedRemainingSeconds(expectedMs: number | undefined, elapsedMs: number, opts: RetryAfterOptions): number {
  if (expectedMs === undefined) return Math.min(opts.defaultSeconds, opts.maxSeconds);
  const remaining = Math.ceil((expectedMs - Math.max(0, elapsedMs)) / 1000);
  return Math.max(1, Math.min(remaining, opts.maxSeconds));
}

export class ColdStartLearner {
  private readonly models = new Map<string, Learned>();
  private unsubscribe: (() => void) | undefined;

  constructor(
    private readonly catalog: ModelCatalog,
    private readonly opts: RetryAfterOptions,
    private readonly now: () => number = Date.now,
    /** each measurement as it is made (the operator's timeline, the cold-start metric) */
    private readonly onMeasured: (c: ColdStart) => void = () => undefined,
  ) {}

  start(): void {
    this.observeStates();
    this.unsubscribe = this.catalog.onChange((e) => this.onEvent(e));
  }

  stop(): void {
    this.unsubscribe?.();
  }

  learned(model: string): { loadMs: number | undefined; wakeMs: number | undefined } {
    const l = this.models.get(model);
    return { loadMs: l?.loadMs, wakeMs: l?.wakeMs };
  }

  /** Retry-After for a model that cannot be served now. */
  retryAfterSeconds(model: string): number {
    const now = this.now();
    const l = this.models.get(model);
    const resolution = this.catalog.resolve(model);
    const state = resolution.kind === 'unavailable' ? resolution.state : undefined;
    const target = resolution.kind === 'unknown' ? model : resolution.model;
    const coming = this.catalog
      .endpoints()
      .filter((e) => e.models.includes(target) && !e.draining && (e.state === 'discovered' || e.state === 'serving-api'));
    if (state === 'loading' && coming.length > 0) {
      // the endpoint furthest along decides
      const started = Math.min(...coming.map((e) => e.discoveredAt));
      const sinceWake =
        l?.wakeStartedAt !== undefined && l.wakeMs !== undefined ? { expected: l.wakeMs, elapsed: now - l.wakeStartedAt } : undefined;
      if (l?.loadMs !== undefined) return expectedRemainingSeconds(l.loadMs, now - started, this.opts);
      if (sinceWake) return expectedRemainingSeconds(sinceWake.expected, sinceWake.elapsed, this.opts);
      return expectedRemainingSeconds(undefined, 0, this.opts);
    }
    if (state === 'loading' && l?.wakeStartedAt !== undefined) {
      return expectedRemainingSeconds(l.wakeMs ?? l.loadMs, now - l.wakeStartedAt, this.opts);
    }
    // replicas are wanted but no endpoint is discovered yet: at least one whole load lies ahead
    if (state === 'loading') return expectedRemainingSeconds(l?.loadMs, 0, this.opts);
    if (state === 'scaled-to-zero') return expectedRemainingSeconds(l?.wakeMs ?? l?.loadMs, 0, this.opts);
    return expectedRemainingSeconds(undefined, 0, this.opts);
  }

  private entry(model: string): Learned {
    let l = this.models.get(model);
    if (!l) {
      l = {};
      this.models.set(model, l);
    }
    return l;
  }

  private onEvent(e: CatalogEvent): void {
    if (
      e.type === 'endpoint-state' &&
      e.endpoint.state === 'ready' &&
      e.endpoint.firstReadyAt === e.endpoint.since &&
      e.endpoint.loadWatched
    ) {
      // its first readiness after the router saw it not ready: how long this model takes to load on an engine (one
      // ready at its first probe was up before the router looked, and its discovery -> ready says nothing of a load)
      const loadMs = e.endpoint.since - e.endpoint.discoveredAt;
      for (const m of e.endpoint.models) {
        this.entry(m).loadMs = loadMs;
        this.onMeasured({ model: m, kind: 'load', ms: loadMs, at: e.endpoint.since, endpoint: e.endpoint.url });
      }
    }
    this.observeStates();
  }

  /** Notices models leaving scaled-to-zero and arriving at ready, for wake measurements. */
  private observeStates(): void {
    const now = this.now();
    for (const view of this.catalog.models()) {
      if (view.aliasOf) continue;
      const l = this.entry(view.id);
      const before = l.state;
      l.state = view.status;
      if (before === view.status) continue;
      if (before === 'scaled-to-zero' && view.status !== 'scaled-to-zero') l.wakeStartedAt = now;
      if (view.status === 'ready' && l.wakeStartedAt !== undefined) {
        l.wakeMs = now - l.wakeStartedAt;
        l.wakeStartedAt = undefined;
        this.onMeasured({ model: view.id, kind: 'wake', ms: l.wakeMs, at: now });
      }
      if (view.status === 'scaled-to-zero') l.wakeStartedAt = undefined;
    }
  }
}
