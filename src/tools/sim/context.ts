// What the request handlers see of a running engine: its settings, batch queue, statistics, timing, fault and phase.
import type { SlotQueue } from './queue.js';
import type { RequestStats } from './request-stats.js';
import type { EngineTiming } from './timing.js';
import type { Fault, SimPhase } from './types.js';
import type { EngineKind } from '../../router/core/engine.js';

export interface EngineContext {
  readonly kind: EngineKind;
  /** served model names; the first one answers requests that name none */
  readonly models: readonly string[];
  /** unix seconds, reported as each model's `created` */
  readonly created: number;
  readonly maxModelLen: number;
  readonly outputTokens: number;
  readonly embeddingDim: number;
  readonly queue: SlotQueue;
  readonly requests: RequestStats;
  readonly timing: EngineTiming;
  fault(): Fault;
  phase(): SimPhase;
}
