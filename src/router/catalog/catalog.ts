// ModelCatalog: the one place that answers "can model M be served right now, and where?".
// The answer is a pure function of the present declarations and endpoint states — never of what this process saw earlier.
import type {
  Endpoint,
  EndpointSpec,
  EndpointState,
  EngineCacheConfig,
  EngineLoad,
  KvEventsSource,
  ProbeRecord,
  Unreachable,
} from '../core/endpoint.js';
import type { InFlightLedger } from '../core/forward.js';
import type { AdapterDeclaration } from '../core/lora.js';
import type { AdapterRoute, AdapterView, ModelState, ModelView, PdRoute, PdView, Resolution, UnavailableWhy } from '../core/model.js';
import { allowsDecodeOnly, type EndpointRole, type PdProtocol, type PdRole } from '../core/pd.js';
import { adapterAnswer } from './adapters.js';

export type CatalogEvent =
  | { readonly type: 'endpoint-added'; readonly endpoint: Endpoint }
  | { readonly type: 'endpoint-removed'; readonly endpoint: Endpoint }
  | { readonly type: 'endpoint-state'; readonly endpoint: Endpoint; readonly from: EndpointState }
  /** the LoRA adapters an endpoint holds changed (a probe's listing, a load or an unload) */
  | { readonly type: 'adapters'; readonly endpoint: Endpoint }
  /** the engine's KV-cache geometry (block size, GPU blocks) was first read or changed */
  | { readonly type: 'cache-config'; readonly endpoint: Endpoint }
  /** what the engine says its models are loaded from (Endpoint.modelRoots) was first read or changed */
  | { readonly type: 'model-roots'; readonly endpoint: Endpoint }
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

/** The decode side of a P/D model: endpoints that run the decode half, or whole requests. */
export function decodeCapable(e: Endpoint): boolean {
  return e.role !== 'prefill';
}

/** Which of a P/D model's roles have replicas wanted by a declaration (a workload scaled above zero). */
export interface RolesWanted {
  readonly prefill: boolean;
  readonly decode: boolean;
}

/** How far from serving a blocking role is: the worst one names the model's state. */
const BLOCKING_ORDER: readonly ModelState[] = ['scaled-to-zero', 'unavailable', 'loading'];

/**
 * The state of a model served P/D, and the roles with no ready endpoint. It is ready with a ready `both` endpoint
 * (which serves whole requests), or a ready decode endpoint and either a ready prefill endpoint or a protocol that
 * can run decode-only. Otherwise each blocking role's own state (modelState over that role's endpoints) is taken,
 * and the one furthest from serving names the model's: scaled-to-zero, then unavailable, then loading.
 */
export function pdModelState(
  endpoints: readonly Endpoint[],
  declaration: { declared: boolean; wanted: RolesWanted },
  protocol: PdProtocol,
): { state: ModelState; missing: PdRole[] } {
  let prefillReady = false;
  let decodeReady = false;
  let bothReady = false;
  for (const e of endpoints) {
    if (!isRoutable(e)) continue;
    if (e.role === 'prefill') prefillReady = true;
    else decodeReady = true;
    if (e.role === 'both') bothReady = true;
  }
  const missing: PdRole[] = [];
  if (!prefillReady) missing.push('prefill');
  if (!decodeReady) missing.push('decode');
  if (bothReady || (decodeReady && (prefillReady || allowsDecodeOnly(protocol)))) return { state: 'ready', missing };
  const blocking = missing.filter((role) => role === 'decode' || !allowsDecodeOnly(protocol));
  let state: ModelState = 'loading';
  let rank = BLOCKING_ORDER.length;
  for (const role of blocking) {
    const side = endpoints.filter((e) => (role === 'prefill' ? e.role === 'prefill' : decodeCapable(e)));
    const s = modelState(side, { declared: declaration.declared, replicasWanted: declaration.wanted[role] });
    const r = BLOCKING_ORDER.indexOf(s);
    if (r >= 0 && r < rank) {
      rank = r;
      state = s;
    }
  }
  return { state, missing: blocking };
}

/** What one source says of one model: the roles it declares, those it wants replicas of, the P/D protocols it names. */
interface DeclaredFacts {
  readonly roles: Set<EndpointRole>;
  readonly wanted: Set<EndpointRole>;
  readonly protocols: Set<PdProtocol>;
}

function factsKey(f: DeclaredFacts): string {
  return `${[...f.roles].sort().join(',')}|${[...f.wanted].sort().join(',')}|${[...f.protocols].sort().join(',')}`;
}

interface ModelEntry {
  readonly declaredBy: string[];
  readonly endpoints: Endpoint[];
  readonly roles: Set<EndpointRole>;
  readonly wanted: Set<EndpointRole>;
  readonly protocols: Set<PdProtocol>;
}

/** What a source says of one model it declares. */
export interface Declaration {
  readonly model: string;
  /** the source runs (or is starting) replicas for it, e.g. a Deployment with spec.replicas > 0 */
  readonly replicasWanted?: boolean;
  /** the role of the engines that serve it there (a prefill workload makes the model P/D); default both */
  readonly role?: EndpointRole;
  /** the P/D protocol the source names for it (the llm-router/pd-protocol annotation) */
  readonly pdProtocol?: PdProtocol;
}

/** The catalog's own view of the endpoints it holds: only it writes their fields (core/endpoint.ts). */
type Owned = { -readonly [K in keyof Endpoint]: Endpoint[K] };
const own = (e: Endpoint): Owned => e as Owned;

/** A load or unload the router made, kept until a probe listing that started after it has been applied. */
interface AdapterChange {
  readonly loaded: boolean;
  readonly parent: string;
  readonly at: number;
}

export class ModelCatalog implements InFlightLedger {
  private readonly declarations = new Map<string, ReadonlyMap<string, DeclaredFacts>>();
  /** LoRA adapters per source (--lora-adapters, the llm-router/lora-adapters annotation) */
  private readonly adapterDeclarations = new Map<string, readonly AdapterDeclaration[]>();
  /** per endpoint, the loads and unloads a probe that was already under way may not have seen */
  private readonly adapterChanges = new Map<Endpoint, Map<string, AdapterChange>>();
  private aliases: ReadonlyMap<string, string> = new Map();
  private readonly bySource = new Map<string, Map<string, Owned>>();
  private readonly listeners = new Set<Listener>();
  /** precomputed answers, rebuilt on every change so that resolve() is one map lookup */
  private resolutions = new Map<string, Resolution>();
  private views: ModelView[] = [];
  private viewsById = new Map<string, ModelView>();
  private readonly now: () => number;
  /** --pd-protocol: the protocol of a P/D model whose sources name none */
  private readonly defaultPdProtocol: PdProtocol;

  constructor(opts: { now?: () => number; pdProtocol?: PdProtocol } = {}) {
    this.now = opts.now ?? Date.now;
    this.defaultPdProtocol = opts.pdProtocol ?? 'vllm-nixl';
  }

  /** Replaces the set of models one source declares (e.g. known-models, static, kubernetes workloads). */
  setDeclarations(source: string, models: Iterable<string | Declaration>): void {
    const next = new Map<string, DeclaredFacts>();
    for (const m of models) {
      const d: Declaration = typeof m === 'string' ? { model: m } : m;
      let facts = next.get(d.model);
      if (!facts) {
        facts = { roles: new Set(), wanted: new Set(), protocols: new Set() };
        next.set(d.model, facts);
      }
      const role = d.role ?? 'both';
      facts.roles.add(role);
      if (d.replicasWanted === true) facts.wanted.add(role);
      if (d.pdProtocol !== undefined) facts.protocols.add(d.pdProtocol);
    }
    const prev = this.declarations.get(source);
    if (
      prev &&
      prev.size === next.size &&
      [...next].every(([m, f]) => prev.has(m) && factsKey(prev.get(m) as DeclaredFacts) === factsKey(f))
    )
      return;
    if (next.size === 0) this.declarations.delete(source);
    else this.declarations.set(source, next);
    this.rebuild();
    this.emit({ type: 'declarations' });
  }

  /**
   * Replaces the LoRA adapters one source declares. A declared adapter is a declared model whose base answers for it
   * (its base counts as declared by that source too).
   */
  setAdapterDeclarations(source: string, adapters: readonly AdapterDeclaration[]): void {
    const key = (list: readonly AdapterDeclaration[]): string =>
      list
        .map((a) => `${a.name}@${a.base}=${a.path}`)
        .sort()
        .join('\n');
    if (key(this.adapterDeclarations.get(source) ?? []) === key(adapters)) return;
    if (adapters.length === 0) this.adapterDeclarations.delete(source);
    else this.adapterDeclarations.set(source, [...adapters]);
    this.rebuild();
    this.emit({ type: 'declarations' });
  }

  /**
   * What a probe's /v1/models listing says an endpoint holds (name -> parent). `since`: when that probe was sent;
   * a load or unload the router made after it wins over the listing, which may not have seen it yet.
   */
  recordAdapters(e: Endpoint, listed: ReadonlyMap<string, string>, since: number): void {
    if (!this.contains(e)) return;
    const next = new Map(listed);
    const changes = this.adapterChanges.get(e);
    for (const [name, c] of changes ?? []) {
      if (c.at < since) changes?.delete(name);
      else if (c.loaded) next.set(name, c.parent);
      else next.delete(name);
    }
    this.setAdapters(e, next);
  }

  /** The router loaded `name` on the endpoint (its load call answered 200, or 400 "already loaded"). */
  adapterLoaded(e: Endpoint, name: string, parent: string): void {
    this.changeAdapter(e, name, { loaded: true, parent, at: this.now() });
  }

  /** The endpoint no longer holds `name`: the router unloaded it, or the engine answered that it does not serve it. */
  adapterGone(e: Endpoint, name: string): void {
    this.changeAdapter(e, name, { loaded: false, parent: '', at: this.now() });
  }

  /** The engine's adapter slots (max_lora of vllm:lora_requests_info), as its /metrics said. */
  recordAdapterSlots(e: Endpoint, slots: number): void {
    if (this.contains(e)) own(e).adapterSlots = slots;
  }

  recordCacheConfig(e: Endpoint, config: EngineCacheConfig): void {
    if (!this.contains(e)) return;
    const was = e.cacheConfig;
    if (was?.blockSize === config.blockSize && was?.numGpuBlocks === config.numGpuBlocks) return;
    own(e).cacheConfig = config;
    this.emit({ type: 'cache-config', endpoint: e });
  }

  /** What a probe read of where the engine's models are loaded from (served name -> Hub repo or path). */
  recordModelRoots(e: Endpoint, roots: ReadonlyMap<string, string>): void {
    if (!this.contains(e)) return;
    const was = e.modelRoots;
    if (was.size === roots.size && [...roots].every(([m, r]) => was.get(m) === r)) return;
    own(e).modelRoots = new Map(roots);
    this.emit({ type: 'model-roots', endpoint: e });
  }

  /** Whether the engine loads adapters at run time, as a load call found out (404 on the load path: it cannot). */
  recordAdapterLoading(e: Endpoint, can: boolean): void {
    if (!this.contains(e) || e.canLoadAdapters === can) return;
    own(e).canLoadAdapters = can;
    this.rebuild();
    this.emit({ type: 'adapters', endpoint: e });
  }

  private changeAdapter(e: Endpoint, name: string, change: AdapterChange): void {
    if (!this.contains(e)) return;
    let changes = this.adapterChanges.get(e);
    if (!changes) {
      changes = new Map();
      this.adapterChanges.set(e, changes);
    }
    changes.set(name, change);
    const next = new Map(e.adapters);
    if (change.loaded) next.set(name, change.parent);
    else next.delete(name);
    this.setAdapters(e, next);
  }

  private setAdapters(e: Endpoint, next: Map<string, string>): void {
    const current = e.adapters;
    if (current.size === next.size && [...next].every(([n, p]) => current.get(n) === p)) return;
    own(e).adapters = next;
    this.rebuild();
    this.emit({ type: 'adapters', endpoint: e });
  }

  /** alias -> target model; targets count as declared. */
  setAliases(aliases: ReadonlyMap<string, string>): void {
    if (aliases.size === this.aliases.size && [...aliases].every(([a, t]) => this.aliases.get(a) === t)) return;
    this.aliases = new Map(aliases);
    this.rebuild();
    this.emit({ type: 'declarations' });
  }

  /**
   * Level-triggered: `specs` is the complete present set of endpoints of `source`.
   * New ones start `discovered`; gone ones are removed; a changed URL, model list, role or probe target is a new endpoint.
   */
  setEndpoints(source: string, specs: readonly EndpointSpec[]): void {
    const current = this.bySource.get(source) ?? new Map<string, Owned>();
    const next = new Map<string, Owned>();
    const events: CatalogEvent[] = [];
    const now = this.now();
    for (const spec of specs) {
      const existing = current.get(spec.id);
      if (existing && sameSpec(existing, spec)) {
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
        role: spec.role ?? 'both',
        probeUrl: spec.probeUrl ?? spec.url,
        bootstrapPort: spec.bootstrapPort,
        pdProtocol: spec.pdProtocol,
        kvEvents: spec.kvEvents,
        tokenizer: spec.tokenizer,
        modelRoots: new Map(),
        state: spec.draining ? 'draining' : 'discovered',
        since: now,
        discoveredAt: now,
        everReady: false,
        firstReadyAt: undefined,
        loadWatched: false,
        draining: spec.draining === true,
        lastProbe: undefined,
        lastError: undefined,
        lastErrorAt: undefined,
        unreachable: undefined,
        servesInstead: undefined,
        inFlight: 0,
        adapters: new Map(),
        adapterSlots: undefined,
        cacheConfig: undefined,
        canLoadAdapters: undefined,
      };
      next.set(spec.id, endpoint);
      events.push({ type: 'endpoint-added', endpoint });
    }
    for (const [id, endpoint] of current) {
      if (!next.has(id)) events.push({ type: 'endpoint-removed', endpoint });
    }
    for (const e of events) if (e.type === 'endpoint-removed') this.adapterChanges.delete(e.endpoint);
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

  /** The prober's verdict that an endpoint answers nothing at all (or undefined: it answers again). */
  setUnreachable(e: Endpoint, unreachable: Unreachable | undefined): void {
    const was = e.unreachable;
    if (!this.contains(e) || (was?.why === unreachable?.why && was?.seconds === unreachable?.seconds)) return;
    own(e).unreachable = unreachable;
    this.rebuild();
  }

  /** What a probe found the engine serves instead of its expected models (a name mismatch), or undefined: no mismatch. */
  setServesInstead(e: Endpoint, names: readonly string[] | undefined): void {
    const was = e.servesInstead;
    if (!this.contains(e) || (was?.length === names?.length && (names ?? []).every((n, i) => was?.[i] === n))) return;
    own(e).servesInstead = names === undefined ? undefined : [...names];
    this.rebuild();
  }

  /** The prober's last look at an endpoint (shown in /engines; it does not move the state: setState does). */
  recordProbe(endpoint: Endpoint, record: ProbeRecord): void {
    if (!this.contains(endpoint)) return;
    const owned = own(endpoint);
    owned.lastProbe = record;
    // seen not ready before its first readiness: the load that follows is one the router watched
    if (!record.ok && !owned.everReady) owned.loadWatched = true;
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
        e = { declaredBy: [], endpoints: [], roles: new Set(), wanted: new Set(), protocols: new Set() };
        entries.set(model, e);
      }
      return e;
    };
    // sources in name order: the answer must not depend on which source spoke first
    for (const [source, models] of [...this.declarations].sort(bySourceName)) {
      for (const [m, facts] of models) {
        const e = entry(m);
        e.declaredBy.push(source);
        for (const r of facts.roles) e.roles.add(r);
        for (const r of facts.wanted) e.wanted.add(r);
        for (const p of facts.protocols) e.protocols.add(p);
      }
    }
    const adapters = this.adapterFacts();
    // a declared adapter declares its base: an adapter of a base no engine serves is at zero like it, not unknown
    for (const a of adapters.values()) {
      if (!a.declaration) continue;
      const e = entry(a.declaration.base);
      for (const source of a.declaredBy) if (!e.declaredBy.includes(source)) e.declaredBy.push(source);
    }
    for (const target of this.aliases.values()) {
      if (adapters.has(target) && !entries.has(target)) continue;
      const e = entry(target);
      if (!e.declaredBy.includes('alias')) e.declaredBy.push('alias');
    }
    for (const endpoints of this.bySource.values()) {
      for (const endpoint of endpoints.values())
        for (const m of endpoint.models) {
          const e = entry(m);
          e.endpoints.push(endpoint);
          e.roles.add(endpoint.role);
          if (endpoint.pdProtocol !== undefined) e.protocols.add(endpoint.pdProtocol);
        }
    }

    const resolutions = new Map<string, Resolution>();
    const views: ModelView[] = [];
    const answers = new Map<string, ModelAnswer>();
    for (const [model, e] of entries) {
      const answer = this.answer(e);
      answers.set(model, answer);
      resolutions.set(model, toResolution(model, model, false, answer));
      views.push(viewOf(model, answer, e.declaredBy));
    }
    for (const [name, a] of adapters) {
      // a model of that name wins: an engine's base model is never routed as an adapter
      if (entries.has(name)) continue;
      const base = a.declaration?.base ?? a.listing[0]?.adapters.get(name);
      const answer: ModelAnswer = adapterAnswer(name, a.declaration, a.listing, base === undefined ? undefined : answers.get(base));
      answers.set(name, answer);
      resolutions.set(name, toResolution(name, name, false, answer));
      views.push(viewOf(name, answer, a.declaredBy));
    }
    for (const [alias, target] of this.aliases) {
      const answer = answers.get(target) as ModelAnswer;
      resolutions.set(alias, toResolution(alias, target, true, answer));
      views.push(viewOf(alias, answer, ['alias'], target));
    }
    views.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    this.resolutions = resolutions;
    this.views = views;
    this.viewsById = new Map(views.map((v) => [v.id, v]));
  }

  /**
   * Every adapter declared or listed by an endpoint: its declaration (the first source in name order that declares the
   * name), the sources declaring it, and the endpoints listing it, in source and id order.
   */
  private adapterFacts(): Map<string, AdapterFacts> {
    const facts = new Map<string, AdapterFacts>();
    const fact = (name: string): AdapterFacts => {
      let f = facts.get(name);
      if (!f) {
        f = { declaration: undefined, declaredBy: [], listing: [] };
        facts.set(name, f);
      }
      return f;
    };
    for (const [source, list] of [...this.adapterDeclarations].sort(bySourceName)) {
      for (const d of list) {
        const f = fact(d.name);
        f.declaration ??= d;
        if (!f.declaredBy.includes(source)) f.declaredBy.push(source);
      }
    }
    for (const [, endpoints] of [...this.bySource].sort(bySourceName)) {
      for (const e of [...endpoints.values()].sort((a, b) => (a.id < b.id ? -1 : 1)))
        for (const name of e.adapters.keys()) fact(name).listing.push(e);
    }
    return facts;
  }

  /** One model's state, routable endpoints and view, from its declarations and endpoints. */
  private answer(e: ModelEntry): ModelAnswer {
    const answer = this.answerOf(e);
    if (answer.state === 'ready') return answer;
    const live = e.endpoints.filter((x) => !x.draining);
    // unavailable because every engine of it serves other models: the names, said at once (a wait changes nothing)
    const renamed = answer.state === 'unavailable' ? live.find((x) => x.servesInstead !== undefined) : undefined;
    if (renamed?.servesInstead) return { ...answer, why: { servesInstead: renamed.servesInstead } };
    const gone = live.find((x) => x.unreachable !== undefined);
    const u = gone?.unreachable;
    if (u === undefined) return answer;
    return {
      ...answer,
      unreachable: `${gone?.url}: ${u.why}${u.seconds > 0 ? ` for ${u.seconds} s` : ''}`,
      why: { unreachableFor: u.seconds },
    };
  }

  private answerOf(e: ModelEntry): ModelAnswer {
    const declared = e.declaredBy.length > 0;
    const routable = e.endpoints.filter(isRoutable);
    const counts = { endpoints: e.endpoints.length, ready: routable.length };
    if (!e.roles.has('prefill')) {
      const state = modelState(e.endpoints, { declared, replicasWanted: e.wanted.size > 0 });
      return { state, candidates: routable, counts };
    }
    const protocols = [...e.protocols].sort();
    const protocol = protocols[0] ?? this.defaultPdProtocol;
    const wanted = { prefill: e.wanted.has('prefill'), decode: e.wanted.has('decode') || e.wanted.has('both') };
    const { state, missing } = pdModelState(e.endpoints, { declared, wanted }, protocol);
    const prefill = routable.filter((x) => x.role === 'prefill');
    const pd: PdView = {
      protocol,
      ...(protocols.length > 1 ? { conflictingProtocols: protocols } : {}),
      prefill: { ready: prefill.length, total: e.endpoints.filter((x) => x.role === 'prefill').length },
      decode: { ready: routable.length - prefill.length, total: e.endpoints.filter(decodeCapable).length },
      missing,
    };
    return {
      state,
      candidates: routable.filter(decodeCapable),
      route: { protocol, prefill },
      missing,
      counts,
      pd,
    };
  }
}

function bySourceName<T>(a: [string, T], b: [string, T]): number {
  return a[0] < b[0] ? -1 : 1;
}

interface AdapterFacts {
  declaration: AdapterDeclaration | undefined;
  readonly declaredBy: string[];
  readonly listing: Endpoint[];
}

function viewOf(id: string, a: ModelAnswer, declaredBy: readonly string[], aliasOf?: string): ModelView {
  return {
    id,
    status: a.state,
    declaredBy,
    ...(aliasOf !== undefined ? { aliasOf } : {}),
    endpoints: a.counts.endpoints,
    readyEndpoints: a.counts.ready,
    ...(a.pd ? { pd: a.pd } : {}),
    ...(a.view ? { adapter: a.view } : {}),
    ...(a.unreachable ? { unreachable: a.unreachable } : {}),
    ...(a.why ? { why: a.why } : {}),
  };
}

/** What rebuild() computes for one model (or adapter), shared by it and its aliases. */
interface ModelAnswer {
  readonly state: ModelState;
  readonly candidates: readonly Endpoint[];
  readonly route?: PdRoute;
  readonly missing?: readonly PdRole[];
  readonly counts: { readonly endpoints: number; readonly ready: number };
  readonly pd?: PdView;
  /** an adapter: how it is served, and what /v1/models and /engines show of it */
  readonly adapter?: AdapterRoute;
  readonly view?: AdapterView;
  /** not ready and an endpoint answers nothing at all: "URL: why for N s" (operators only) */
  readonly unreachable?: string;
  /** not ready: why, as clients may learn it */
  readonly why?: UnavailableWhy;
}

function toResolution(requested: string, model: string, aliased: boolean, a: ModelAnswer): Resolution {
  const base = a.adapter ? { base: a.adapter.base } : {};
  if (a.state === 'ready')
    return {
      kind: 'routable',
      requested,
      model,
      aliased,
      candidates: a.candidates,
      ...(a.route ? { pd: a.route } : {}),
      ...(a.adapter ? { adapter: a.adapter } : {}),
      ...base,
    };
  return {
    kind: 'unavailable',
    requested,
    model,
    state: a.state,
    ...(a.missing ? { missing: a.missing } : {}),
    ...(a.why ? { why: a.why } : {}),
    ...base,
  };
}

function sameSpec(e: Endpoint, spec: EndpointSpec): boolean {
  return (
    e.url === spec.url &&
    e.models.length === spec.models.length &&
    e.models.every((x, i) => x === spec.models[i]) &&
    e.role === (spec.role ?? 'both') &&
    e.probeUrl === (spec.probeUrl ?? spec.url) &&
    e.bootstrapPort === spec.bootstrapPort &&
    e.pdProtocol === spec.pdProtocol &&
    sameKvEvents(e.kvEvents, spec.kvEvents) &&
    e.tokenizer === spec.tokenizer
  );
}

function sameKvEvents(a: KvEventsSource | undefined, b: KvEventsSource | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  return (
    a.eventsUrls.length === b.eventsUrls.length &&
    a.eventsUrls.every((u, i) => u === b.eventsUrls[i] && a.replayUrls[i] === b.replayUrls[i])
  );
}
