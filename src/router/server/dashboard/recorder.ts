// Turns what the catalog, the prober and scaling report into timeline events, and keeps what the dashboard shows
// beside the present state: since when each model is in its state, and its last cold starts.
import type { CatalogEvent, ModelCatalog } from '../../catalog/catalog.js';
import type { ModelState } from '../../core/model.js';
import type { ColdStart } from '../../scaling/cold-start.js';
import type { WakeAlarm } from '../../scaling/demand.js';
import { isShared, type Happening, type Timeline } from './timeline.js';
import type { LoadResult, UnloadReason } from '../../core/lora.js';

/** cold starts kept per model */
const COLD_STARTS_KEPT = 5;
/** failovers (and migrations) of one model within this window are one timeline event */
const FAILOVER_WINDOW_MS = 1_000;

interface ModelRecord {
  state: ModelState;
  since: number;
}

export class TimelineRecorder {
  private readonly models = new Map<string, ModelRecord>();
  private readonly coldStartsByModel = new Map<string, ColdStart[]>();
  private readonly failovers = new Map<string, number>();
  private failoverTimer: NodeJS.Timeout | undefined;
  /** streams broken mid-way per model within the window: continued, ended */
  private readonly migrations = new Map<string, { migrated: number; ended: number }>();
  private migrationTimer: NodeJS.Timeout | undefined;
  private unsubscribe: (() => void) | undefined;

  constructor(
    private readonly catalog: ModelCatalog,
    private readonly timeline: Timeline,
    /** why a model is in its state, in a sentence (the dashboard's view computes it) */
    private readonly reason: (model: string) => string,
    private readonly now: () => number = Date.now,
    /** under --workers: tells the other workers what happened in this one alone */
    private readonly share?: (h: Happening) => void,
  ) {}

  /** What another worker of the instance relayed (one of the shared kinds). */
  relayed(h: Happening, worker: number): void {
    this.timeline.add(h, worker);
  }

  /** Adds what happened here; the kinds that happen in one worker alone are told to the others too. */
  private add(h: Happening): void {
    this.timeline.add(h);
    if (this.share && isShared(h)) this.share(h);
  }

  start(): void {
    const now = this.now();
    for (const m of this.catalog.models()) if (!m.aliasOf) this.models.set(m.id, { state: m.status, since: now });
    this.unsubscribe = this.catalog.onChange((e) => this.onCatalog(e));
  }

  stop(): void {
    this.unsubscribe?.();
    clearTimeout(this.failoverTimer);
    this.failoverTimer = undefined;
    clearTimeout(this.migrationTimer);
    this.migrationTimer = undefined;
  }

  /** ms since epoch since when the model is in its present state (since this process started, at the earliest) */
  since(model: string): number | undefined {
    return this.models.get(model)?.since;
  }

  /** The model's last cold starts, oldest first. */
  coldStarts(model: string): readonly ColdStart[] {
    return this.coldStartsByModel.get(model) ?? [];
  }

  coldStart(c: ColdStart): void {
    const kept = [...this.coldStarts(c.model), c].slice(-COLD_STARTS_KEPT);
    this.coldStartsByModel.set(c.model, kept);
    this.add({
      type: 'cold-start',
      model: c.model,
      kind: c.kind,
      seconds: Math.round(c.ms / 100) / 10,
      endpoint: c.endpoint ?? null,
    });
  }

  wakeAlarm(a: WakeAlarm): void {
    this.add({
      type: 'wake-alarm',
      model: a.model,
      raised: a.raised,
      demandForSeconds: a.demandForSeconds,
      cleared: a.cleared ?? null,
    });
  }

  /** The router asked an engine to load an adapter. */
  adapterLoaded(e: { adapter: string; endpoint: string; result: LoadResult; seconds: number; detail: string }): void {
    const failed = e.result === 'failed' || e.result === 'unsupported';
    this.add({
      type: 'adapter-load',
      adapter: e.adapter,
      endpoint: e.endpoint,
      result: e.result,
      seconds: Math.round(e.seconds * 1000) / 1000,
      detail: failed ? e.detail : null,
    });
  }

  /** The router unloaded an adapter to free its slot. */
  adapterUnloaded(e: { adapter: string; endpoint: string; reason: UnloadReason; ok: boolean; detail: string }): void {
    this.add({
      type: 'adapter-unload',
      adapter: e.adapter,
      endpoint: e.endpoint,
      reason: e.reason,
      ok: e.ok,
      detail: e.ok ? null : e.detail,
    });
  }

  /** A request was retried on another endpoint; a burst of them becomes one event per model. */
  failover(model: string): void {
    this.failovers.set(model, (this.failovers.get(model) ?? 0) + 1);
    this.failoverTimer ??= setTimeout(() => this.flushFailovers(), FAILOVER_WINDOW_MS);
  }

  /**
   * A stream's engine failed mid-way: `migrated`, it went on on another endpoint; else it ended with the router's error
   * event. A burst of them becomes one event per model.
   */
  migration(model: string, migrated: boolean): void {
    const counts = this.migrations.get(model) ?? { migrated: 0, ended: 0 };
    if (migrated) counts.migrated++;
    else counts.ended++;
    this.migrations.set(model, counts);
    this.migrationTimer ??= setTimeout(() => this.flushMigrations(), FAILOVER_WINDOW_MS);
  }

  private flushMigrations(): void {
    this.migrationTimer = undefined;
    for (const [model, c] of this.migrations) this.add({ type: 'migration', model, migrated: c.migrated, ended: c.ended });
    this.migrations.clear();
  }

  private flushFailovers(): void {
    this.failoverTimer = undefined;
    for (const [model, count] of this.failovers) this.add({ type: 'failover', model, count });
    this.failovers.clear();
  }

  private onCatalog(e: CatalogEvent): void {
    if (e.type === 'endpoint-state') {
      const { endpoint } = e;
      const reason =
        endpoint.state === 'ready' ? (endpoint.lastProbe?.detail ?? null) : (endpoint.lastError ?? endpoint.lastProbe?.detail ?? null);
      this.add({
        type: 'endpoint-state',
        endpoint: endpoint.url,
        models: endpoint.models,
        from: e.from,
        to: endpoint.state,
        reason,
      });
    } else if (e.type === 'endpoint-added' || e.type === 'endpoint-removed') {
      const { endpoint } = e;
      this.add({ type: e.type, endpoint: endpoint.url, models: endpoint.models, source: endpoint.source });
    }
    this.observeModels();
  }

  /** Compares every model's state with the last one seen: a change is an event, with why the model is where it is. */
  private observeModels(): void {
    const now = this.now();
    const seen = new Set<string>();
    for (const m of this.catalog.models()) {
      if (m.aliasOf) continue;
      seen.add(m.id);
      const before = this.models.get(m.id);
      if (before?.state === m.status) continue;
      this.models.set(m.id, { state: m.status, since: now });
      this.add({ type: 'model-state', model: m.id, from: before?.state ?? null, to: m.status, reason: this.reason(m.id) });
    }
    for (const [model, before] of this.models) {
      if (seen.has(model)) continue;
      this.models.delete(model);
      this.coldStartsByModel.delete(model);
      this.add({ type: 'model-state', model, from: before.state, to: null, reason: 'neither declared nor served any more' });
    }
  }
}
