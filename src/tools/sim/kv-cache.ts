// The engine's KV cache as vLLM's block pool runs it: the prefix cache (prefix-cache.ts) over the prompt's token ids,
// each cached block named by the engine's own hash (sha256 chained from a random per-process seed, as vLLM's NONE_HASH
// is, so a consumer cannot compute it and must key blocks by their token ids), and the KV-cache events the block pool
// emits: one BlockStored per request's newly cached run of blocks, one BlockRemoved per evicted block (before the
// store that needed the room), AllBlocksCleared when the cache is reset.
import { createHash, randomBytes } from 'node:crypto';
import { blockIds, PrefixCache } from './prefix-cache.js';

/** A block's hash as the engine names it: 32 bytes (sha256); the `int` wire form is its low 64 bits. */
export type EngineBlockHash = Buffer;

export type KvCacheEvent =
  | {
      readonly type: 'BlockStored';
      readonly blockHashes: readonly EngineBlockHash[];
      readonly parentBlockHash: EngineBlockHash | null;
      /** the token ids of the new blocks only: blockHashes.length x blockSize of them */
      readonly tokenIds: readonly number[];
      readonly blockSize: number;
      readonly loraId: number | null;
      readonly loraName: string | null;
    }
  | { readonly type: 'BlockRemoved'; readonly blockHashes: readonly EngineBlockHash[] }
  | { readonly type: 'AllBlocksCleared' };

/** Where the cache's events go (the publisher); called once per step with that step's events, in order. */
export type KvEventSink = (events: KvCacheEvent[]) => void;

export class EngineKvCache {
  readonly blockSize: number;
  private readonly cache: PrefixCache<EngineBlockHash | true>;
  private seed: Buffer = randomBytes(32);
  // vLLM numbers adapters as it loads them (lora_int_id, from 1): here in order of first use
  private readonly loraIds = new Map<string, number>();

  /** `sink` unset: no events, and no engine hashes computed (the cache's own ids suffice). */
  constructor(
    capacity: number,
    blockSize: number,
    private readonly sink?: KvEventSink,
  ) {
    this.blockSize = Math.max(1, blockSize);
    this.cache = new PrefixCache(capacity);
  }

  get capacity(): number {
    return this.cache.capacity;
  }

  /** blocks cached now */
  get size(): number {
    return this.cache.size;
  }

  /**
   * A request's prompt starts prefilling: returns how many of its leading full blocks were cached, caches the rest
   * (evicting the least recently used blocks), and emits the step's events.
   */
  admit(tokens: readonly number[], lora?: string): number {
    const size = this.blockSize;
    const ids = blockIds(tokens, size, lora);
    const sink = this.sink;
    if (!sink) return this.cache.admit(ids, () => true).hits;
    const extra = lora !== undefined ? Buffer.from(`\0lora\0${lora}`) : undefined;
    const { hits, stored, evicted } = this.cache.admit(ids, (index, parent) =>
      this.hash(parent instanceof Buffer ? parent : this.seed, tokens, index * size, (index + 1) * size, extra),
    );
    const events: KvCacheEvent[] = [];
    for (const block of evicted) if (block instanceof Buffer) events.push({ type: 'BlockRemoved', blockHashes: [block] });
    if (stored.length > 0) {
      const parent = hits > 0 ? this.cache.peek(ids[hits - 1] as number) : undefined;
      events.push({
        type: 'BlockStored',
        blockHashes: stored as EngineBlockHash[],
        parentBlockHash: parent instanceof Buffer ? parent : null,
        tokenIds: tokens.slice(hits * size, (hits + stored.length) * size),
        blockSize: size,
        loraId: lora !== undefined ? this.loraId(lora) : null,
        loraName: lora ?? null,
      });
    }
    if (events.length > 0) sink(events);
    return hits;
  }

  /** Every block dropped, as vLLM's reset_prefix_cache does: AllBlocksCleared. */
  clear(): void {
    this.cache.clear();
    this.sink?.([{ type: 'AllBlocksCleared' }]);
  }

  /** The engine process restarted: an empty cache, a new seed (so new hashes), adapters numbered afresh; no event. */
  restart(): void {
    this.cache.clear();
    this.seed = randomBytes(32);
    this.loraIds.clear();
  }

  private loraId(name: string): number {
    let id = this.loraIds.get(name);
    if (id === undefined) {
      id = this.loraIds.size + 1;
      this.loraIds.set(name, id);
    }
    return id;
  }

  private hash(parent: Buffer, tokens: readonly number[], start: number, end: number, extra: Buffer | undefined): Buffer {
    const ids = Buffer.allocUnsafe((end - start) * 4);
    for (let i = start; i < end; i++) ids.writeUInt32LE((tokens[i] as number) >>> 0, (i - start) * 4);
    const h = createHash('sha256').update(parent).update(ids);
    if (extra) h.update(extra);
    return h.digest();
  }
}

/** The `int` form of a block hash, as vLLM's maybe_convert_block_hash makes it: the low 64 bits, big-endian. */
export function hashAsInt(hash: EngineBlockHash): bigint {
  return hash.readBigUInt64BE(hash.length - 8);
}
