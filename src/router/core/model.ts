// The words for a model: its state as clients see it, and the catalog's answer to "can M be served, and where?".
import type { Endpoint } from './endpoint.js';

/** What clients see in /v1/models `status` and in the x-llm-router-model-state header. */
export type ModelState = 'ready' | 'scaled-to-zero' | 'loading' | 'unavailable';

export type Resolution =
  | { readonly kind: 'unknown'; readonly requested: string }
  | { readonly kind: 'unavailable'; readonly requested: string; readonly model: string; readonly state: Exclude<ModelState, 'ready'> }
  | {
      readonly kind: 'routable';
      readonly requested: string;
      readonly model: string;
      readonly aliased: boolean;
      readonly candidates: readonly Endpoint[];
    };

export interface ModelView {
  readonly id: string;
  readonly status: ModelState;
  /** where the declaration comes from (known-models, static, alias, discovery); empty when only an endpoint serves it */
  readonly declaredBy: readonly string[];
  readonly aliasOf?: string;
  readonly endpoints: number;
  readonly readyEndpoints: number;
}
