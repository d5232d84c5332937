// A routing policy only picks among the candidates it is handed; it knows nothing of discovery or Kubernetes.
import type { Endpoint } from '../core/endpoint.js';

export interface RouteRequest {
  /** the canonical model name (after alias resolution) */
  readonly model: string;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  /** the parsed JSON body, for policies that look at the prompt */
  readonly body: Readonly<Record<string, unknown>>;
}

export interface RoutingPolicy {
  readonly name: string;
  /** Picks one of `candidates` (all ready), skipping those in `exclude`; undefined when none is left. */
  pick(candidates: readonly Endpoint[], request: RouteRequest, exclude?: ReadonlySet<Endpoint>): Endpoint | undefined;
}
