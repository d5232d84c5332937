// One KV-events payload (msgpack of one batch) -> a normalized batch. Engines publish two encodings (vLLM <= 0.26:
// positional arrays; later: maps tagged by "type"), so each message is judged by its own shape, never by a version
// guessed once. The payload comes from the network: every size is capped before anything is allocated for it, every
// malformed part is counted under one of a few fixed reasons, and nothing here throws.
import type { Decoder } from '@msgpack/msgpack';
import type { KvTier } from './types.js';
import { lazyModule } from '../util/lazy-module.js';

const msgpack = lazyModule<typeof import('@msgpack/msgpack')>('@msgpack/msgpack');

/** An engine's own block hash, as a Map key: an integer hash exactly (uint64 above 2^53 included), raw bytes as hex. */
export type EngineHash = bigint | string;

/** Where an engine says a block sits. GPU is the tier that saves prefill; the others are offload tiers. */
export type KvMedium = 'gpu' | 'cpu' | 'disk' | 'other';

export interface KvStoredEvent {
  readonly kind: 'stored';
  /** one per new block, in chain order */
  readonly hashes: readonly EngineHash[];
  /** the block the first new block follows; undefined: the chain's root */
  readonly parent: EngineHash | undefined;
  /** the new blocks' token ids, hashes.length * blockSize of them */
  readonly tokens: Uint32Array;
  readonly blockSize: number;
  /** the LoRA adapter's name; undefined for the base model (or an engine too old to name it, see loraId) */
  readonly loraName: string | undefined;
  /** the engine's LoRA id (an old engine names no adapter; its blocks then must not join the base model's chains) */
  readonly loraId: number | undefined;
  readonly medium: KvMedium;
  readonly tier: KvTier;
  /** the KV-cache group of a hybrid model (full attention, sliding window, ...); undefined: the only one */
  readonly group: number | undefined;
}

export interface KvRemovedEvent {
  readonly kind: 'removed';
  readonly hashes: readonly EngineHash[];
  readonly medium: KvMedium;
  readonly tier: KvTier;
  readonly group: number | undefined;
}

export interface KvClearedEvent {
  readonly kind: 'cleared';
}

export type KvEvent = KvStoredEvent | KvRemovedEvent | KvClearedEvent;

export interface KvBatch {
  /** the engine's timestamp (seconds since the epoch, as sent); NaN when absent */
  readonly ts: number;
  readonly events: readonly KvEvent[];
  /** the engine's data-parallel rank, when it says */
  readonly dpRank: number | undefined;
}

/**
 * Why part of a payload was refused or cut. A fixed set, so that counters and log lines keyed by it stay bounded
 * whatever an engine (or anyone who can reach its port) sends.
 */
export const MALFORMED_REASONS = [
  /** not msgpack: truncated, trailing bytes, a reserved byte, nesting past the stack */
  'msgpack',
  /** a payload, array, map or string longer than any real batch has: refused before it was allocated */
  'too-long',
  /** the batch is not [ts, events, rank] nor {ts, events, ...} */
  'batch-shape',
  /** an event of a known type whose fields have the wrong types */
  'event-shape',
  /** an event type this router does not know */
  'unknown-event',
  /** a block hash neither an integer nor bytes */
  'hash',
  /** a token id that is not an integer in [0, 2^32) */
  'token',
  /** token_ids not exactly blocks x block_size */
  'token-count',
  /** more events in a batch than the cap: the rest were skipped */
  'events-capped',
  /** more blocks in an event than the cap: the rest were skipped */
  'blocks-capped',
  /** more tokens in a batch than the cap: the events past it were skipped */
  'tokens-capped',
  /** a ZMQ message that is not [topic, 8-byte seq, payload] (counted by the subscriber) */
  'frames',
  /**
   * a BlockStored whose block_size is not the endpoint's (its vllm:cache_config_info's, else that of the blocks
   * indexed for it): dropped whole (counted by the index, which alone knows the endpoint's size)
   */
  'block-size',
] as const;
export type MalformedReason = (typeof MALFORMED_REASONS)[number];

export interface DecodeLimits {
  /** bytes of one payload; a longer one is refused whole (the subscriber also caps the ZMQ message size) */
  readonly maxPayloadBytes: number;
  /** events kept per batch */
  readonly maxEventsPerBatch: number;
  /** blocks (hashes) kept per event */
  readonly maxBlocksPerEvent: number;
  /** token ids kept per batch, all events together */
  readonly maxTokensPerBatch: number;
  /**
   * The longest msgpack array decoded at all (the token ids of one event are the longest a real batch has). The
   * decoder checks it before allocating, so an event claiming 10^6 blocks costs no 10^6 entries: its batch is refused.
   */
  readonly maxArrayLength: number;
}

/**
 * Defaults sized from what vLLM sends: one batch per engine step, one BlockStored per request per step covering the
 * blocks that step filled (at most max_num_batched_tokens tokens, 8192 by default, a full unchunked 128k prompt at
 * worst: 128k token ids, ~640 kB of msgpack). The caps are several times that; the payload cap bounds what one decoded
 * batch can cost (4 MiB of msgpack decodes to some tens of MB at most, and only until the batch is applied).
 */
export const DEFAULT_DECODE_LIMITS: DecodeLimits = {
  maxPayloadBytes: 4 * 1024 * 1024,
  maxEventsPerBatch: 16_384,
  maxBlocksPerEvent: 16_384,
  maxTokensPerBatch: 1 << 20,
  maxArrayLength: 1 << 18,
};

/** Told of each malformed part: its reason and a short detail for the one log line per reason. */
export type MalformedSink = (reason: MalformedReason, detail: string) => void;

const TYPE_STORED = 'BlockStored';
const TYPE_REMOVED = 'BlockRemoved';
const TYPE_CLEARED = 'AllBlocksCleared';
/** the longest string we keep (an adapter name, an event type, a medium); longer ones are refused by the decoder */
const MAX_STRING_BYTES = 1024;
/** raw-byte hashes are 32 bytes (sha256); a little room for other digests, no more */
const MAX_BIN_BYTES = 64;

const decoders = new WeakMap<DecodeLimits, Decoder>();

function decoderFor(limits: DecodeLimits): Decoder {
  let d = decoders.get(limits);
  if (!d) {
    // The decoder checks each length against these before it allocates, so a header claiming 10^9 entries costs
    // nothing.
    d = new (msgpack().Decoder)({
      useBigInt64: true,
      maxStrLength: MAX_STRING_BYTES,
      maxBinLength: MAX_BIN_BYTES,
      maxArrayLength: limits.maxArrayLength,
      maxMapLength: 64,
      maxExtLength: MAX_BIN_BYTES,
    });
    decoders.set(limits, d);
  }
  return d;
}

/** Decodes one payload; undefined when nothing of it is usable (counted). Never throws. */
export function decodeBatch(
  payload: Uint8Array,
  onMalformed: MalformedSink = () => {},
  limits: DecodeLimits = DEFAULT_DECODE_LIMITS,
): KvBatch | undefined {
  if (payload.byteLength > limits.maxPayloadBytes) {
    onMalformed('too-long', `payload of ${payload.byteLength} bytes over ${limits.maxPayloadBytes}`);
    return undefined;
  }
  let raw: unknown;
  try {
    raw = decoderFor(limits).decode(payload);
  } catch (err) {
    // DecodeError, RangeError (a length over a max, or nesting deep enough to exhaust the stack), anything else
    const detail = err instanceof msgpack().DecodeError || err instanceof RangeError ? err.message : String(err);
    onMalformed(/max length exceeded/i.test(detail) ? 'too-long' : 'msgpack', detail.slice(0, 200));
    return undefined;
  }
  try {
    return normalizeBatch(raw, onMalformed, limits);
  } catch (err) {
    // normalizeBatch checks every shape; this is the last guard of "never throws out"
    onMalformed('batch-shape', String(err).slice(0, 200));
    return undefined;
  }
}

function normalizeBatch(raw: unknown, onMalformed: MalformedSink, limits: DecodeLimits): KvBatch | undefined {
  let ts: unknown;
  let events: unknown;
  let rank: unknown;
  if (Array.isArray(raw)) {
    [ts, events, rank] = raw;
  } else if (isMap(raw)) {
    ts = raw.ts;
    events = raw.events;
    rank = raw.data_parallel_rank;
  } else {
    onMalformed('batch-shape', `batch is ${kindOf(raw)}`);
    return undefined;
  }
  if (!Array.isArray(events)) {
    onMalformed('batch-shape', `events is ${kindOf(events)}`);
    return undefined;
  }
  const out: KvEvent[] = [];
  const budget = { tokens: limits.maxTokensPerBatch };
  const n = Math.min(events.length, limits.maxEventsPerBatch);
  if (events.length > n) onMalformed('events-capped', `${events.length} events in one batch, kept ${n}`);
  for (let i = 0; i < n; i++) {
    const ev = normalizeEvent(events[i], onMalformed, limits, budget);
    if (ev) out.push(ev);
    if (budget.tokens < 0) {
      onMalformed('tokens-capped', `over ${limits.maxTokensPerBatch} token ids in one batch: ${n - i - 1} events skipped`);
      break;
    }
  }
  return { ts: toNumber(ts) ?? Number.NaN, events: out, dpRank: toInt(rank) };
}

interface Fields {
  hashes: unknown;
  parent: unknown;
  tokens: unknown;
  blockSize: unknown;
  loraId: unknown;
  medium: unknown;
  loraName: unknown;
  group: unknown;
}

function normalizeEvent(raw: unknown, onMalformed: MalformedSink, limits: DecodeLimits, budget: { tokens: number }): KvEvent | undefined {
  let type: unknown;
  const f: Fields = {
    hashes: undefined,
    parent: undefined,
    tokens: undefined,
    blockSize: undefined,
    loraId: undefined,
    medium: undefined,
    loraName: undefined,
    group: undefined,
  };
  if (Array.isArray(raw)) {
    // positional (msgspec array_like with the tag first); trailing fields may be missing, extra ones are ignored
    type = raw[0];
    if (type === TYPE_STORED) {
      [, f.hashes, f.parent, f.tokens, f.blockSize, f.loraId, f.medium, f.loraName] = raw;
    } else if (type === TYPE_REMOVED) {
      [, f.hashes, f.medium] = raw;
    }
  } else if (isMap(raw)) {
    type = raw.type;
    f.hashes = raw.block_hashes;
    f.parent = raw.parent_block_hash;
    f.tokens = raw.token_ids;
    f.blockSize = raw.block_size;
    f.loraId = raw.lora_id;
    f.medium = raw.medium;
    f.loraName = raw.lora_name;
    f.group = raw.group_idx;
  } else {
    onMalformed('event-shape', `event is ${kindOf(raw)}`);
    return undefined;
  }
  switch (type) {
    case TYPE_STORED:
      return storedEvent(f, onMalformed, limits, budget);
    case TYPE_REMOVED:
      return removedEvent(f, onMalformed, limits);
    case TYPE_CLEARED:
      return CLEARED;
    default:
      onMalformed('unknown-event', `event type ${typeof type === 'string' ? JSON.stringify(type.slice(0, 64)) : kindOf(type)}`);
      return undefined;
  }
}

const CLEARED: KvClearedEvent = { kind: 'cleared' };

function storedEvent(f: Fields, onMalformed: MalformedSink, limits: DecodeLimits, budget: { tokens: number }): KvStoredEvent | undefined {
  const blockSize = toInt(f.blockSize);
  if (!Array.isArray(f.hashes) || !Array.isArray(f.tokens) || blockSize === undefined || blockSize <= 0) {
    onMalformed('event-shape', 'BlockStored without block_hashes, token_ids or a positive block_size');
    return undefined;
  }
  const medium = mediumOf(f.medium);
  const group = optionalInt(f.group);
  const loraId = optionalInt(f.loraId);
  if (medium === undefined || group === null || loraId === null || (f.loraName != null && typeof f.loraName !== 'string')) {
    onMalformed('event-shape', 'BlockStored with a medium, lora_id, lora_name or group_idx of the wrong type');
    return undefined;
  }
  if (f.tokens.length !== f.hashes.length * blockSize) {
    // the tokens cannot be split into the blocks, so no key would be right
    onMalformed('token-count', `${f.hashes.length} blocks of ${blockSize} but ${f.tokens.length} token ids`);
    return undefined;
  }
  let blocks = f.hashes.length;
  if (blocks > limits.maxBlocksPerEvent) {
    // keeping the first blocks keeps a chain's prefix, which is what a match reads; the rest cannot be chained later
    onMalformed('blocks-capped', `${blocks} blocks in one BlockStored, kept ${limits.maxBlocksPerEvent}`);
    blocks = limits.maxBlocksPerEvent;
  }
  if (blocks * blockSize > budget.tokens) {
    budget.tokens = -1;
    return undefined;
  }
  budget.tokens -= blocks * blockSize;
  const parent = f.parent == null ? undefined : engineHash(f.parent);
  if (parent === null) {
    onMalformed('hash', `parent_block_hash is ${kindOf(f.parent)}`);
    return undefined;
  }
  const hashes = hashList(f.hashes, blocks, onMalformed);
  if (!hashes) return undefined;
  const tokens = new Uint32Array(blocks * blockSize);
  for (let i = 0; i < tokens.length; i++) {
    const t = f.tokens[i];
    if (typeof t !== 'number' || !Number.isInteger(t) || t < 0 || t > 0xffffffff) {
      onMalformed('token', `token id ${kindOf(t)} at ${i}`);
      return undefined;
    }
    tokens[i] = t;
  }
  return {
    kind: 'stored',
    hashes,
    parent,
    tokens,
    blockSize,
    loraName: typeof f.loraName === 'string' && f.loraName !== '' ? f.loraName : undefined,
    loraId,
    medium,
    tier: medium === 'gpu' ? 'gpu' : 'offload',
    group,
  };
}

function removedEvent(f: Fields, onMalformed: MalformedSink, limits: DecodeLimits): KvRemovedEvent | undefined {
  const medium = mediumOf(f.medium);
  const group = optionalInt(f.group);
  if (!Array.isArray(f.hashes) || medium === undefined || group === null) {
    onMalformed('event-shape', 'BlockRemoved without block_hashes, or with a medium or group_idx of the wrong type');
    return undefined;
  }
  let n = f.hashes.length;
  if (n > limits.maxBlocksPerEvent) {
    // the blocks left out stay indexed until evicted by capacity or cleared: a stale preference, not a wrong answer
    onMalformed('blocks-capped', `${n} blocks in one BlockRemoved, kept ${limits.maxBlocksPerEvent}`);
    n = limits.maxBlocksPerEvent;
  }
  const hashes = hashList(f.hashes, n, onMalformed);
  if (!hashes) return undefined;
  return { kind: 'removed', hashes, medium, tier: medium === 'gpu' ? 'gpu' : 'offload', group };
}

function hashList(raw: readonly unknown[], n: number, onMalformed: MalformedSink): EngineHash[] | undefined {
  const out: EngineHash[] = new Array(n);
  for (let i = 0; i < n; i++) {
    const h = engineHash(raw[i]);
    if (h === null) {
      onMalformed('hash', `block hash ${kindOf(raw[i])} at ${i}`);
      return undefined;
    }
    out[i] = h;
  }
  return out;
}

/**
 * An engine hash in its one Map-key form: every integer as a bigint (msgpack writes a small value in a short format
 * and a large one as uint64; both must give the same key), bytes as lowercase hex. null: not a hash.
 */
export function engineHash(raw: unknown): EngineHash | null {
  if (typeof raw === 'bigint') return raw;
  if (typeof raw === 'number') return Number.isSafeInteger(raw) ? BigInt(raw) : null;
  if (raw instanceof Uint8Array) return raw.byteLength > 0 ? Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).toString('hex') : null;
  return null;
}

/** The medium's tier family; null/absent is GPU (engines without offload name none). undefined: not a medium. */
function mediumOf(raw: unknown): KvMedium | undefined {
  if (raw == null) return 'gpu';
  if (typeof raw !== 'string') return undefined;
  switch (raw.toUpperCase()) {
    case 'GPU':
    case 'CUDA':
      return 'gpu';
    case 'CPU':
      return 'cpu';
    case 'DISK':
      return 'disk';
    default:
      // LMCache and whatever offload tier comes next: offload all the same
      return 'other';
  }
}

function isMap(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Uint8Array);
}

function toNumber(v: unknown): number | undefined {
  if (typeof v === 'number') return v;
  if (typeof v === 'bigint') return Number(v);
  return undefined;
}

function toInt(v: unknown): number | undefined {
  if (typeof v === 'number') return Number.isSafeInteger(v) ? v : undefined;
  if (typeof v === 'bigint') return v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : undefined;
  return undefined;
}

/** absent/null -> undefined; an integer -> it; anything else -> null (a wrong type) */
function optionalInt(v: unknown): number | undefined | null {
  if (v == null) return undefined;
  return toInt(v) ?? null;
}

function kindOf(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (v instanceof Uint8Array) return `${v.byteLength} bytes`;
  if (typeof v === 'number' || typeof v === 'bigint' || typeof v === 'boolean') return `${typeof v} ${String(v).slice(0, 24)}`;
  return typeof v;
}
