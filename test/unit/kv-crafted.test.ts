// Events crafted against the index's hash tables, by someone who reads this code (the block-key function, the key
// table's unsalted slot, V8's hash of a bigint) but cannot know this process's salt: 40,000 blocks whose block keys
// share their low 32 bits (the key table's slot before it was salted: 4.9 s to index), engine hashes crafted to
// collide in V8's Map (8.6 s), engine hashes that collide in the key table under a zero salt. Each is indexed at the
// rate of random events, compared as rates (the best of several runs of each), never against a wall-clock bound.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { nextKey, rootKey } from '../../src/router/kv/block-key.js';
import type { EngineHash, KvBatch, KvEvent } from '../../src/router/kv/decode.js';
import { KvIndex } from '../../src/router/kv/kv-index.js';
import { homeSlot } from '../../src/router/kv/key-table.js';

const BS = 16;
const N = 40_000;
const U64 = (1n << 64n) - 1n;

/** The inverse of x -> x * c mod 2^32 for an odd c. */
function inverse32(c: number): number {
  let x = c;
  for (let i = 0; i < 5; i++) x = Math.imul(x, 2 - Math.imul(c, x));
  return x;
}

/** The inverse of h -> h ^ (h >>> s) on 32 bits. */
function unshift32(h: number, s: number): number {
  let x = h;
  for (let i = 0; i < 32 / s; i++) x = h ^ (x >>> s);
  return x >>> 0;
}

/**
 * Token ids of a root block whose block key has the low 32 bits every other block made here has: the first token
 * varies (so does the key's high part), the last is solved for so that the low lane of nextKey ends the same.
 */
function craftedBlock(i: number): Uint32Array {
  const t = new Uint32Array(BS);
  t[0] = i;
  for (let k = 1; k < BS - 1; k++) t[k] = 7 * k;
  // nextKey's low lane after all but the last token
  let a = (rootKey() % 0x1_0000_0000) ^ 0x2545f491;
  for (let k = 0; k < BS - 1; k++) {
    a = Math.imul(a ^ (t[k] as number), 0x01000193);
    a ^= a >>> 15;
  }
  const target = 0x0bad_f00d;
  const beforeShift = unshift32(target, 15);
  t[BS - 1] = (Math.imul(beforeShift, inverse32(0x01000193)) ^ a) >>> 0;
  return t;
}

/** V8's hash of a bigint key (its low 64-bit digit through Thomas Wang's 64-bit mix), run backwards. */
function v8CollidingHashes(n: number): bigint[] {
  const inv64 = (c: bigint): bigint => {
    let x = c;
    for (let i = 0; i < 6; i++) x = (x * (2n - c * x)) & U64;
    return x;
  };
  const unshiftR = (h: bigint, s: bigint): bigint => {
    let x = h;
    for (let i = 0n; i < 64n / s + 1n; i++) x = h ^ (x >> s);
    return x & U64;
  };
  const out: bigint[] = [];
  for (let i = 1; i <= n; i++) {
    // outputs sharing their low 30 bits: one bucket of any Map
    let h = (BigInt(i) << 30n) | 12345n;
    h = unshiftR(h, 22n);
    h = (h * inv64(1n + (1n << 6n))) & U64;
    h = unshiftR(h, 11n);
    h = (h * inv64(21n)) & U64;
    h = unshiftR(h, 31n);
    out.push(((h + 1n) * inv64((1n << 18n) - 1n)) & U64);
  }
  return out;
}

/**
 * Engine hashes below 2^32 (their own fingerprints) that share their home slot under the salt (0, 0) in any table of up
 * to 2^16 slots (and one of two in a table of 2^17, where 40,000 entries sit).
 */
function tableCollidingHashes(n: number): bigint[] {
  const out: bigint[] = [];
  for (let i = 1; out.length < n; i++) {
    const h2 = unshift32(((i << 16) | 777) >>> 0, 16);
    const h1 = unshift32(Math.imul(h2, inverse32(0x85ebca6b)) >>> 0, 15);
    out.push(BigInt(Math.imul(h1, inverse32(0xcc9e2d51)) >>> 0));
  }
  return out;
}

let rnd = 0x2468ace1;
function random32(): number {
  rnd = (Math.imul(rnd, 1103515245) + 12345) >>> 0;
  return rnd;
}

function randomHashes(n: number): bigint[] {
  return Array.from({ length: n }, () => (BigInt(random32()) << 32n) | BigInt(random32()));
}

function randomBlock(): Uint32Array {
  return Uint32Array.from({ length: BS }, () => random32() % 150_000);
}

/** Batches of 100 one-block root events. */
function batches(hashes: readonly EngineHash[], block: (i: number) => Uint32Array): KvBatch[] {
  const out: KvBatch[] = [];
  for (let i = 0; i < hashes.length; i += 100) {
    const events: KvEvent[] = [];
    for (let k = i; k < Math.min(i + 100, hashes.length); k++)
      events.push({
        kind: 'stored',
        hashes: [hashes[k] as EngineHash],
        parent: undefined,
        tokens: block(k),
        blockSize: BS,
        loraName: undefined,
        loraId: undefined,
        medium: 'gpu',
        tier: 'gpu',
        group: undefined,
      });
    out.push({ ts: 0, events, dpRank: 0 });
  }
  return out;
}

/** The best of `runs` times (ms) to index the batches into a new index (a busy machine slows a run, never speeds one). */
function bestTime(set: readonly KvBatch[], runs: number): number {
  let best = Number.POSITIVE_INFINITY;
  for (let r = 0; r < runs; r++) {
    const idx = new KvIndex({ maxCapacity: 100_000 });
    const t0 = performance.now();
    for (const b of set) idx.apply('e', 0, b);
    best = Math.min(best, performance.now() - t0);
    assert.equal(idx.blocks('e'), N);
  }
  return best;
}

test('the crafted sets collide as intended where nothing is salted', () => {
  const keys = Array.from({ length: 1000 }, (_, i) => nextKey(rootKey(), craftedBlock(i), 0, BS));
  assert.equal(new Set(keys.map((k) => k % 0x1_0000_0000)).size, 1, 'one low word');
  assert.ok(new Set(keys).size > 990, 'distinct keys');
  const homes = new Set(tableCollidingHashes(1000).map((h) => homeSlot(Number(h), 0, 0, 0xffff)));
  assert.equal(homes.size, 1);
});

test('block keys sharing their low 32 bits and engine hashes crafted to collide index at the rate of random ones', () => {
  const random = batches(randomHashes(N), randomBlock);
  const sets: Record<string, KvBatch[]> = {
    'block keys sharing their low 32 bits, hashes colliding in a Map': batches(v8CollidingHashes(N), craftedBlock),
    'hashes colliding in the unsalted key table': batches(tableCollidingHashes(N), randomBlock),
  };
  bestTime(random, 1); // warm up
  const base = bestTime(random, 3);
  for (const [name, set] of Object.entries(sets)) {
    const ms = bestTime(set, 3);
    // before the salt, the first set took 38x as long as random ones
    assert.ok(ms < 4 * base + 20, `${name}: ${ms.toFixed(0)} ms for ${N} blocks, random ${base.toFixed(0)} ms`);
  }
});
