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
  /** --kv-events-port: present only then */
  kvEvents?: SimKvEventsStatus;
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

/** The W3C trace context one request came with (GET /_sim/traceparents): the router's span that made the call. */
export interface RecordedTraceparent {
  readonly method: string;
  /** without query */
  readonly path: string;
  readonly traceparent: string;
  readonly tracestate?: string;
  /** ms since the epoch, when it arrived */
  readonly at: number;
}

/** One inference request as the engine received it (GET /_sim/requests). */
export interface RecordedRequest {
  readonly path: string;
  /** lower-case names; credentials left out */
  readonly headers: Record<string, string>;
  /** the body's exact bytes (empty for an audio body over 1 MB: see bodySha256) */
  readonly bodyBase64: string;
  /** SHA-256 (hex) of the body's exact bytes, and their number */
  readonly bodySha256: string;
  readonly bodyBytes: number;
}

// KV-cache events (kv-events.ts); here so that reading the flags does not load ZeroMQ
export const KV_EVENT_ENCODINGS = ['map', 'array'] as const;
export type KvEventEncoding = (typeof KV_EVENT_ENCODINGS)[number];
export const KV_EVENT_HASH_KINDS = ['int', 'bytes'] as const;
export type KvEventHashKind = (typeof KV_EVENT_HASH_KINDS)[number];

export interface SimKvEventsOptions {
  /** the PUB socket's port; 0 picks a free one */
  readonly port: number;
  /** the replay ROUTER socket's port (0 picks a free one); unset: no replay socket */
  readonly replayPort?: number;
  readonly encoding: KvEventEncoding;
  readonly hashes: KvEventHashKind;
  /** first frame of every message */
  readonly topic: string;
  /** batches kept for replay (vLLM's buffer_steps) */
  readonly bufferSteps: number;
}

/** What GET /_sim/kv-events and /_sim/stats report of the publisher. */
export interface SimKvEventsStatus {
  /** tcp://HOST:PORT of the PUB socket */
  readonly endpoint: string;
  readonly port: number;
  /** tcp://HOST:PORT of the replay socket; null without one */
  readonly replayEndpoint: string | null;
  readonly replayPort: number | null;
  readonly encoding: KvEventEncoding;
  readonly hashes: KvEventHashKind;
  readonly topic: string;
  /** the seq the next batch gets */
  readonly nextSeq: number;
  /** batches held for replay */
  readonly buffered: number;
  /** batches published (sent or dropped) since the start or the last restart */
  readonly published: number;
  /** batches the drop switch has withheld from subscribers in all */
  readonly dropped: number;
  /** batches the drop switch will still withhold */
  readonly dropping: number;
  /** sequence restarts so far */
  readonly restarts: number;
  /** tokens per block (--kv-block-size) */
  readonly blockSize: number;
  /** blocks the prefix cache holds now, and at most (--prefix-cache-blocks, exported as num_gpu_blocks) */
  readonly cachedBlocks: number;
  readonly capacityBlocks: number;
}
