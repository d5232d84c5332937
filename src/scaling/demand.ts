// Demand per model as an autoscaler sees it (arrivals, requests in flight, recent activity), and the stuck-wake
// alarm: a model that has had demand for too long with no endpoint even discovered is not coming back by itself.
import type { ModelCatalog } from '../catalog/catalog.js';
import type { Logger } from '../util/log.js';

interface ModelDemand {
  /** last arrival or completion: a model stays active for the grace period after its last request ended too */
  lastActivity: number;
  inFlight: number;
  /** when demand started while the model had no endpoint at all; undefined when no episode is open */
  episodeStart: number | undefined;
  stalled: boolean;
}

export interface DemandOptions {
  /** how long after the last arrival a model still counts as in demand (and IsActive for KEDA), ms */
  readonly graceMs: number;
  /** demand with no endpoint for longer than this raises the stuck-wake alarm, ms */
  readonly wakeAlarmMs: number;
  readonly now?: () => number;
}

export class DemandTracker {
  private readonly models = new Map<string, ModelDemand>();
  private timer: NodeJS.Timeout | undefined;
  private readonly now: () => number;

  constructor(
    private readonly catalog: ModelCatalog,
    private readonly opts: DemandOptions,
    private readonly log: Logger,
    /** requests held for the model now (from the hold queue) */
    private readonly held: (model: string) => number = () => 0,
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
      d = { lastActivity: 0, inFlight: 0, episodeStart: undefined, stalled: false };
      this.models.set(model, d);
    }
    return d;
  }

  /** A request arrived for a declared model (whatever its answer will be). */
  arrived(model: string): void {
    const d = this.entry(model);
    d.lastActivity = this.now();
    if (d.episodeStart === undefined && !this.hasEndpoint(model)) d.episodeStart = d.lastActivity;
  }

  begin(model: string): void {
    this.entry(model).inFlight++;
  }

  end(model: string): void {
    const d = this.entry(model);
    d.inFlight = Math.max(0, d.inFlight - 1);
    d.lastActivity = this.now();
  }

  inFlight(model: string): number {
    return this.models.get(model)?.inFlight ?? 0;
  }

  /** Held or in-flight requests, or a request that arrived or ended within the grace period. */
  active(model: string): boolean {
    const d = this.models.get(model);
    if (this.held(model) > 0) return true;
    if (!d) return false;
    return d.inFlight > 0 || (d.lastActivity > 0 && this.now() - d.lastActivity < this.opts.graceMs);
  }

  stalled(model: string): boolean {
    return this.models.get(model)?.stalled ?? false;
  }

  /** Any endpoint at all (an alias counts its target's): a map lookup, since arrived() runs on every request. */
  private hasEndpoint(model: string): boolean {
    return (this.catalog.model(model)?.endpoints ?? 0) > 0;
  }

  /** Opens, raises and clears stuck-wake episodes. */
  checkWakes(): void {
    const now = this.now();
    for (const [model, d] of this.models) {
      if (this.hasEndpoint(model)) {
        if (d.stalled) this.log.info({ model }, 'stuck wake cleared: an endpoint appeared');
        d.episodeStart = undefined;
        d.stalled = false;
        continue;
      }
      if (!this.active(model)) {
        // demand went away before anything appeared: the episode ends without an alarm (or its alarm clears)
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
      }
    }
  }
}
