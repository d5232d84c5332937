// The words of the catalog: endpoint lifecycle states, model states and the answer to "can M be served, and where?".

/** discovered -> serving-api -> ready -> draining | failed (failed goes back to ready when it recovers) */
export type EndpointState = 'discovered' | 'serving-api' | 'ready' | 'draining' | 'failed';

/** What clients see in /v1/models `status` and in the x-llm-router-model-state header. */
export type ModelState = 'ready' | 'scaled-to-zero' | 'loading' | 'unavailable';

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
}

export interface ProbeRecord {
  readonly at: number;
  readonly ok: boolean;
  readonly detail: string;
}

export interface Endpoint {
  readonly id: string;
  readonly source: string;
  readonly url: string;
  readonly models: readonly string[];
  state: EndpointState;
  /** ms since epoch when the state last changed */
  since: number;
  /** ms since epoch when the endpoint was first discovered */
  readonly discoveredAt: number;
  /** true once the endpoint has been ready at least once */
  everReady: boolean;
  /** ms since epoch of its first readiness: firstReadyAt - discoveredAt is how long it took to load */
  firstReadyAt: number | undefined;
  draining: boolean;
  lastProbe: ProbeRecord | undefined;
  lastError: string | undefined;
  /** requests this router is forwarding to it right now */
  inFlight: number;
  /** the latest load scraped from the engine's /metrics (src/health/engine-stats.ts); judge staleness by `at` */
  engineLoad?: EngineLoad;
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
}

export type Resolution =
  | { readonly kind: 'unknown'; readonly requested: string }
  | { readonly kind: 'unavailable'; readonly requested: string; readonly model: string; readonly state: Exclude<ModelState, 'ready'> }
  | { readonly kind: 'routable'; readonly requested: string; readonly model: string; readonly aliased: boolean; readonly candidates: readonly Endpoint[] };

export interface ModelView {
  readonly id: string;
  readonly status: ModelState;
  /** where the declaration comes from (known-models, static, alias, discovery); empty when only an endpoint serves it */
  readonly declaredBy: readonly string[];
  readonly aliasOf?: string;
  readonly endpoints: number;
  readonly readyEndpoints: number;
}
