// Admin and listing endpoints: liveness, the router's own readiness, metrics, the engine table and the model list.
import type { ServerResponse } from 'node:http';
import type { ModelCatalog } from '../catalog/catalog.js';
import type { Endpoint, EndpointState, EngineLoad } from '../core/endpoint.js';
import { isFresh, lastErrorIsPast } from '../core/endpoint.js';
import type { RouterMetrics } from '../metrics/metrics.js';
import { stateWords } from './errors.js';
import type { EndpointRole } from '../core/pd.js';
import type { KvEndpointStatus, KvJoinReplay } from '../kv/subscriber.js';
import type { TokenizerStatus } from '../kv/tokenizer-source.js';
import type { KvWarning } from '../kv/warnings.js';

export function sendJson(res: ServerResponse, status: number, value: unknown): void {
  const body = JSON.stringify(value);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

export interface ReadinessView {
  /** discovery sources that have not completed their first sync */
  pendingSources(): readonly string[];
  shuttingDown(): boolean;
}

export function health(res: ServerResponse): void {
  sendJson(res, 200, { status: 'ok' });
}

export function ready(res: ServerResponse, view: ReadinessView): void {
  if (view.shuttingDown()) return sendJson(res, 503, { status: 'shutting-down' });
  const pending = view.pendingSources();
  if (pending.length > 0) return sendJson(res, 503, { status: 'syncing', pending });
  sendJson(res, 200, { status: 'ready' });
}

export async function metrics(res: ServerResponse, m: RouterMetrics): Promise<void> {
  const { contentType, body } = await m.exposition();
  res.writeHead(200, { 'content-type': contentType, 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

export interface LoadView {
  readonly running: number;
  readonly waiting: number;
  readonly kvUsage: number | null;
  readonly at: string;
  readonly fresh: boolean;
}

export interface EndpointView {
  readonly id: string;
  readonly url: string;
  readonly source: string;
  readonly models: readonly string[];
  readonly role: EndpointRole;
  /** where probes go, when not to `url` (llm-router/probe-port) */
  readonly probeUrl?: string;
  /** an SGLang prefill's bootstrap port (sglang.ai/bootstrap-port) */
  readonly bootstrapPort?: number;
  readonly state: EndpointState;
  readonly since: string;
  readonly discoveredAt: string;
  readonly everReady: boolean;
  readonly inFlight: number;
  readonly load: LoadView | null;
  readonly lastProbe: { readonly at: string; readonly ok: boolean; readonly detail: string } | null;
  readonly lastError: string | null;
  readonly lastErrorAt: string | null;
  /** the endpoint has been ready since the error: it is history, not the present fault */
  readonly lastErrorPast: boolean;
  /** LoRA adapters it lists as loaded */
  readonly adapters: readonly string[];
  /** adapters it runs at once, from its /metrics (max_lora); null when it reports none */
  readonly adapterSlots: number | null;
  /** it loads adapters at run time; false once its load path answered 404; null until a load was asked of it */
  readonly canLoadAdapters: boolean | null;
  /** what the engine says its models are loaded from (vLLM's /v1/models root, SGLang's tokenizer_path), once probed */
  readonly modelRoots?: Readonly<Record<string, string>>;
}

/** The engine's last scraped load; `fresh: false` means routing treats it as unknown. */
function loadView(load: EngineLoad | undefined, now: number, statsIntervalMs: number): LoadView | null {
  if (!load) return null;
  return {
    running: load.running,
    waiting: load.waiting,
    kvUsage: load.kvUsage ?? null,
    at: new Date(load.at).toISOString(),
    fresh: isFresh(load, now, statsIntervalMs),
  };
}

/** One endpoint as GET /engines shows it (its fields are documented in docs/operations.md, "GET /engines"). */
export function endpointView(e: Endpoint, now: number, statsIntervalMs: number): EndpointView {
  return {
    id: e.id,
    url: e.url,
    source: e.source,
    models: e.models,
    role: e.role,
    ...(e.probeUrl !== e.url ? { probeUrl: e.probeUrl } : {}),
    ...(e.bootstrapPort !== undefined ? { bootstrapPort: e.bootstrapPort } : {}),
    state: e.state,
    since: iso(e.since),
    discoveredAt: iso(e.discoveredAt),
    everReady: e.everReady,
    inFlight: e.inFlight,
    load: loadView(e.engineLoad, now, statsIntervalMs),
    lastProbe: e.lastProbe ? { at: iso(e.lastProbe.at), ok: e.lastProbe.ok, detail: e.lastProbe.detail } : null,
    lastError: e.lastError ?? null,
    lastErrorAt: e.lastErrorAt === undefined ? null : iso(e.lastErrorAt),
    lastErrorPast: lastErrorIsPast(e),
    adapters: [...e.adapters.keys()].sort(),
    adapterSlots: e.adapterSlots ?? null,
    canLoadAdapters: e.canLoadAdapters ?? null,
    ...(e.modelRoots.size > 0 ? { modelRoots: Object.fromEntries(e.modelRoots) } : {}),
  };
}

const iso = (ms: number): string => new Date(ms).toISOString();

/** What /engines shows of an endpoint's KV-cache event stream and of a model's tokenizer (kvaware). */
export interface KvStatusSource extends TokenizerStatusSource {
  statusOf(endpointId: string): KvEndpointStatus | undefined;
  /** what cannot work as meant (src/router/kv/warnings.ts) */
  warnings(): readonly KvWarning[];
}

/** A model's tokenizer (kvaware): which one tokenizes its requests, and why not in process. */
export interface TokenizerStatusSource {
  tokenizerOf(model: string): TokenizerStatus | undefined;
}

function kvEventsView(s: KvEndpointStatus | undefined): Record<string, unknown> | null {
  if (s === undefined) return null;
  return {
    connected: s.connected,
    ranks: s.ranks.map((r) => ({
      url: r.url,
      replayUrl: r.replayUrl ?? null,
      connected: r.connected,
      lastSeq: r.lastSeq ?? null,
      lastEventAt: r.lastEventAt === undefined ? null : iso(r.lastEventAt),
      joinReplay: joinReplayView(r.joinReplay),
    })),
    blocks: s.blocks,
    gaps: s.gaps,
    replays: s.replays,
    rebuilds: s.rebuilds,
    restarts: s.restarts,
    malformed: s.malformed,
    lastEventAt: s.lastEventAt === undefined ? null : iso(s.lastEventAt),
    lastError: s.lastError ?? null,
  };
}

/** How far back the replay asked when the router joined the rank's stream reached; null: none (yet). */
function joinReplayView(j: KvJoinReplay | undefined): Record<string, unknown> | null {
  if (j === undefined) return null;
  return {
    at: iso(j.at),
    firstSeq: j.firstSeq ?? null,
    lastSeq: j.lastSeq ?? null,
    batches: j.batches,
    blocks: j.blocks,
    complete: j.complete,
    error: j.error ?? null,
  };
}

/** A model's `tokenizer` field (kvaware in use), on /engines and /v1/models. */
function tokenizerField(kv: TokenizerStatusSource | undefined, model: string): { tokenizer?: TokenizerStatus } {
  const tokenizer = kv?.tokenizerOf(model);
  return tokenizer ? { tokenizer } : {};
}

export function engines(res: ServerResponse, catalog: ModelCatalog, statsIntervalMs = 1000, kv?: KvStatusSource): void {
  const now = Date.now();
  sendJson(res, 200, {
    endpoints: catalog.endpoints().map((e) => ({
      ...endpointView(e, now, statsIntervalMs),
      ...(kv ? { kvEvents: kvEventsView(kv.statusOf(e.id)) } : {}),
    })),
    models: kv ? catalog.models().map((m) => ({ ...m, ...tokenizerField(kv, m.id) })) : catalog.models(),
    ...(kv ? { warnings: kv.warnings() } : {}),
  });
}

/**
 * OpenAI's list shape, plus `status` with the same words as the x-llm-router-model-state header; an adapter also has
 * `parent` and `loaded_endpoints`; with kvaware, `tokenizer` (which tokenizes its requests, and why not in process).
 */
export function listModels(res: ServerResponse, catalog: ModelCatalog, startedAt: number, kv?: TokenizerStatusSource): void {
  const created = Math.floor(startedAt / 1000);
  sendJson(res, 200, {
    object: 'list',
    data: catalog.models().map((m) => ({
      id: m.id,
      object: 'model',
      created,
      owned_by: 'llm-router',
      ...(m.aliasOf ? { root: m.aliasOf } : {}),
      // an adapter: its base model, as vLLM lists it, and on how many endpoints it is loaded now
      ...(m.adapter ? { parent: m.adapter.parent, loaded_endpoints: m.adapter.loadedEndpoints } : {}),
      status: m.status,
      // not ready, and why in words a client may read: an engine that answers nothing at all (for how long), or one
      // that serves other models (which); the addresses and errors are /engines' (SECURITY.md)
      ...(m.why ? { reason: stateWords(m.status, m.why) } : {}),
      // a P/D model: its protocol and the roles with no ready endpoint
      ...(m.pd ? { pd: { protocol: m.pd.protocol, missing_roles: m.pd.missing } } : {}),
      ...tokenizerField(kv, m.id),
    })),
  });
}
