// What the routing policy reads of the KV-cache index; the index (built from the engines' KV-cache events) implements it.
import type { Endpoint } from '../core/endpoint.js';
import type { TraceSpan } from '../core/trace.js';
import type { BlockKey } from './block-key.js';
import { TOKENIZE_FALLBACKS } from './prompt-fields.js';

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

/** The parts of a request its block keys come from. */
export interface KvRequest {
  readonly model: string;
  readonly body: Readonly<Record<string, unknown>>;
}

/**
 * Why a request was routed without its KV match: why it has no token ids (the tokenizer's reasons), a prompt shorter
 * than one block, no endpoint holding its first block, every holder costing more than computing the prompt elsewhere
 * (`overloaded`), one candidate only (nothing to decide, nothing tokenized). A fixed set: a metric label.
 */
export const KV_FALLBACK_REASONS = [...TOKENIZE_FALLBACKS, 'too-short', 'no-match', 'overloaded', 'one-endpoint'] as const;
export type KvFallbackReason = (typeof KV_FALLBACK_REASONS)[number];

/** A request's prompt as the index is asked about it: its length in tokens and its block keys at any block size. */
export interface RequestBlocks {
  /** prompt tokens */
  readonly tokens: number;
  /** the keys of the prompt's full blocks of `blockSize` tokens (computed once per size) */
  keysAt(blockSize: number): readonly BlockKey[];
}

/** Where the request's block keys come from (the tokenizer, each endpoint's block size); never throws. */
export interface KvKeySource {
  /** `trace` (tracing on): the parent of the /tokenize call's span */
  keys(request: KvRequest, candidates: readonly Endpoint[], trace?: TraceSpan): Promise<RequestBlocks | KvFallbackReason>;
  /** tokens per KV-cache block of the endpoint's engine: what it says, else the configured default */
  blockSizeOf(endpoint: Endpoint): number;
}

/** What each decision tells metrics. */
export interface KvDecisionObserver {
  /** a pick by KV match: the chosen endpoint holds `matched` of the request's `blocks` leading blocks */
  matched(model: string, matched: number, blocks: number): void;
  fallback(model: string, reason: KvFallbackReason): void;
}
