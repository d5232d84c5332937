// What the request handlers see of a running engine: its settings, batch queue, statistics, timing, fault and phase.
import type { SlotQueue } from './queue.js';
import type { RequestStats } from './request-stats.js';
import type { EngineTiming } from './timing.js';
import type { Fault, SimPhase } from './types.js';
import type { SimPd } from './pd.js';
import type { SimLora } from './lora.js';
import type { EngineKind } from '../../router/core/engine.js';
import type { EngineKvCache } from './kv-cache.js';
import type { SimTokenizer } from './tokenizer.js';

export interface EngineContext {
  /** the x-sim-engine name; a prefill engine's remote_engine_id */
  readonly id: string;
  /** where it listens: a prefill engine's remote_host and remote_port */
  readonly host: string;
  readonly port: number;
  readonly kind: EngineKind;
  /** set with --role prefill|decode: the P/D half this engine plays */
  readonly pd: SimPd | undefined;
  /** set with --enable-lora: its adapters */
  readonly lora: SimLora | undefined;
  /** served model names; the first one answers requests that name none */
  readonly models: readonly string[];
  /** what the models are loaded from (--model-root): /v1/models `root`, SGLang's model_path; unset: each its own name */
  readonly modelRoot: string | undefined;
  /** unix seconds, reported as each model's `created` */
  readonly created: number;
  readonly maxModelLen: number;
  readonly outputTokens: number;
  readonly embeddingDim: number;
  readonly queue: SlotQueue;
  readonly requests: RequestStats;
  readonly timing: EngineTiming;
  /** the prompt's token ids: the prefix cache's, the KV-cache events' and /tokenize's */
  readonly tokenizer: SimTokenizer;
  readonly kvCache: EngineKvCache;
  fault(): Fault;
  phase(): SimPhase;
}
