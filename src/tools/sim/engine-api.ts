// The simulated engine's public surface: the options startSimEngine takes and the handle it resolves to.
import type { RequestTracer } from '../../router/core/trace.js';
import type { Fault, FaultMode, SimPhase, SimStats } from './types.js';
import type { EngineKind } from '../../router/core/engine.js';
import type { EndpointRole, PdProtocol } from '../../router/core/pd.js';
import type { SimLoraOptions } from './lora.js';
import type { SimKvEventsOptions, SimKvEventsStatus } from './types.js';
import type { SimTokenizer } from './tokenizer.js';

/** What startSimEngine takes; anything left out takes the `llm-router sim` flag's default (port: any free one). */
export interface SimEngineOptions {
  readonly host?: string;
  readonly port?: number;
  /** served model names */
  readonly models?: readonly string[];
  /**
   * what the models are loaded from, as vLLM reports it (`root` in /v1/models) and SGLang (`model_path` and
   * `tokenizer_path` in /get_model_info): a Hub repo id such as Qwen/Qwen3-8B, or a path; unset: each model's own name
   */
  readonly modelRoot?: string;
  readonly kind?: EngineKind;
  /** the port refuses connections this long before the engine listens */
  readonly startupRefuseSeconds?: number;
  /** then the engine listens but the model is not loaded this long */
  readonly startupLoadingSeconds?: number;
  /** time to first token */
  readonly ttftMs?: number;
  /** inter-token latency */
  readonly itlMs?: number;
  /** tokens generated per request, lowered by its max_tokens */
  readonly outputTokens?: number;
  /** requests running at once; later ones wait in FIFO order */
  readonly maxNumSeqs?: number;
  readonly embeddingDim?: number;
  /** reported in /v1/models, /info and /tokenize */
  readonly maxModelLen?: number;
  /** prefill time per prompt token not found in the prefix cache, added to the TTFT */
  readonly prefillMsPerToken?: number;
  /** prefix cache capacity in blocks (an LRU); 0 turns prefix caching off; at most the KV pool's blocks */
  readonly prefixCacheBlocks?: number;
  /**
   * the KV pool in blocks (vLLM's num_gpu_blocks): running sequences hold blocks of their prompt and generated tokens,
   * and a request waits until its blocks fit; 0: room for maxNumSeqs sequences of maxModelLen tokens
   */
  readonly numGpuBlocks?: number;
  /** prefills run one at a time and streams' next tokens wait while one runs (an engine without chunked prefill) */
  readonly prefillStallsDecode?: boolean;
  /** tokens per KV-cache block (--kv-block-size): the prefix cache's and the KV-cache events' unit */
  readonly prefixBlockTokens?: number;
  /** value of the x-sim-engine header; unset: sim-<port> */
  readonly id?: string;
  /** fault applied once the engine listens */
  readonly fault?: Fault;
  /** serve https with this PEM certificate and key (an engine behind TLS) */
  readonly tls?: SimTls;
  /** the P/D half this engine plays */
  readonly role?: EndpointRole;
  /** the P/D protocol it checks requests against (with role prefill or decode) */
  readonly pdProtocol?: PdProtocol;
  /** serve LoRA adapters (vLLM's --enable-lora); off when unset; a setting left out takes its flag's default */
  readonly lora?: Partial<SimLoraOptions>;
  /** publish KV-cache events as vLLM does (off when unset); a setting left out takes its flag's default */
  readonly kvEvents?: Partial<SimKvEventsOptions> & Pick<SimKvEventsOptions, 'port'>;
  /** the token ids the prefix cache, its events and /tokenize use; unset: the word-level WordTokenizer */
  readonly tokenizer?: SimTokenizer;
  /** OpenTelemetry (--otel-endpoint): a SERVER span per request, continuing the caller's traceparent */
  readonly tracer?: RequestTracer;
}

/** Every setting resolved (the sim command's flag table holds the defaults); only id, tls and lora may stay unset. */
export type SimSettings = Required<Omit<SimEngineOptions, 'id' | 'tls' | 'lora' | 'kvEvents' | 'tokenizer' | 'tracer' | 'modelRoot'>> &
  Pick<SimEngineOptions, 'id' | 'tls' | 'tokenizer' | 'tracer' | 'modelRoot'> & {
    /** LoRA adapters: every setting resolved; unset when the engine serves none */
    readonly lora?: SimLoraOptions;
    /** KV-cache events: every setting resolved; unset when off */
    readonly kvEvents?: SimKvEventsOptions;
  };

export interface SimTls {
  readonly cert: string;
  readonly key: string;
  /** PEM CAs whose client certificates are required (mTLS) */
  readonly clientCa?: string;
}

export interface SimEngine {
  readonly port: number;
  /** http://host:port, or https:// when it serves TLS */
  readonly url: string;
  readonly id: string;
  stats(): SimStats;
  resetStats(): void;
  fault(): Fault;
  phase(): SimPhase;
  /** when its model finished (or will finish) loading, ms since epoch; null before it listens */
  loadedAt(): number | null;
  /** `refuse` resolves once the port is closed; any other mode re-opens a refused port first */
  setFault(fault: Fault | FaultMode): Promise<void>;
  /** the KV-cache event sockets and sequence; undefined without kvEvents */
  kvEvents(): SimKvEventsStatus | undefined;
  /** KV-cache switches (POST /_sim/kv-events): drop the next batches, restart the sequence, clear the cache */
  kvSwitch(action: SimKvSwitch): void;
  /** stops listening and destroys every open connection */
  close(): Promise<void>;
}

/**
 * `drop`: the next N event batches reach no subscriber (a seq gap; still in the replay buffer). `restart`: as an
 * engine restart, the prefix cache empties, the hash seed changes and the sequence starts at 0 again, with no event.
 * `clear`: the prefix cache empties, announced by AllBlocksCleared (vLLM's /reset_prefix_cache).
 */
export type SimKvSwitch = { readonly drop: number } | { readonly restart: true } | { readonly clear: true };
