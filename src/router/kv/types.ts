// What the routing policy reads of the KV-cache index; the index (built from the engines' KV-cache events) implements it.
import type { BlockKey } from './block-key.js';

/** Where a block is held: on the GPU, or in an offload tier (CPU, disk, LMCache), which saves less prefill. */
export type KvTier = 'gpu' | 'offload';

/** How many leading blocks of a request an endpoint holds. */
export interface KvMatch {
  /** leading blocks held on the GPU */
  readonly gpu: number;
  /** leading blocks held in any tier (>= gpu) */
  readonly total: number;
}

export interface KvIndexView {
  /** For each endpoint id given that holds at least the first block: its leading match of `keys`. */
  match(keys: readonly BlockKey[], endpointIds: readonly string[]): ReadonlyMap<string, KvMatch>;
  /** The block size the endpoint's events (or its vllm:cache_config_info) declared; undefined when unknown. */
  blockSize(endpointId: string): number | undefined;
}
