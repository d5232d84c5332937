// The words for a model: its state as clients see it, and the catalog's answer to "can M be served, and where?".
import type { Endpoint } from './endpoint.js';
import type { PdProtocol, PdRole } from './pd.js';

/** What clients see in /v1/models `status` and in the x-llm-router-model-state header. */
export type ModelState = 'ready' | 'scaled-to-zero' | 'loading' | 'unavailable';

/** How a P/D model is reached: the protocol, and its ready prefill endpoints (`candidates` are the decode side). */
export interface PdRoute {
  readonly protocol: PdProtocol;
  readonly prefill: readonly Endpoint[];
}

/**
 * How a request for a LoRA adapter is served: on endpoints of its base model that hold the adapter, or that the router
 * loads it on first (src/router/adapters).
 */
export interface AdapterRoute {
  readonly name: string;
  readonly base: string;
  /** where the router loads it from (its declaration); undefined for an adapter engines serve that no source declares */
  readonly path: string | undefined;
  /** the base's ready endpoints (for a P/D base: its decode side) that hold it or may load it */
  readonly endpoints: readonly Endpoint[];
  /** a P/D base: its ready prefill endpoints that hold it or may load it */
  readonly prefill: readonly Endpoint[];
}

export type Resolution =
  | { readonly kind: 'unknown'; readonly requested: string }
  | {
      readonly kind: 'unavailable';
      readonly requested: string;
      readonly model: string;
      readonly state: Exclude<ModelState, 'ready'>;
      /** a P/D model: the roles whose absence keeps it from serving */
      readonly missing?: readonly PdRole[];
      /** an adapter: its base model, where demand, holds and cold starts count (its engines are what scales) */
      readonly base?: string;
      /** why, in words a client may read (no addresses, no engine errors) */
      readonly why?: UnavailableWhy;
    }
  | {
      readonly kind: 'routable';
      readonly requested: string;
      readonly model: string;
      readonly aliased: boolean;
      /** the ready endpoints a request can be sent to (for a P/D model: the decode side, decode and both) */
      readonly candidates: readonly Endpoint[];
      /** set only for a model served P/D (for an adapter: `prefill` are the prefill endpoints that hold it) */
      readonly pd?: PdRoute;
      /** set only for a LoRA adapter; `candidates` are then the endpoints that hold it */
      readonly adapter?: AdapterRoute;
      /** an adapter: its base model */
      readonly base?: string;
    };

/** Ready and total endpoints of one role of a model. */
export interface RoleCount {
  readonly ready: number;
  readonly total: number;
}

export interface PdView {
  readonly protocol: PdProtocol;
  /** when the model's sources name different protocols: all of them (`protocol` is the first in sort order) */
  readonly conflictingProtocols?: readonly PdProtocol[];
  readonly prefill: RoleCount;
  /** decode and both */
  readonly decode: RoleCount;
  /** roles with no ready endpoint (a ready vllm-nixl or llm-d-sidecar model may miss prefill: it serves decode-only) */
  readonly missing: readonly PdRole[];
}

export interface ModelView {
  readonly id: string;
  readonly status: ModelState;
  /** where the declaration comes from (known-models, static, alias, discovery); empty when only an endpoint serves it */
  readonly declaredBy: readonly string[];
  readonly aliasOf?: string;
  readonly endpoints: number;
  readonly readyEndpoints: number;
  /** set only for a model served P/D (it has a prefill endpoint or a prefill declaration) */
  readonly pd?: PdView;
  /** set only for a LoRA adapter (`endpoints` and `readyEndpoints` then count the endpoints that list it) */
  readonly adapter?: AdapterView;
  /**
   * not ready, and an endpoint of it answers nothing at all: "URL: why for N s" (connection refused, timed out, TLS
   * error); for operators (/engines, the dashboard) only
   */
  readonly unreachable?: string;
  /** not ready: why, in words a client may read (/v1/models `reason`, the 503's message) */
  readonly why?: UnavailableWhy;
}

/**
 * Why a model that is not ready is in its state, as clients may learn it: facts about the model, never an engine's
 * address or its errors (SECURITY.md, "What clients can learn").
 */
export interface UnavailableWhy {
  /** an engine of it answers nothing at all (connection refused, timed out, TLS error): for this many seconds */
  readonly unreachableFor?: number;
  /** every engine of it serves other models (a name mismatch): the names one of them serves */
  readonly servesInstead?: readonly string[];
}

export interface AdapterView {
  /** its base model */
  readonly parent: string;
  /** where the router loads it from; absent when no source declares it */
  readonly path?: string;
  /** endpoints that list it loaded now (any state but draining) */
  readonly loadedEndpoints: number;
}
