// How long the engine takes: time to first token (base TTFT plus prefill of what the prefix cache misses)
// and the pause between tokens, which the slow-chunks fault stretches. With --prefill-stalls-decode, prefills share
// one compute lane (compute-lane.ts): they queue behind each other, and streams' tokens wait while one runs.
import { performance } from 'node:perf_hooks';
import { ComputeLane } from './compute-lane.js';
import type { SimSettings } from './engine-api.js';
import { DEFAULT_SLOW_CHUNK_DELAY_MS } from './faults.js';
import type { EngineKvCache } from './kv-cache.js';
import type { SimTokenizer } from './tokenizer.js';
import type { Fault } from './types.js';

export class EngineTiming {
  readonly ttftMs: number;
  private readonly itlMs: number;
  private readonly prefillMsPerToken: number;
  /** only with --prefill-stalls-decode */
  readonly lane: ComputeLane | undefined;
  // Prometheus counters, never reset: prompt tokens looked up in the prefix cache, and those found
  prefixQueryTokens = 0;
  prefixHitTokens = 0;

  constructor(
    options: SimSettings,
    private readonly tokenizer: SimTokenizer,
    private readonly cache: EngineKvCache,
  ) {
    this.ttftMs = options.ttftMs;
    this.itlMs = options.itlMs;
    this.prefillMsPerToken = options.prefillMsPerToken;
    this.lane = options.prefillStallsDecode ? new ComputeLane() : undefined;
  }

  /** How long a stream's next token, due now, waits for a prefill (always 0 without --prefill-stalls-decode). */
  decodeWait(): number {
    return this.lane?.decodeWait(performance.now()) ?? 0;
  }

  interTokenMs(fault: Fault): number {
    return fault.mode === 'slow-chunks' ? (fault.delayMs ?? DEFAULT_SLOW_CHUNK_DELAY_MS) : this.itlMs;
  }

  /**
   * Time to first token of a prompt that starts prefilling now: the base TTFT plus prefill of the tokens the prefix
   * cache does not hold. Looking the prompt up caches its blocks, as a real engine's prefill does (in the chain of
   * its LoRA adapter, when it names one), and publishes the KV-cache events of that.
   */
  prefillTtft(body: Record<string, unknown>, adapter?: string): number {
    const ids = this.tokenizer.encodeBody(body);
    const tokens = ids.length;
    // like vLLM, the last prompt token is always computed, even when every block is cached
    const hit = Math.min(this.cache.admit(ids, adapter) * this.cache.blockSize, Math.max(0, tokens - 1));
    this.prefixQueryTokens += tokens;
    this.prefixHitTokens += hit;
    const prefillMs = (tokens - hit) * this.prefillMsPerToken;
    return this.ttftMs + (this.lane ? this.lane.prefill(performance.now(), prefillMs) : prefillMs);
  }
}
