// A hash table from a 53-bit integer key (a block key, or an engine hash's fingerprint) to a small positive integer,
// in two typed arrays. It replaces a Map<number, number> on the hottest path of a match (one lookup per block per
// endpoint): a 53-bit number is not a V8 small integer, so a Map boxes every key as a heap number and hashes it on
// each lookup; here a key is a float in a Float64Array and a lookup is a few array reads. Linear probing at a load of
// at most 1/2, deletion by backward shift (no tombstones).
//
// The slot a key starts probing from is a keyed mix of all its bits under a salt drawn at random once per process.
// Block keys are an unkeyed function of token ids that an engine's events (or a client's prompt) choose, and engine
// hashes are whatever the engine sends: were the slot the key's own low bits, keys crafted to share them would pile
// into one probe run, and indexing n of them would cost n^2 / 2 probes (40,000 such blocks took 4.9 s). Under a salt
// nobody outside the process knows, a crafted set lands like a random one. The keys themselves stay unsalted: every
// replica computes the same keys, only where this process files them differs.
import { randomFillSync } from 'node:crypto';

const FIRST = 1024;

/** Two 32-bit words mixed into every key's home slot. */
export type TableSalt = readonly [number, number];

/** This process's salt, drawn once. */
export const PROCESS_SALT: TableSalt = (() => {
  const w = randomFillSync(new Uint32Array(2));
  return [w[0] as number, w[1] as number];
})();

/**
 * The home slot of `key` (an integer in [0, 2^53)) in a table of mask + 1 slots: the low word, salted, is multiplied
 * and folded; the high word (key x 2^-32, exact) and the second salt word join before a second multiplication, whose
 * high half is folded down. Every bit of the key and of the salt reaches the slot, and for a fixed high word and salt
 * the 32-bit value before the mask is a bijection of the low word. Two multiplications: on match()'s path, one
 * lookup per block per endpoint, it costs a few ns a lookup (bench/kv-index.ts).
 */
export function homeSlot(key: number, s0: number, s1: number, mask: number): number {
  let h = Math.imul((key >>> 0) ^ s0, 0xcc9e2d51);
  h = Math.imul(h ^ (h >>> 15) ^ ((key * 2.3283064365386963e-10) | 0) ^ s1, 0x85ebca6b);
  return (h ^ (h >>> 16)) & mask;
}

export class KeyTable {
  private keys: Float64Array;
  /** 0 marks an empty slot: values stored are >= 1 */
  private vals: Int32Array;
  private mask: number;
  private count = 0;
  private readonly s0: number;
  private readonly s1: number;

  /** `salt`: this process's unless a test gives one */
  constructor(capacity = FIRST, salt: TableSalt = PROCESS_SALT) {
    let n = FIRST;
    while (n < capacity * 2) n *= 2;
    this.keys = new Float64Array(n);
    this.vals = new Int32Array(n);
    this.mask = n - 1;
    this.s0 = salt[0];
    this.s1 = salt[1];
  }

  get size(): number {
    return this.count;
  }

  /** The value of `key`; 0 when absent. */
  get(key: number): number {
    const keys = this.keys;
    const vals = this.vals;
    const mask = this.mask;
    let i = homeSlot(key, this.s0, this.s1, mask);
    for (;;) {
      const v = vals[i] as number;
      if (v === 0) return 0;
      if (keys[i] === key) return v;
      i = (i + 1) & mask;
    }
  }

  /** Sets `key` to `value` (>= 1), or removes it when `value` is 0. */
  set(key: number, value: number): void {
    if (value === 0) {
      this.delete(key);
      return;
    }
    const mask = this.mask;
    let i = homeSlot(key, this.s0, this.s1, mask);
    for (;;) {
      const v = this.vals[i] as number;
      if (v === 0) break;
      if (this.keys[i] === key) {
        this.vals[i] = value;
        return;
      }
      i = (i + 1) & mask;
    }
    this.keys[i] = key;
    this.vals[i] = value;
    this.count++;
    if (this.count * 2 > mask + 1) this.grow();
  }

  delete(key: number): void {
    const mask = this.mask;
    const keys = this.keys;
    const vals = this.vals;
    let i = homeSlot(key, this.s0, this.s1, mask);
    for (;;) {
      if (vals[i] === 0) return;
      if (keys[i] === key) break;
      i = (i + 1) & mask;
    }
    // backward shift: move later entries of the probe run into the hole when their home slot allows it
    let j = i;
    for (;;) {
      j = (j + 1) & mask;
      if (vals[j] === 0) break;
      const home = homeSlot(keys[j] as number, this.s0, this.s1, mask);
      // the entry at j may move to i when its home is not in the cyclic range (i, j]
      const inRange = i <= j ? home > i && home <= j : home > i || home <= j;
      if (inRange) continue;
      keys[i] = keys[j] as number;
      vals[i] = vals[j] as number;
      i = j;
    }
    vals[i] = 0;
    this.count--;
  }

  /**
   * How far entries sit from their home slots, summed over the table (one probe per slot passed): what finding every
   * entry once costs beyond one read. Scans the whole table; for tests and benches, never on a request's path.
   */
  displacement(): number {
    const mask = this.mask;
    let total = 0;
    for (let i = 0; i <= mask; i++) {
      if (this.vals[i] === 0) continue;
      total += (i - homeSlot(this.keys[i] as number, this.s0, this.s1, mask)) & mask;
    }
    return total;
  }

  private grow(): void {
    const oldKeys = this.keys;
    const oldVals = this.vals;
    const n = oldKeys.length * 2;
    this.keys = new Float64Array(n);
    this.vals = new Int32Array(n);
    this.mask = n - 1;
    this.count = 0;
    for (let i = 0; i < oldKeys.length; i++) {
      const v = oldVals[i] as number;
      if (v !== 0) this.set(oldKeys[i] as number, v);
    }
  }
}
