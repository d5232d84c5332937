// A hash table from block key (a 53-bit integer) to a small positive integer, in two typed arrays. It replaces a
// Map<number, number> on the hottest path of a match (one lookup per block per endpoint): a 53-bit number is not a
// V8 small integer, so a Map boxes every key as a heap number and hashes it on each lookup; here a key is a float in
// a Float64Array, its slot is its own low bits (block keys are hash outputs, already uniform), and a lookup is a
// few array reads. Linear probing at a load of at most 1/2, deletion by backward shift (no tombstones).
import type { BlockKey } from './block-key.js';

const FIRST = 1024;

export class KeyTable {
  private keys: Float64Array;
  /** 0 marks an empty slot: values stored are >= 1 */
  private vals: Int32Array;
  private mask: number;
  private count = 0;

  constructor(capacity = FIRST) {
    let n = FIRST;
    while (n < capacity * 2) n *= 2;
    this.keys = new Float64Array(n);
    this.vals = new Int32Array(n);
    this.mask = n - 1;
  }

  get size(): number {
    return this.count;
  }

  /** The value of `key`; 0 when absent. */
  get(key: BlockKey): number {
    const keys = this.keys;
    const vals = this.vals;
    let i = (key >>> 0) & this.mask;
    for (;;) {
      const v = vals[i] as number;
      if (v === 0) return 0;
      if (keys[i] === key) return v;
      i = (i + 1) & this.mask;
    }
  }

  /** Sets `key` to `value` (>= 1), or removes it when `value` is 0. */
  set(key: BlockKey, value: number): void {
    if (value === 0) {
      this.delete(key);
      return;
    }
    let i = (key >>> 0) & this.mask;
    for (;;) {
      const v = this.vals[i] as number;
      if (v === 0) break;
      if (this.keys[i] === key) {
        this.vals[i] = value;
        return;
      }
      i = (i + 1) & this.mask;
    }
    this.keys[i] = key;
    this.vals[i] = value;
    this.count++;
    if (this.count * 2 > this.mask + 1) this.grow();
  }

  delete(key: BlockKey): void {
    const mask = this.mask;
    const keys = this.keys;
    const vals = this.vals;
    let i = (key >>> 0) & mask;
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
      const home = ((keys[j] as number) >>> 0) & mask;
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
