// What the dashboard shows, as one JSON value: every model with its state, why, and its demand; every endpoint as
// GET /engines shows it. Demand figures are the whole instance's (every worker, as GET /demand); endpoint states,
// probes, Retry-After and cold starts are this process's view (under --workers each worker probes for itself).
import type { ModelCatalog } from '../../catalog/catalog.js';
import type { Endpoint } from '../../core/endpoint.js';
import type { ModelState, ModelView, RoleCount } from '../../core/model.js';
import type { DemandView } from '../../scaling/demand-view.js';
import type { Scaling } from '../../scaling/index.js';
import { endpointView, type EndpointView } from '../admin.js';
import { explainModel } from './explain.js';
import type { TimelineRecorder } from './recorder.js';
import { kvState, type KvDecisionTally, type KvState, type KvStatusReader } from './kv-view.js';

export interface InstanceInfo {
  readonly version: string;
  readonly pid: number;
  /** this worker's number under --workers, else null */
  readonly worker: number | null;
  readonly workers: number;
  /** ms since epoch */
  readonly startedAt: number;
}

export interface ModelRow {
  readonly id: string;
  readonly status: ModelState;
  /** ms since epoch since when it is in this state (at the earliest when this process started) */
  readonly since: number | null;
  /** why it is in this state */
  readonly reason: string;
  readonly declaredBy: readonly string[];
  readonly aliases: readonly string[];
  readonly endpoints: number;
  readonly readyEndpoints: number;
  /** per role, when any of its endpoints is a prefill or decode one (P/D) */
  readonly roles: Readonly<Record<string, RoleCount>> | null;
  /** held and in flight now, arrivals since start: the whole instance */
  readonly held: number;
  readonly inFlight: number;
  readonly arrivals: number;
  /** age of the oldest held request, seconds (0 when none) */
  readonly oldestHeldSeconds: number;
  /** requests waiting in flow control for room on its engines (every worker) */
  readonly queued: number;
  /** its pool's saturation as flow control reads it (1 or more: saturated); null without --flow-control */
  readonly saturation: number | null;
  /** requests that arrived in the last minute (the router's own record, every worker); null from a router that predates it */
  readonly demandPerMinute: number | null;
  /** what a client is told to wait now (503 Retry-After), null when the model is ready */
  readonly retryAfterSeconds: number | null;
  /** how long a request is held for it (--cold-start-wait), 0 when it is answered 503 at once */
  readonly holdSeconds: number;
  readonly wakeStalled: boolean;
  readonly coldStarts: readonly {
    readonly kind: 'load' | 'wake';
    readonly seconds: number;
    readonly at: number;
    readonly endpoint: string | null;
  }[];
}

/** An endpoint as GET /engines shows it (its role included). */
export type EndpointRow = EndpointView;

export interface DashboardState {
  /** ms since epoch on the router's clock: ages on the page are computed against it */
  readonly at: number;
  readonly instance: InstanceInfo;
  readonly models: readonly ModelRow[];
  readonly endpoints: readonly EndpointRow[];
  /** KV-cache-aware routing (kvaware): the endpoints' event streams and the models' decisions; null when not in use */
  readonly kv: KvState | null;
}

/** Ready and total endpoints per role; null when every endpoint serves whole requests (no P/D). */
function roleCounts(endpoints: readonly Endpoint[]): Record<string, RoleCount> | null {
  const counts: Record<string, RoleCount> = {};
  let any = false;
  for (const e of endpoints) {
    const role = e.role;
    if (role !== 'both') any = true;
    const c = counts[role] ?? { ready: 0, total: 0 };
    counts[role] = { ready: c.ready + (e.state === 'ready' && !e.draining ? 1 : 0), total: c.total + 1 };
  }
  return any ? counts : null;
}

export interface ViewSources {
  readonly catalog: ModelCatalog;
  readonly scaling: Scaling;
  readonly demandView: DemandView;
  readonly recorder: TimelineRecorder;
  readonly instance: InstanceInfo;
  readonly statsIntervalMs: number;
  /** the KV-cache event streams and the kvaware decisions, once the router follows them */
  readonly kv?: () => { readonly streams: KvStatusReader; readonly tally: KvDecisionTally } | undefined;
  /** flow control (--flow-control): a model pool's saturation */
  readonly flow?: () => { saturation(model: string): number } | undefined;
}

export class DashboardView {
  constructor(private readonly s: ViewSources) {}

  /** Why the model is in its state (also given with each model-state event on the timeline). */
  reason(model: string): string {
    const view = this.s.catalog.model(model);
    if (!view) return 'neither declared nor served';
    const endpoints = this.s.catalog.endpoints().filter((e) => e.models.includes(model));
    return explainModel(view, endpoints, {
      held: this.s.scaling.hold.held(model),
      stalled: this.s.scaling.demand.stalled(model),
      ...this.baseOf(view),
    });
  }

  /** An adapter's base state, for its explanation. */
  private baseOf(view: ModelView): { baseStatus?: ModelState } {
    const status = view.adapter ? this.s.catalog.model(view.adapter.parent)?.status : undefined;
    return status ? { baseStatus: status } : {};
  }

  /** The present state. */
  async state(): Promise<DashboardState> {
    const { catalog, scaling, recorder } = this.s;
    const demand = await this.s.demandView.instance();
    const now = Date.now();
    const endpoints = catalog.endpoints();
    const aliases = new Map<string, string[]>();
    for (const m of catalog.models()) if (m.aliasOf) aliases.set(m.aliasOf, [...(aliases.get(m.aliasOf) ?? []), m.id]);
    const models = catalog
      .models()
      .filter((m) => !m.aliasOf)
      .map((m): ModelRow => {
        const mine = endpoints.filter((e) => e.models.includes(m.id));
        const d = demand.models[m.id];
        const held = d?.held ?? 0;
        const stalled = scaling.demand.stalled(m.id);
        const flow = this.s.flow?.();
        return {
          id: m.id,
          status: m.status,
          since: recorder.since(m.id) ?? null,
          reason: explainModel(m, mine, { held, stalled, ...this.baseOf(m) }),
          declaredBy: m.declaredBy,
          aliases: aliases.get(m.id) ?? [],
          endpoints: m.endpoints,
          readyEndpoints: m.readyEndpoints,
          roles: roleCounts(mine),
          held,
          inFlight: d?.inFlight ?? 0,
          arrivals: d?.arrivals ?? 0,
          oldestHeldSeconds: d?.oldestHeldAt ? Math.max(0, (demand.at - d.oldestHeldAt) / 1000) : 0,
          queued: d?.queued ?? 0,
          saturation: flow === undefined ? null : Math.round(flow.saturation(m.adapter?.parent ?? m.id) * 100) / 100,
          demandPerMinute: d === undefined ? 0 : (d.lastMinute ?? null),
          retryAfterSeconds: m.status === 'ready' ? null : scaling.coldStart.retryAfterSeconds(m.id),
          holdSeconds: scaling.hold.waitMs(m.id) / 1000,
          wakeStalled: stalled,
          coldStarts: recorder
            .coldStarts(m.id)
            .map((c) => ({ kind: c.kind, seconds: Math.round(c.ms / 100) / 10, at: c.at, endpoint: c.endpoint ?? null })),
        };
      });
    const kv = this.s.kv?.();
    return {
      at: now,
      instance: this.s.instance,
      models,
      endpoints: endpoints.map((e) => endpointView(e, now, this.s.statsIntervalMs)),
      kv: kv ? kvState(catalog, kv.streams, kv.tally) : null,
    };
  }
}
