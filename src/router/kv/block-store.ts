// The blocks one engine (one data-parallel rank of an endpoint) holds: its hash -> our key and the tiers that hold it,
// and our key -> how many of its blocks carry that key (on the GPU, in any tier). Bounded by a capacity: past it the
// oldest stored block goes first, O(1). Per-block data sits in typed arrays indexed by a slot number, so a block costs
// two key-table slots and a few bytes, not an object or a Map entry; clearing an engine drops its tables whole. Both
// tables file their keys under this process's salt (key-table.ts), so neither block keys nor engine hashes crafted
// to collide cost more than random ones; a Map would not do for engine hashes: V8 hashes a bigint or a number key
// with a fixed, invertible function, and 40,000 uint64 hashes crafted for it took 8.6 s to insert.
import type { BlockKey } from './block-key.js';
import type { EngineHash, KvMedium } from './decode.js';
import { KeyTable } from './key-table.js';

const LOW32 = 0xffffffffn;

/**
 * An engine hash as a 53-bit number, the form the key table holds: an integer hash below 2^53 is itself; above, its
 * high word's top 11 bits fold into the bits below; a hex (raw bytes) hash is mixed down. Two hashes of one engine
 * that fold alike count as one block (the later store wins), which costs at most a routing preference of that
 * engine's own: at a million random hashes the chance of any such pair is about 1e-4.
 */
export function hashFingerprint(h: EngineHash): number {
  if (typeof h === 'bigint') {
    const lo = Number(h & LOW32);
    const hi = Number((h >> 32n) & LOW32);
    return ((hi ^ (hi >>> 21)) & 0x1fffff) * 0x1_0000_0000 + lo;
  }
  let a = 0x811c9dc5 | 0;
  let b = 0x9747b28c | 0;
  for (let i = 0; i < h.length; i++) {
    const c = h.charCodeAt(i);
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(b ^ c, 0x5bd1e995);
    b ^= b >>> 13;
  }
  a ^= a >>> 16;
  a = Math.imul(a, 0x85ebca6b);
  a ^= a >>> 13;
  return (b & 0x1fffff) * 0x1_0000_0000 + (a >>> 0);
}

/** One bit per medium, so a block on the GPU and in CPU offload is one entry, dropped only when no tier holds it. */
export const MEDIUM_BIT: Readonly<Record<KvMedium, number>> = { gpu: 1, cpu: 2, disk: 4, other: 8 };
const GPU_BIT = 1;

// byKey packs two reference counts in one 30-bit integer: how many of this engine's blocks have the key in any tier
// (low 15 bits) and on the GPU (the next 15). A key is held by more
// than one block only when engines hash something our key does not see (multimodal extra keys, a cache salt).
const REF_BITS = 15;
const REF_MAX = (1 << REF_BITS) - 1;
const ANY_ONE = 1;
const GPU_ONE = 1 << REF_BITS;

/** Leading blocks a store holds, packed the same way: any tier in the low bits, GPU above. */
export function refsAny(refs: number): number {
  return refs & REF_MAX;
}
export function refsGpu(refs: number): number {
  return refs >>> REF_BITS;
}

const FIRST_SLOTS = 1024;
const NONE = -1;

export class BlockStore {
  /** an engine hash's fingerprint -> its slot + 1 */
  private byHash = new KeyTable();
  private byKey = new KeyTable();
  private keys: Float64Array;
  /** the fingerprint of the engine hash in each slot */
  private fps: Float64Array;
  private masks: Uint8Array;
  /** insertion order, oldest at head: prev/next slot numbers (next also links the free list) */
  private prev: Int32Array;
  private next: Int32Array;
  private head = NONE;
  private tail = NONE;
  private free = NONE;
  /** slots ever handed out (slots below it are in use or on the free list) */
  private used = 0;
  private count = 0;

  constructor(private cap: number) {
    const n = Math.min(FIRST_SLOTS, Math.max(1, cap));
    this.keys = new Float64Array(n);
    this.fps = new Float64Array(n);
    this.masks = new Uint8Array(n);
    this.prev = new Int32Array(n);
    this.next = new Int32Array(n);
  }

  get size(): number {
    return this.count;
  }

  get capacity(): number {
    return this.cap;
  }

  /** Sets the capacity; returns how many blocks went to make room. */
  setCapacity(cap: number): number {
    this.cap = Math.max(1, cap);
    let evicted = 0;
    while (this.count > this.cap) {
      this.drop(this.head);
      evicted++;
    }
    return evicted;
  }

  /** Our key of the engine's block, when it holds it in any tier. */
  keyOf(hash: EngineHash): BlockKey | undefined {
    const slot = this.byHash.get(hashFingerprint(hash)) - 1;
    return slot < 0 ? undefined : this.keys[slot];
  }

  /** Packed reference counts of a key (refsAny, refsGpu); 0 when no block has it. */
  refs(key: BlockKey): number {
    return this.byKey.get(key);
  }

  /**
   * Records that the engine holds block `hash` (our `key`) in `medium`; a block stored again moves to the newest end.
   * Returns how many blocks were evicted for room, or -1 when the block was refused (a key held by too many blocks).
   */
  store(hash: EngineHash, key: BlockKey, bit: number): number {
    const fp = hashFingerprint(hash);
    let slot = this.byHash.get(fp) - 1;
    if (slot >= 0) {
      const old = this.masks[slot] as number;
      if (this.keys[slot] !== key) {
        // the same engine hash under another key (the engine's hash collided, or its parent was re-keyed): the latest wins
        if (!this.canRef(key)) {
          this.drop(slot);
          return -1;
        }
        this.unref(this.keys[slot] as number, old);
        this.ref(key, bit);
        this.keys[slot] = key;
        this.masks[slot] = bit;
      } else if ((old & bit) === 0) {
        this.unref(key, old);
        this.ref(key, old | bit);
        this.masks[slot] = old | bit;
      }
      this.unlink(slot);
      this.append(slot);
      return 0;
    }
    let evicted = 0;
    while (this.count >= this.cap) {
      this.drop(this.head);
      evicted++;
    }
    if (!this.ref(key, bit)) return -1;
    slot = this.alloc();
    this.keys[slot] = key;
    this.masks[slot] = bit;
    this.fps[slot] = fp;
    this.byHash.set(fp, slot + 1);
    this.append(slot);
    this.count++;
    return evicted;
  }

  /** The engine no longer holds `hash` in `medium`; the block goes when no tier holds it. False: it was not held. */
  remove(hash: EngineHash, bit: number): boolean {
    const slot = this.byHash.get(hashFingerprint(hash)) - 1;
    if (slot < 0) return false;
    const old = this.masks[slot] as number;
    if ((old & bit) === 0) return false;
    const left = old & ~bit;
    if (left === 0) {
      this.drop(slot);
    } else {
      this.unref(this.keys[slot] as number, old);
      this.ref(this.keys[slot] as number, left);
      this.masks[slot] = left;
    }
    return true;
  }

  /** Drops every block (the engine cleared its cache, restarted, or its events can no longer be trusted). */
  clear(): void {
    // new tables: a store cleared after a flood of blocks should give that memory back
    this.byHash = new KeyTable();
    this.byKey = new KeyTable();
    this.head = this.tail = this.free = NONE;
    this.used = 0;
    this.count = 0;
    const n = Math.min(FIRST_SLOTS, this.cap);
    this.keys = new Float64Array(n);
    this.fps = new Float64Array(n);
    this.masks = new Uint8Array(n);
    this.prev = new Int32Array(n);
    this.next = new Int32Array(n);
  }

  /** false when a count would overflow its 15 bits (only a hostile engine stores 32767 blocks of one key) */
  private canRef(key: BlockKey): boolean {
    const r = this.byKey.get(key);
    return (r & REF_MAX) !== REF_MAX && r >>> REF_BITS !== REF_MAX;
  }

  private ref(key: BlockKey, mask: number): boolean {
    if (!this.canRef(key)) return false;
    this.byKey.set(key, this.byKey.get(key) + ANY_ONE + (mask & GPU_BIT ? GPU_ONE : 0));
    return true;
  }

  private unref(key: BlockKey, mask: number): void {
    const r = this.byKey.get(key) - ANY_ONE - (mask & GPU_BIT ? GPU_ONE : 0);
    // no block in any tier: the key goes (the GPU count is then 0 too)
    this.byKey.set(key, (r & REF_MAX) === 0 ? 0 : r);
  }

  private drop(slot: number): void {
    this.unref(this.keys[slot] as number, this.masks[slot] as number);
    this.byHash.delete(this.fps[slot] as number);
    this.masks[slot] = 0;
    this.unlink(slot);
    this.next[slot] = this.free;
    this.free = slot;
    this.count--;
  }

  private alloc(): number {
    if (this.free !== NONE) {
      const slot = this.free;
      this.free = this.next[slot] as number;
      return slot;
    }
    if (this.used === this.keys.length) this.grow();
    return this.used++;
  }

  private grow(): void {
    // doubling, never past the capacity: an engine that holds few blocks costs few bytes
    const n = Math.min(Math.max(this.cap, this.keys.length + 1), this.keys.length * 2);
    const keys = new Float64Array(n);
    keys.set(this.keys);
    this.keys = keys;
    const fps = new Float64Array(n);
    fps.set(this.fps);
    this.fps = fps;
    const masks = new Uint8Array(n);
    masks.set(this.masks);
    this.masks = masks;
    const prev = new Int32Array(n);
    prev.set(this.prev);
    this.prev = prev;
    const next = new Int32Array(n);
    next.set(this.next);
    this.next = next;
  }

  private append(slot: number): void {
    this.prev[slot] = this.tail;
    this.next[slot] = NONE;
    if (this.tail !== NONE) this.next[this.tail] = slot;
    else this.head = slot;
    this.tail = slot;
  }

  private unlink(slot: number): void {
    const p = this.prev[slot] as number;
    const n = this.next[slot] as number;
    if (p !== NONE) this.next[p] = n;
    else this.head = n;
    if (n !== NONE) this.prev[n] = p;
    else this.tail = p;
  }
}
