// What the router's event loop and its tokenizer worker (tokenize-worker.ts) say to each other, and the two numbers
// they share without a message: since when the worker has been in one step of a job (0: not in one), and before when
// jobs were given up (the worker skips them).
import type { LocalStats } from './local-tokenizers.js';
import type { TextPrompt, TokenizeOutcome } from './prompt-fields.js';

export type ToWorker =
  | { readonly type: 'load'; readonly dir: string }
  | {
      readonly type: 'job';
      readonly id: number;
      readonly dir: string;
      readonly prompt: TextPrompt;
      /** when the job was sent, and when it is too late (clock()) */
      readonly sentAt: number;
      readonly deadline: number;
      /** characters a rendered chat may have */
      readonly maxChars: number;
    }
  | { readonly type: 'stats'; readonly id: number; readonly dir: string };

export type FromWorker =
  | { readonly type: 'loaded'; readonly dir: string; readonly ok: boolean }
  /** a job's outcome; its ids' buffer is transferred, not copied */
  | { readonly type: 'done'; readonly id: number; readonly outcome: TokenizeOutcome }
  | { readonly type: 'stats'; readonly id: number; readonly stats: LocalStats | undefined };

/** What the worker is started with (workerData). */
export interface WorkerSetup {
  /** bytes each tokenizer's piece cache and rendered-chat cache may hold */
  readonly cacheBytes: number;
  /** characters tokenized between two pauses of a job */
  readonly sliceChars: number;
  /** SHARED_SLOTS float64 slots */
  readonly shared: SharedArrayBuffer;
}

/** the start of the step the worker is in (clock()), 0 between steps */
export const BUSY_SINCE = 0;
/** jobs sent before this (clock()) were given up: the worker skips them */
export const ABANDON_BEFORE = 1;
export const SHARED_SLOTS = 2;

/** Milliseconds on a clock both threads read alike (each thread's performance.now() has its own origin). */
export function clock(): number {
  return performance.timeOrigin + performance.now();
}
