// Shared vocabulary of the engine simulator: engine kinds, fault modes, phases and stats.

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
}
