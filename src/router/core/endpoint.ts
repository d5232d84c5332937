// The words for an endpoint: its lifecycle states, what a source says of it, what the router knows of it, and how
// fresh the load it reported is.
import type { EndpointRole, PdProtocol } from './pd.js';

/** discovered -> serving-api -> ready -> draining | failed (failed goes back to ready when it recovers) */
export type EndpointState = 'discovered' | 'serving-api' | 'ready' | 'draining' | 'failed';

/**
 * Where an engine publishes its KV-cache events (ZMQ PUB) and answers replays (ZMQ ROUTER): one entry per
 * data-parallel rank, rank r on port + r. A replay URL may be missing (no replay socket).
 */
export interface KvEventsSource {
  readonly eventsUrls: readonly string[];
  readonly replayUrls: readonly (string | undefined)[];
}

/** What a discovery source says exists; it never decides routing. */
export interface EndpointSpec {
  /** stable identity within its source (a URL for static backends, namespace/pod for Kubernetes) */
  readonly id: string;
  /** origin, e.g. http://10.0.0.5:8000 */
  readonly url: string;
  /** model names the endpoint is expected to serve */
  readonly models: readonly string[];
  /** true when the source is removing it (e.g. a terminating pod): no new requests */
  readonly draining?: boolean;
  /** prefill, decode or both (the default) */
  readonly role?: EndpointRole;
  /** where probes and stats scrapes go when not to `url` (a decode pod's engine behind its routing sidecar) */
  readonly probeUrl?: string;
  /** SGLang P/D: the port of this prefill endpoint's bootstrap server, when not the router's --sglang-bootstrap-port */
  readonly bootstrapPort?: number;
  /** the P/D protocol its source names for its models (the llm-router/pd-protocol annotation) */
  readonly pdProtocol?: PdProtocol;
  /** its KV-cache event stream, when the source names one */
  readonly kvEvents?: KvEventsSource;
  /** kvaware: how its models' prompts are tokenized, when the source says (`engine`, `off`, a Hub repo or a directory) */
  readonly tokenizer?: string;
}

export interface ProbeRecord {
  readonly at: number;
  readonly ok: boolean;
  readonly detail: string;
}

/**
 * What the router knows of one endpoint. Only the catalog changes it (src/router/catalog/catalog.ts); the prober, the
 * stats scraper and the forwarder report to the catalog (setState, recordProbe, recordLoad, requestStarted/Ended).
 */
export interface Endpoint {
  readonly id: string;
  readonly source: string;
  readonly url: string;
  readonly models: readonly string[];
  readonly role: EndpointRole;
  /** probes and stats scrapes go here; `url` unless the source said otherwise */
  readonly probeUrl: string;
  readonly bootstrapPort: number | undefined;
  readonly pdProtocol: PdProtocol | undefined;
  readonly kvEvents: KvEventsSource | undefined;
  /** kvaware: the tokenizer its source names for its models (the llm-router/tokenizer annotation) */
  readonly tokenizer: string | undefined;
  /**
   * What the engine says each of its models is loaded from, served name -> a Hub repo id or a path: vLLM's /v1/models
   * `root`, SGLang's /get_model_info `tokenizer_path` (else `model_path`). Learned by probes; empty until one answered.
   */
  readonly modelRoots: ReadonlyMap<string, string>;
  readonly state: EndpointState;
  /** ms since epoch when the state last changed */
  readonly since: number;
  /** ms since epoch when the endpoint was first discovered */
  readonly discoveredAt: number;
  /** true once the endpoint has been ready at least once */
  readonly everReady: boolean;
  /** ms since epoch of its first readiness */
  readonly firstReadyAt: number | undefined;
  /**
   * true when a probe found it not ready (refusing, loading, failing) before its first readiness: only then did the
   * router watch it load, and firstReadyAt - discoveredAt is a cold start. An engine ready at its first probe (already up
   * when the router started or discovered it) is no cold start.
   */
  readonly loadWatched: boolean;
  readonly draining: boolean;
  readonly lastProbe: ProbeRecord | undefined;
  readonly lastError: string | undefined;
  /**
   * set while its probes get no HTTP answer at all (connection refused, timed out, a TLS failure) past its start-up
   * grace (src/router/health/prober.ts)
   */
  readonly unreachable: Unreachable | undefined;
  /**
   * set while its engine answers and serves other models than (some of) `models` (a name mismatch, not a load): the
   * names it serves, as its last probe read them
   */
  readonly servesInstead: readonly string[] | undefined;
  /** ms since epoch when lastError was last recorded */
  readonly lastErrorAt: number | undefined;
  /** requests this router is forwarding to it right now */
  readonly inFlight: number;
  /** the latest load scraped from the engine's /metrics (src/router/health/engine-stats.ts); judge staleness by `at` */
  readonly engineLoad?: EngineLoad;
  /** LoRA adapters the engine lists in /v1/models (entries with a `parent`), name -> parent; learned by probes and loads */
  readonly adapters: ReadonlyMap<string, string>;
  /** adapters it can run at once: the engine's max_lora (vllm:lora_requests_info) once scraped */
  readonly adapterSlots: number | undefined;
  /** its KV cache's geometry (vllm:cache_config_info) once scraped */
  readonly cacheConfig: EngineCacheConfig | undefined;
  /** it loads adapters at run time: undefined until a load call told (an engine answering 404 on the load path cannot) */
  readonly canLoadAdapters: boolean | undefined;
}

/** An endpoint none of whose probes gets an HTTP answer: what fails, for operators, and for how long. */
export interface Unreachable {
  /** e.g. "connection refused (/v1/models: ECONNREFUSED)": the engine's address and errors, never shown to clients */
  readonly why: string;
  /** whole seconds nothing has answered, at its last probe */
  readonly seconds: number;
}

/** What an engine says of its KV cache: tokens per block and how many blocks fit on its GPUs. */
export interface EngineCacheConfig {
  readonly blockSize: number | undefined;
  readonly numGpuBlocks: number | undefined;
}

/** One scrape of an engine's load signals. */
export interface EngineLoad {
  /** ms since epoch when the scrape answered */
  readonly at: number;
  /** requests in the engine's running batch (all clients, not only this router) */
  readonly running: number;
  /** requests queued in the engine */
  readonly waiting: number;
  /** KV-cache usage 0..1; undefined when the engine does not export it */
  readonly kvUsage: number | undefined;
  /** load the engine carries beyond this router's in-flight requests, in requests (see otherLoad in engine-stats.ts) */
  readonly otherLoad: number;
  /** requests the engine ran or queued beyond this router's in flight there at the scrape: other clients' (replicas') */
  readonly others: number;
  /** this router's requests in flight there when the scrape answered */
  readonly ours: number;
}

/**
 * The last error is past once the endpoint is ready and has been seen ready after it (moved to ready, or a good probe),
 * so a start-up ECONNREFUSED does not read as a present fault on an endpoint that has served for hours.
 */
export function lastErrorIsPast(e: Endpoint): boolean {
  if (e.lastErrorAt === undefined || e.state !== 'ready') return false;
  return e.since > e.lastErrorAt || (e.lastProbe?.ok === true && e.lastProbe.at > e.lastErrorAt);
}

/** A load snapshot older than this many scrape intervals is unknown load, never idle. */
const STALE_INTERVALS = 3;

export function staleAfterMs(intervalMs: number): number {
  return STALE_INTERVALS * intervalMs;
}

export function isFresh(load: EngineLoad | undefined, now: number, intervalMs: number): boolean {
  return load !== undefined && now - load.at <= staleAfterMs(intervalMs);
}
