// Demand per model as this router process sees it (arrivals, requests in flight, recent activity), the snapshot of it
// that other processes sum (src/router/scaling/demand-snapshot.ts), and the stuck-wake alarm: a model that has had demand for
// too long with no endpoint even discovered is not coming back by itself.
import type { ModelCatalog } from '../catalog/catalog.js';
import type { Logger } from '../util/log.js';
import { EMPTY_MODEL_DEMAND, type DemandSnapshot, type ModelDemandSnapshot } from './demand-snapshot.js';
import { MinuteCount } from './minute-count.js';

interface ModelDemand {
  arrivals: number;
  /** arrivals over the last minute */
  readonly lastMinute: MinuteCount;
  inFlight: number;
  lastArrivalAt: number | null;
  lastEndAt: number | null;
  lastHoldTimeoutAt: number | null;
  /** when demand started while the model had no endpoint at all; undefined when no episode is open */
  episodeStart: number | undefined;
  stalled: boolean;
}

export interface DemandOptions {
  /** how long after the last arrival, end or hold timeout a model still counts as in demand, ms */
  readonly graceMs: number;
  /** demand with no endpoint for longer than this raises the stuck-wake alarm, ms */
  readonly wakeAlarmMs: number;
  readonly now?: () => number;
  /** the stuck-wake alarm of a model was raised (or cleared), after demand of this many seconds */
  readonly onWakeAlarm?: (alarm: WakeAlarm) => void;
}

export interface WakeAlarm {
  readonly model: string;
  readonly raised: boolean;
  /** raised: how long the model has had demand with no endpoint; cleared: why */
  readonly demandForSeconds: number;
  readonly cleared?: 'endpoint-appeared' | 'demand-ended';
}

export class DemandTracker {
  private readonly models = new Map<string, ModelDemand>();
  /**
   * Requests for LoRA adapters, under the adapter's own name: shown in /demand only. What scales is the base's engines,
   * so the base counts them too (arrived()), and an adapter opens no stuck-wake episode of its own.
   */
  private readonly adapters = new Map<string, { arrivals: number; lastArrivalAt: number; readonly lastMinute: MinuteCount }>();
  private timer: NodeJS.Timeout | undefined;
  private readonly now: () => number;

  constructor(
    private readonly catalog: ModelCatalog,
    private readonly opts: DemandOptions,
    private readonly log: Logger,
    /** requests held for the model now (from the hold queue) */
    private readonly held: (model: string) => number = () => 0,
    /** when the oldest request held for the model now arrived (ms since epoch), or null */
    private readonly oldestHeldAt: (model: string) => number | null = () => null,
    /** requests waiting in flow control for the model now (a saturated pool) */
    private readonly queued: (model: string) => number = () => 0,
  ) {
    this.now = opts.now ?? Date.now;
  }

  start(): void {
    const every = Math.max(50, Math.min(1_000, this.opts.wakeAlarmMs / 4));
    this.timer = setInterval(() => this.checkWakes(), every);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private entry(model: string): ModelDemand {
    let d = this.models.get(model);
    if (!d) {
      d = {
        arrivals: 0,
        lastMinute: new MinuteCount(),
        inFlight: 0,
        lastArrivalAt: null,
        lastEndAt: null,
        lastHoldTimeoutAt: null,
        episodeStart: undefined,
        stalled: false,
      };
      this.models.set(model, d);
    }
    return d;
  }

  /** A request arrived for a declared model (whatever its answer will be). */
  arrived(model: string): void {
    const d = this.entry(model);
    const now = this.now();
    d.arrivals++;
    d.lastMinute.add(now);
    d.lastArrivalAt = now;
    if (d.episodeStart === undefined && !this.hasEndpoint(model)) d.episodeStart = now;
  }

  /** A request arrived for a LoRA adapter (its base's arrived() is called too). */
  adapterArrived(adapter: string): void {
    const now = this.now();
    let a = this.adapters.get(adapter);
    if (!a) {
      a = { arrivals: 0, lastArrivalAt: now, lastMinute: new MinuteCount() };
      this.adapters.set(adapter, a);
    }
    a.arrivals++;
    a.lastArrivalAt = now;
    a.lastMinute.add(now);
  }

  begin(model: string): void {
    this.entry(model).inFlight++;
  }

  end(model: string): void {
    const d = this.entry(model);
    d.inFlight = Math.max(0, d.inFlight - 1);
    d.lastEndAt = this.now();
  }

  /** A held request gave up waiting: demand happened, so the grace period starts from now too. */
  holdTimedOut(model: string): void {
    this.entry(model).lastHoldTimeoutAt = this.now();
  }

  inFlight(model: string): number {
    return this.models.get(model)?.inFlight ?? 0;
  }

  /** Held or in-flight requests here, or a request that arrived, ended or timed out here within the grace period. */
  active(model: string): boolean {
    if (this.held(model) > 0 || this.queued(model) > 0) return true;
    const d = this.models.get(model);
    if (!d) return false;
    const last = Math.max(d.lastArrivalAt ?? 0, d.lastEndAt ?? 0, d.lastHoldTimeoutAt ?? 0);
    return d.inFlight > 0 || (last > 0 && this.now() - last < this.opts.graceMs);
  }

  stalled(model: string): boolean {
    return this.models.get(model)?.stalled ?? false;
  }

  /**
   * This process's demand: every model in `models` (the declared and served ones, at zero when nothing happened)
   * plus any other model with activity, so a peer never mistakes "no entry" for "no demand".
   */
  snapshot(instance: string, models: Iterable<string>): DemandSnapshot {
    const out: Record<string, ModelDemandSnapshot> = {};
    const now = this.now();
    for (const m of models) out[m] = EMPTY_MODEL_DEMAND;
    // a held request has always arrived first, so every model with held requests has an entry here
    for (const [m, d] of this.models) {
      out[m] = {
        held: this.held(m),
        inFlight: d.inFlight,
        arrivals: d.arrivals,
        lastMinute: d.lastMinute.total(now),
        lastArrivalAt: d.lastArrivalAt,
        lastEndAt: d.lastEndAt,
        lastHoldTimeoutAt: d.lastHoldTimeoutAt,
        oldestHeldAt: this.oldestHeldAt(m),
        queued: this.queued(m),
      };
    }
    for (const [a, x] of this.adapters) {
      if (!this.models.has(a))
        out[a] = { ...EMPTY_MODEL_DEMAND, arrivals: x.arrivals, lastMinute: x.lastMinute.total(now), lastArrivalAt: x.lastArrivalAt };
    }
    return { instance, at: now, workers: 1, models: out };
  }

  /** Forgets models that are neither declared nor served any more and have nothing in flight or held. */
  prune(keep: ReadonlySet<string>): void {
    for (const [m, d] of this.models)
      if (!keep.has(m) && d.inFlight === 0 && this.held(m) === 0 && this.queued(m) === 0) this.models.delete(m);
    for (const a of this.adapters.keys()) if (!keep.has(a)) this.adapters.delete(a);
  }

  /** Any endpoint at all (an alias counts its target's): a map lookup, since arrived() runs on every request. */
  private hasEndpoint(model: string): boolean {
    return (this.catalog.model(model)?.endpoints ?? 0) > 0;
  }

  private clearAlarm(model: string, d: ModelDemand, now: number, cleared: 'endpoint-appeared' | 'demand-ended'): void {
    const demandForSeconds = d.episodeStart === undefined ? 0 : Math.round((now - d.episodeStart) / 1000);
    this.opts.onWakeAlarm?.({ model, raised: false, demandForSeconds, cleared });
  }

  /** Opens, raises and clears stuck-wake episodes. */
  checkWakes(): void {
    const now = this.now();
    for (const [model, d] of this.models) {
      if (this.hasEndpoint(model)) {
        if (d.stalled) {
          this.log.info({ model }, 'stuck wake cleared: an endpoint appeared');
          this.clearAlarm(model, d, now, 'endpoint-appeared');
        }
        d.episodeStart = undefined;
        d.stalled = false;
        continue;
      }
      if (!this.active(model)) {
        // demand went away before anything appeared: the episode ends without an alarm (or its alarm clears)
        if (d.stalled) this.clearAlarm(model, d, now, 'demand-ended');
        d.episodeStart = undefined;
        d.stalled = false;
        continue;
      }
      if (d.episodeStart === undefined) d.episodeStart = now;
      if (!d.stalled && now - d.episodeStart >= this.opts.wakeAlarmMs) {
        d.stalled = true;
        this.log.warn(
          { model, demandForSeconds: Math.round((now - d.episodeStart) / 1000), held: this.held(model) },
          'stuck wake: the model has had demand with no endpoint even discovered; check its autoscaler (KEDA ScaledObject, metrics) and workload',
        );
        this.opts.onWakeAlarm?.({ model, raised: true, demandForSeconds: Math.round((now - d.episodeStart) / 1000) });
      }
    }
  }
}
