// Shared vocabulary of the engine simulator: engine kinds, fault modes, phases and stats.
import type { SimLoraStats } from './lora.js';

export const FAULT_MODES = ['none', 'refuse', 'hang', 'error500', 'reset-mid-stream', 'slow-chunks', 'overloaded', 'loading'] as const;
export type FaultMode = (typeof FAULT_MODES)[number];

export interface Fault {
  readonly mode: FaultMode;
  /** the fault lasts this long, then the mode returns to `none` (for `refuse`: listen again) */
  readonly seconds?: number;
  /** slow-chunks: pause between SSE chunks (and between tokens of non-streaming answers) */
  readonly delayMs?: number;
  /** reset-mid-stream: token chunks sent before the socket is destroyed */
  readonly afterChunks?: number;
  /** hang: `inference` (default) hangs only inference paths; `all` also hangs /health, /v1/models, /metrics... */
  readonly scope?: 'inference' | 'all';
}

/** refusing: port closed; loading: listening but model not loaded; ready: serving */
export type SimPhase = 'refusing' | 'loading' | 'ready';

export interface SimStats {
  /** inference requests that arrived (health, models, metrics and /_sim calls are not counted) */
  received: number;
  /** inference requests answered in full with a 2xx status */
  completed: number;
  /** inference requests answered with an error status, or whose socket a fault destroyed */
  failed: number;
  /** inference requests whose client closed the connection before the answer was complete */
  aborted: number;
  running: number;
  waiting: number;
  /** every request except /_sim/*, by path without query */
  byPath: Record<string, number>;
  /** inference requests by the model named in the body */
  byModel: Record<string, number>;
  /** prefill/decode disaggregation (--role, --pd-protocol) */
  pd: SimPdStats;
  /** LoRA adapters (--enable-lora): present only then */
  lora?: SimLoraStats;
  /** --prefill-stalls-decode: present only then */
  decodeStalls?: SimStallStats;
}

export interface SimStallStats {
  /** stream tokens that waited for a prefill to end */
  count: number;
  /** how long they waited in all, ms */
  ms: number;
}

export interface SimPdStats {
  /** prefill engine: prefill requests answered (the KV cache held for, or sent to, a decode engine) */
  prefilled: number;
  /** prefill engine: KV caches a decode engine pulled (vllm-nixl) or received in a room (sglang) */
  transferred: number;
  /** decode engine: requests whose prompt came from a prefill engine */
  remote: number;
  /** decode engine: requests that computed the prompt here (no P/D fields, incomplete ones, or a failed pull) */
  local: number;
  /** requests refused (400) for malformed P/D fields, or a prefill request that is not one */
  malformed: number;
  /** decode engine: transfers that failed (the pull was refused, the room was given up) */
  transferFailed: number;
}

/** One inference request as the engine received it (GET /_sim/requests). */
export interface RecordedRequest {
  readonly path: string;
  /** lower-case names; credentials left out */
  readonly headers: Record<string, string>;
  /** the body's exact bytes */
  readonly bodyBase64: string;
}
