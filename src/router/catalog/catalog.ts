// ModelCatalog: the one place that answers "can model M be served right now, and where?".
// The answer is a pure function of the present declarations and endpoint states — never of what this process saw earlier.
import type { Endpoint, EndpointSpec, EndpointState, EngineLoad, ProbeRecord } from '../core/endpoint.js';
import type { InFlightLedger } from '../core/forward.js';
import type { ModelState, ModelView, Resolution } from '../core/model.js';

export type CatalogEvent =
  | { readonly type: 'endpoint-added'; readonly endpoint: Endpoint }
  | { readonly type: 'endpoint-removed'; readonly endpoint: Endpoint }
  | { readonly type: 'endpoint-state'; readonly endpoint: Endpoint; readonly from: EndpointState }
  | { readonly type: 'declarations' };

type Listener = (event: CatalogEvent) => void;

/**
 * The model state of a declared or served model, from its endpoints and whether any declaration wants replicas
 * (a Kubernetes workload scaled above zero whose pods are not ready yet is loading, not scaled to zero).
 */
export function modelState(
  endpoints: readonly Endpoint[],
  declaration: { declared: boolean; replicasWanted: boolean } = { declared: true, replicasWanted: false },
): ModelState {
  let live = 0;
  let comingUp = false;
  for (const e of endpoints) {
    if (e.draining) continue;
    if (e.state === 'ready') return 'ready';
    live++;
    if (e.state === 'discovered' || e.state === 'serving-api') comingUp = true;
  }
  if (comingUp) return 'loading';
  if (live > 0) return 'unavailable';
  if (declaration.replicasWanted) return 'loading';
  // only draining endpoints left: a declared model is on its way to zero; an undeclared one is going away
  return endpoints.length > 0 && !declaration.declared ? 'unavailable' : 'scaled-to-zero';
}

export function isRoutable(e: Endpoint): boolean {
  return e.state === 'ready' && !e.draining;
}

interface ModelEntry {
  readonly declaredBy: string[];
  readonly endpoints: Endpoint[];
  replicasWanted: boolean;
}

/** What a source says of one model it declares. */
export interface Declaration {
  readonly model: string;
  /** the source runs (or is starting) replicas for it, e.g. a Deployment with spec.replicas > 0 */
  readonly replicasWanted?: boolean;
}

/** The catalog's own view of the endpoints it holds: only it writes their fields (core/endpoint.ts). */
type Owned = { -readonly [K in keyof Endpoint]: Endpoint[K] };
const own = (e: Endpoint): Owned => e as Owned;

export class ModelCatalog implements InFlightLedger {
  private readonly declarations = new Map<string, ReadonlyMap<string, boolean>>();
  private aliases: ReadonlyMap<string, string> = new Map();
  private readonly bySource = new Map<string, Map<string, Owned>>();
  private readonly listeners = new Set<Listener>();
  /** precomputed answers, rebuilt on every change so that resolve() is one map lookup */
  private resolutions = new Map<string, Resolution>();
  private views: ModelView[] = [];
  private viewsById = new Map<string, ModelView>();
  private readonly now: () => number;

  constructor(opts: { now?: () => number } = {}) {
    this.now = opts.now ?? Date.now;
  }

  /** Replaces the set of models one source declares (e.g. known-models, static, kubernetes workloads). */
  setDeclarations(source: string, models: Iterable<string | Declaration>): void {
    const next = new Map<string, boolean>();
    for (const m of models) {
      if (typeof m === 'string') next.set(m, next.get(m) ?? false);
      else next.set(m.model, (next.get(m.model) ?? false) || m.replicasWanted === true);
    }
    const prev = this.declarations.get(source);
    if (prev && prev.size === next.size && [...next].every(([m, w]) => prev.get(m) === w)) return;
    if (next.size === 0) this.declarations.delete(source);
    else this.declarations.set(source, next);
    this.rebuild();
    this.emit({ type: 'declarations' });
  }

  /** alias -> target model; targets count as declared. */
  setAliases(aliases: ReadonlyMap<string, string>): void {
    this.aliases = new Map(aliases);
    this.rebuild();
    this.emit({ type: 'declarations' });
  }

  /**
   * Level-triggered: `specs` is the complete present set of endpoints of `source`.
   * New ones start `discovered`; gone ones are removed; a changed URL or model list is a new endpoint.
   */
  setEndpoints(source: string, specs: readonly EndpointSpec[]): void {
    const current = this.bySource.get(source) ?? new Map<string, Owned>();
    const next = new Map<string, Owned>();
    const events: CatalogEvent[] = [];
    const now = this.now();
    for (const spec of specs) {
      const existing = current.get(spec.id);
      if (existing && existing.url === spec.url && sameList(existing.models, spec.models)) {
        next.set(spec.id, existing);
        if (spec.draining && !existing.draining) {
          const from = existing.state;
          existing.draining = true;
          existing.state = 'draining';
          existing.since = now;
          events.push({ type: 'endpoint-state', endpoint: existing, from });
        }
        continue;
      }
      if (existing) events.push({ type: 'endpoint-removed', endpoint: existing });
      const endpoint: Owned = {
        id: spec.id,
        source,
        url: spec.url,
        models: [...spec.models],
        state: spec.draining ? 'draining' : 'discovered',
        since: now,
        discoveredAt: now,
        everReady: false,
        firstReadyAt: undefined,
        draining: spec.draining === true,
        lastProbe: undefined,
        lastError: undefined,
        lastErrorAt: undefined,
        inFlight: 0,
      };
      next.set(spec.id, endpoint);
      events.push({ type: 'endpoint-added', endpoint });
    }
    for (const [id, endpoint] of current) {
      if (!next.has(id)) events.push({ type: 'endpoint-removed', endpoint });
    }
    if (events.length === 0) return;
    if (next.size === 0) this.bySource.delete(source);
    else this.bySource.set(source, next);
    this.rebuild();
    for (const e of events) this.emit(e);
  }

  /** Moves an endpoint through its lifecycle; the prober and passive health are the only callers. */
  setState(e: Endpoint, state: EndpointState, error?: string): void {
    if (!this.contains(e)) return;
    const endpoint = own(e);
    if (error !== undefined) {
      endpoint.lastError = error;
      endpoint.lastErrorAt = this.now();
    }
    if (endpoint.draining && state !== 'draining') return;
    if (endpoint.state === state) return;
    const from = endpoint.state;
    endpoint.state = state;
    endpoint.since = this.now();
    if (state === 'ready' && !endpoint.everReady) {
      endpoint.everReady = true;
      endpoint.firstReadyAt = endpoint.since;
    }
    this.rebuild();
    this.emit({ type: 'endpoint-state', endpoint, from });
  }

  /** The prober's last look at an endpoint (shown in /engines; it does not move the state: setState does). */
  recordProbe(endpoint: Endpoint, record: ProbeRecord): void {
    if (this.contains(endpoint)) own(endpoint).lastProbe = record;
  }

  /** The load an engine reported on its /metrics (least-load routing, /engines). */
  recordLoad(endpoint: Endpoint, load: EngineLoad): void {
    if (this.contains(endpoint)) own(endpoint).engineLoad = load;
  }

  /** A request is being forwarded to the endpoint (on the request path: no lookup, no allocation). */
  requestStarted(endpoint: Endpoint): void {
    own(endpoint).inFlight++;
  }

  requestEnded(endpoint: Endpoint): void {
    own(endpoint).inFlight--;
  }

  contains(endpoint: Endpoint): boolean {
    return this.bySource.get(endpoint.source)?.get(endpoint.id) === endpoint;
  }

  resolve(requested: string): Resolution {
    return this.resolutions.get(requested) ?? { kind: 'unknown', requested };
  }

  /** One model's (or alias's) view, by name: a map lookup. */
  model(name: string): ModelView | undefined {
    return this.viewsById.get(name);
  }

  models(): readonly ModelView[] {
    return this.views;
  }

  endpoints(): Endpoint[] {
    const all: Endpoint[] = [];
    for (const m of this.bySource.values()) all.push(...m.values());
    return all;
  }

  onChange(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private emit(event: CatalogEvent): void {
    for (const l of this.listeners) l(event);
  }

  private rebuild(): void {
    const entries = new Map<string, ModelEntry>();
    const entry = (model: string): ModelEntry => {
      let e = entries.get(model);
      if (!e) {
        e = { declaredBy: [], endpoints: [], replicasWanted: false };
        entries.set(model, e);
      }
      return e;
    };
    for (const [source, models] of this.declarations) {
      for (const [m, wanted] of models) {
        const e = entry(m);
        e.declaredBy.push(source);
        if (wanted) e.replicasWanted = true;
      }
    }
    for (const target of this.aliases.values()) {
      const e = entry(target);
      if (!e.declaredBy.includes('alias')) e.declaredBy.push('alias');
    }
    for (const endpoints of this.bySource.values()) {
      for (const endpoint of endpoints.values()) for (const m of endpoint.models) entry(m).endpoints.push(endpoint);
    }

    const resolutions = new Map<string, Resolution>();
    const views: ModelView[] = [];
    for (const [model, e] of entries) {
      const state = modelState(e.endpoints, { declared: e.declaredBy.length > 0, replicasWanted: e.replicasWanted });
      resolutions.set(model, toResolution(model, model, false, state, e.endpoints));
      views.push({
        id: model,
        status: state,
        declaredBy: e.declaredBy,
        endpoints: e.endpoints.length,
        readyEndpoints: e.endpoints.filter(isRoutable).length,
      });
    }
    for (const [alias, target] of this.aliases) {
      const e = entries.get(target) as ModelEntry;
      const state = modelState(e.endpoints, { declared: e.declaredBy.length > 0, replicasWanted: e.replicasWanted });
      resolutions.set(alias, toResolution(alias, target, true, state, e.endpoints));
      views.push({
        id: alias,
        status: state,
        declaredBy: ['alias'],
        aliasOf: target,
        endpoints: e.endpoints.length,
        readyEndpoints: e.endpoints.filter(isRoutable).length,
      });
    }
    views.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    this.resolutions = resolutions;
    this.views = views;
    this.viewsById = new Map(views.map((v) => [v.id, v]));
  }
}

function toResolution(requested: string, model: string, aliased: boolean, state: ModelState, endpoints: readonly Endpoint[]): Resolution {
  if (state === 'ready') return { kind: 'routable', requested, model, aliased, candidates: endpoints.filter(isRoutable) };
  return { kind: 'unavailable', requested, model, state };
}

function sameList(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}
