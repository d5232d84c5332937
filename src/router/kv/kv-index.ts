// The index of what each engine's KV cache holds, built from its events, keyed by the router's own block keys so that a
// request's tokens (blockKeys()) can be matched against it. One BlockStore per endpoint and data-parallel rank (each
// rank is an engine with its own cache and its own event stream). There is no global key -> holders map: a match
// walks each asked endpoint's own key map (cheap: it stops at the first miss), and an endpoint leaving, restarting or
// losing events drops its stores whole, O(1), instead of visiting a million global entries.
import { nextKey, rootKey, type BlockKey } from './block-key.js';
import { BlockStore, MEDIUM_BIT, refsAny, refsGpu } from './block-store.js';
import type { EngineHash, KvBatch, KvStoredEvent, MalformedSink } from './decode.js';
import type { KvIndexView, KvMatch } from './types.js';

/**
 * Blocks kept per engine at most (--kv-index-max-blocks): an engine of 2^18 blocks or fewer is indexed whole. A GPU
 * engine holds 10^4 to 10^5 blocks (a model of 1B parameters or more on an 80 GB GPU). At the measured 67-70 bytes a
 * block (bench/kv-index.ts) this is 18 MB per engine at worst.
 */
export const DEFAULT_CAPACITY = 262_144;

export interface KvIndexOptions {
  /**
   * Blocks kept per engine (endpoint and rank) at most, whatever its num_gpu_blocks claims: an engine claiming 10^8
   * blocks must not make the router hold 10^8. Also what an engine whose capacity is unknown gets.
   */
  readonly maxCapacity?: number;
}

/** What applying batches did; the caller owns it and reads it as counters (nothing is allocated per batch). */
export interface KvApplyTally {
  stored: number;
  removed: number;
  cleared: number;
  blocksStored: number;
  blocksRemoved: number;
  /** blocks of a BlockStored whose parent this index does not hold (evicted, or its event was lost): not indexed */
  unchainable: number;
  /** blocks dropped to keep an engine within its capacity */
  evicted: number;
  /** events of a hybrid model's other KV-cache groups, not indexed (see apply) */
  otherGroup: number;
}

export function newTally(): KvApplyTally {
  return { stored: 0, removed: 0, cleared: 0, blocksStored: 0, blocksRemoved: 0, unchainable: 0, evicted: 0, otherGroup: 0 };
}

interface EndpointState {
  readonly stores: (BlockStore | undefined)[];
  /** blocks kept per rank */
  capacity: number;
  /** the size of every block indexed for this endpoint: the declared one, else the first event's (see apply) */
  blockSize: number | undefined;
  /** blockSize came from the engine's vllm:cache_config_info, not from its events */
  declared: boolean;
}

export interface KvIndexStats {
  readonly total: number;
  readonly endpoints: Readonly<Record<string, number>>;
}

export class KvIndex implements KvIndexView {
  private readonly endpoints = new Map<string, EndpointState>();
  private readonly maxCapacity: number;

  constructor(opts: KvIndexOptions = {}) {
    this.maxCapacity = Math.max(1, Math.floor(opts.maxCapacity ?? DEFAULT_CAPACITY));
  }

  /**
   * The blocks an engine of this endpoint keeps (its num_gpu_blocks when known; undefined: unknown). The index keeps
   * per rank the smaller of that and the maximum.
   */
  setCapacity(endpointId: string, capacity: number | undefined, tally?: KvApplyTally): void {
    const ep = this.endpoint(endpointId);
    ep.capacity = capacity === undefined || !(capacity >= 1) ? this.maxCapacity : Math.min(Math.floor(capacity), this.maxCapacity);
    for (const s of ep.stores) {
      const evicted = s?.setCapacity(ep.capacity) ?? 0;
      if (tally) tally.evicted += evicted;
    }
  }

  /** Blocks kept per rank of this endpoint: min(its num_gpu_blocks, the maximum). */
  capacity(endpointId: string): number {
    return this.endpoints.get(endpointId)?.capacity ?? this.maxCapacity;
  }

  /**
   * The block size the engine declares (vllm:cache_config_info). It is the endpoint's from now on: its events of
   * another size are dropped, and blocks indexed under another size before it was known are dropped now (their keys
   * were chained in blocks no request of this endpoint is cut into).
   */
  setBlockSize(endpointId: string, blockSize: number): void {
    const ep = this.endpoint(endpointId);
    if (ep.blockSize !== blockSize) for (const s of ep.stores) s?.clear();
    ep.blockSize = blockSize;
    ep.declared = true;
  }

  /** The endpoint's block size: declared by the engine, else that of its events; undefined when neither said. */
  blockSize(endpointId: string): number | undefined {
    return this.endpoints.get(endpointId)?.blockSize;
  }

  /**
   * Applies one decoded batch from rank `rank` of the endpoint, in order. One endpoint's blocks all have one size, so
   * that its keys are exact: the declared size, else the size of the blocks it holds (the first event's, again after
   * the endpoint emptied). A BlockStored of another size is dropped, reported to `onMalformed` as `block-size`; it
   * changes nothing of this endpoint's blocks, nor anything of another endpoint's.
   */
  apply(endpointId: string, rank: number, batch: KvBatch, tally: KvApplyTally = newTally(), onMalformed: MalformedSink = () => {}): void {
    const ep = this.endpoint(endpointId);
    for (const ev of batch.events) {
      if (ev.kind === 'cleared') {
        tally.cleared++;
        ep.stores[rank]?.clear();
        continue;
      }
      // A hybrid model (full attention beside sliding-window or mamba layers) reports each KV-cache group; group 0 is
      // indexed alone, so a block evicted from a sliding window does not drop the full-attention copy from the index.
      if (ev.group !== undefined && ev.group !== 0) {
        tally.otherGroup++;
        continue;
      }
      const store = this.store(ep, rank);
      const bit = MEDIUM_BIT[ev.medium];
      if (ev.kind === 'removed') {
        tally.removed++;
        for (const h of ev.hashes) if (store.remove(h, bit)) tally.blocksRemoved++;
        continue;
      }
      if (ev.blockSize !== ep.blockSize) {
        if (ep.declared || (ep.blockSize !== undefined && !this.empty(ep))) {
          onMalformed(
            'block-size',
            `BlockStored of block_size ${ev.blockSize}, the endpoint's is ${ep.blockSize}${ep.declared ? ' (vllm:cache_config_info)' : ''}`,
          );
          continue;
        }
        ep.blockSize = ev.blockSize;
      }
      tally.stored++;
      this.stored(store, ev, bit, tally);
    }
  }

  private stored(store: BlockStore, ev: KvStoredEvent, bit: number, tally: KvApplyTally): void {
    let key: BlockKey;
    if (ev.parent === undefined) key = rootOf(ev);
    else {
      const parent = store.keyOf(ev.parent);
      if (parent === undefined) {
        tally.unchainable += ev.hashes.length;
        return;
      }
      key = parent;
    }
    const bs = ev.blockSize;
    for (let i = 0; i < ev.hashes.length; i++) {
      key = nextKey(key, ev.tokens, i * bs, (i + 1) * bs);
      const evicted = store.store(ev.hashes[i] as EngineHash, key, bit);
      if (evicted < 0) {
        tally.unchainable += ev.hashes.length - i;
        return;
      }
      tally.evicted += evicted;
      tally.blocksStored++;
    }
  }

  /** Drops the blocks of one rank of an endpoint, or of all its ranks; the endpoint's settings stay. */
  clearEndpoint(endpointId: string, rank?: number): void {
    const ep = this.endpoints.get(endpointId);
    if (!ep) return;
    if (rank !== undefined) ep.stores[rank]?.clear();
    else for (const s of ep.stores) s?.clear();
  }

  /** Forgets an endpoint: its blocks and its settings. */
  removeEndpoint(endpointId: string): void {
    this.endpoints.delete(endpointId);
  }

  /**
   * For each endpoint asked that holds at least the first key: its leading match. An endpoint with several ranks
   * answers with its best rank (the engine, not the router, picks the rank a request runs on, so this is the most the
   * endpoint can save).
   */
  match(keys: readonly BlockKey[], endpointIds: readonly string[]): ReadonlyMap<string, KvMatch> {
    const out = new Map<string, KvMatch>();
    if (keys.length === 0) return out;
    for (const id of endpointIds) {
      const ep = this.endpoints.get(id);
      if (!ep) continue;
      let bestGpu = 0;
      let bestTotal = 0;
      for (const store of ep.stores) {
        if (!store || store.size === 0) continue;
        let total = 0;
        let gpu = 0;
        for (; total < keys.length; total++) {
          const r = store.refs(keys[total] as BlockKey);
          if (refsAny(r) === 0) break;
          if (gpu === total && refsGpu(r) > 0) gpu++;
        }
        if (total > bestTotal) bestTotal = total;
        if (gpu > bestGpu) bestGpu = gpu;
      }
      if (bestTotal > 0) out.set(id, { gpu: bestGpu, total: bestTotal });
    }
    return out;
  }

  private empty(ep: EndpointState): boolean {
    for (const s of ep.stores) if (s !== undefined && s.size > 0) return false;
    return true;
  }

  /** Blocks indexed for an endpoint: all its ranks, or one. */
  blocks(endpointId: string, rank?: number): number {
    const stores = this.endpoints.get(endpointId)?.stores ?? [];
    if (rank !== undefined) return stores[rank]?.size ?? 0;
    let n = 0;
    for (const s of stores) n += s?.size ?? 0;
    return n;
  }

  stats(): KvIndexStats {
    const endpoints: Record<string, number> = {};
    let total = 0;
    for (const id of this.endpoints.keys()) {
      const n = this.blocks(id);
      endpoints[id] = n;
      total += n;
    }
    return { total, endpoints };
  }

  private endpoint(id: string): EndpointState {
    let ep = this.endpoints.get(id);
    if (!ep) {
      ep = { stores: [], capacity: this.maxCapacity, blockSize: undefined, declared: false };
      this.endpoints.set(id, ep);
    }
    return ep;
  }

  private store(ep: EndpointState, rank: number): BlockStore {
    let s = ep.stores[rank];
    if (!s) {
      s = new BlockStore(ep.capacity);
      ep.stores[rank] = s;
    }
    return s;
  }
}

/**
 * The root of an event's chain. An adapter's blocks chain from its name, so they match only that adapter's requests;
 * an engine that gives an adapter id but no name gets a root no request has, so those blocks never match the base.
 */
function rootOf(ev: KvStoredEvent): BlockKey {
  if (ev.loraName !== undefined) return rootKey(ev.loraName);
  if (ev.loraId !== undefined && ev.loraId !== 0) return rootKey(`\u0000lora-id:${ev.loraId}`);
  return rootKey();
}
