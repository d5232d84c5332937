// A routing policy only picks among the candidates it is handed; it knows nothing of discovery or Kubernetes.
import type { Endpoint } from '../core/endpoint.js';
import type { TraceSpan } from '../core/trace.js';

export interface RouteRequest {
  /** the canonical model name (after alias resolution) */
  readonly model: string;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  /** the parsed JSON body, for policies that look at the prompt */
  readonly body: Readonly<Record<string, unknown>>;
  /** where the policy that decided says how (the access log's routing fields); absent: nobody asks */
  readonly note?: RoutingNote;
}

/** How a request was routed, as its access-log line gives it; written by the deciding policy, once per request. */
export interface RoutingNote {
  /** the policy that decided */
  policy?: string;
  /** kvaware: the leading blocks the chosen endpoint holds, of the prompt's blocks */
  matchedBlocks?: number;
  blocks?: number;
  /** kvaware: why it was routed without its KV match */
  fallback?: string;
}

/** One request sent to an endpoint, as the forwarders tell the policy that picked it: when its answer begins and ends. */
export interface Dispatch {
  /** the first byte of the engine's answer arrived (its prefill has run); called at most once */
  firstByte(): void;
  /** the engine call ended, however; called exactly once */
  ended(): void;
}

export interface RoutingPolicy {
  readonly name: string;
  /**
   * Work a pick needs that takes I/O (kvaware: the request's token ids). The forwarders await it once per request,
   * before the first pick; it never throws and never fails a request (a policy that cannot prepare falls back).
   * `trace` (tracing on): the route span, parent of the calls it makes (kvaware's /tokenize).
   */
  prepare?(candidates: readonly Endpoint[], request: RouteRequest, trace?: TraceSpan): Promise<void>;
  /**
   * Picks one of `candidates` (all ready), skipping those in `exclude`; undefined when none is left. `trace` (tracing
   * on, the first pick only): the route span, where a policy may say how it chose (kvaware: matched blocks).
   */
  pick(candidates: readonly Endpoint[], request: RouteRequest, exclude?: ReadonlySet<Endpoint>, trace?: TraceSpan): Endpoint | undefined;
  /**
   * The request is being sent to `endpoint` (after a pick, each failover again). A policy that weighs the work it
   * has sent each engine (kvaware) follows the call by the handle it returns; the others have no such method.
   */
  dispatched?(endpoint: Endpoint, request: RouteRequest): Dispatch | undefined;
}
