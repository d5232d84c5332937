// The block-key hash table against a Map on random operations: keys crowded into a few home slots (long probe runs,
// runs that wrap around the table's end) so that backward-shift deletion and growth are exercised. And its salt: keys
// crafted to collide (sharing their low 32 bits, or colliding under the unsalted slot function, which anyone can
// read) land in this process's table as random keys do.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { homeSlot, KeyTable, PROCESS_SALT, type TableSalt } from '../../src/router/kv/key-table.js';

const FIRST_MASK = 2047; // a new table has 2048 slots
const FIXED: TableSalt = [0x1234_5678, 0x9abc_def0];

/** Keys whose home slot (under FIXED, in a new table) is one of `homes`, six of each: homes at and across the end. */
function crowdedKeys(homes: readonly number[]): number[] {
  const out: number[] = [];
  for (const home of homes) {
    let found = 0;
    for (let k = 0; found < 6; k += 0x1_0000_0001) {
      if (homeSlot(k, FIXED[0], FIXED[1], FIRST_MASK) !== home) continue;
      out.push(k);
      found++;
    }
  }
  return out;
}

test('KeyTable behaves as a Map on random sets and deletes, probe runs wrapping the end included', () => {
  const all = crowdedKeys([2045, 2046, 2047, 0, 1, 7]);
  const op = fc.tuple(fc.constantFrom(...all), fc.integer({ min: 0, max: 3 }));
  fc.assert(
    fc.property(fc.array(op, { minLength: 1, maxLength: 200 }), (ops) => {
      const t = new KeyTable(undefined, FIXED);
      const m = new Map<number, number>();
      for (const [k, v] of ops) {
        t.set(k, v);
        if (v === 0) m.delete(k);
        else m.set(k, v);
        assert.equal(t.size, m.size);
        for (const kk of all) assert.equal(t.get(kk), m.get(kk) ?? 0, `key ${kk}`);
      }
    }),
    { numRuns: 500 },
  );
});

test('KeyTable grows past its first size and keeps every entry; deleting all empties it', () => {
  const t = new KeyTable();
  const keys = Array.from({ length: 50_000 }, (_, i) => (i * 2654435761) % 2 ** 53);
  for (const [i, k] of keys.entries()) t.set(k, (i % 1000) + 1);
  assert.equal(t.size, 50_000);
  for (const [i, k] of keys.entries()) assert.equal(t.get(k), (i % 1000) + 1);
  for (const k of keys.slice(0, 25_000)) t.delete(k);
  assert.equal(t.size, 25_000);
  for (const [i, k] of keys.entries()) assert.equal(t.get(k), i < 25_000 ? 0 : (i % 1000) + 1);
  for (const k of keys) t.set(k, 0);
  assert.equal(t.size, 0);
});

/** The inverse of x -> x * c mod 2^32 for an odd c (Newton's iteration). */
function inverse(c: number): number {
  let x = c;
  for (let i = 0; i < 5; i++) x = Math.imul(x, 2 - Math.imul(c, x));
  return x;
}

/** The inverse of h -> h ^ (h >>> s). */
function unshift(h: number, s: number): number {
  let x = h;
  for (let i = 0; i < 32 / s; i++) x = h ^ (x >>> s);
  return x >>> 0;
}

/**
 * n (< 2^16) distinct keys below 2^32 whose home slot under the salt (0, 0) is the same in any table of up to 2^16
 * slots: what an attacker who reads the unsalted slot function crafts, by running it backwards from outputs sharing
 * their low bits.
 */
function craftedForUnsalted(n: number): number[] {
  const out: number[] = [];
  for (let i = 1; out.length < n; i++) {
    const h2 = unshift(((i << 16) | 12345) >>> 0, 16);
    const h1 = unshift(Math.imul(h2, inverse(0x85ebca6b)) >>> 0, 15);
    out.push(Math.imul(h1, inverse(0xcc9e2d51)) >>> 0);
  }
  return out;
}

/** n keys below 2^53 that share their low 32 bits: the slot of the table before it was salted. */
function sharingLow32(n: number): number[] {
  return Array.from({ length: n }, (_, i) => (i + 1) * 0x1_0000_0000 + 0xdead_beef);
}

function randomKeys(n: number): number[] {
  return Array.from({ length: n }, () => Math.floor(Math.random() * 2 ** 53));
}

function filled(keys: readonly number[], salt?: TableSalt): KeyTable {
  const t = new KeyTable(undefined, salt);
  for (const k of keys) t.set(k, 1);
  return t;
}

test('the crafted sets really collide where the slot is not salted', () => {
  // under the salt (0, 0) every crafted key has one home: each insert walks the whole run (n^2/2 probes)
  const crafted = craftedForUnsalted(2000);
  const homes = new Set(crafted.map((k) => homeSlot(k, 0, 0, 0xffff)));
  assert.equal(new Set(crafted).size, 2000);
  assert.equal(homes.size, 1);
  assert.equal(filled(crafted, [0, 0]).displacement(), (2000 * 1999) / 2);
  // the low 32 bits alone (the slot before the salt): one run as well
  assert.equal(new Set(sharingLow32(2000).map((k) => (k >>> 0) & ((1 << 20) - 1))).size, 1);
});

test('under the process salt, crafted keys are filed as random keys are: the slots an insert walks alike', () => {
  const n = 40_000;
  const sets = { random: randomKeys(n), crafted: craftedForUnsalted(n), low32: sharingLow32(n) };
  // linear probing at a load of 1/2 or less: about half a slot per entry on average for random keys
  const random = filled(sets.random).displacement() / n;
  for (const name of ['crafted', 'low32'] as const) {
    const d = filled(sets[name]).displacement() / n;
    assert.ok(d < 3 * random + 1, `${name}: ${d.toFixed(2)} slots from home per entry, random keys ${random.toFixed(2)}`);
  }
  // counted, not timed: with linear probing an insert's cost is the slots it walks, which displacement counts (a timed
  // fill of 40,000 keys takes ~2 ms, too short to compare on a busy machine)
});

test('the salt is drawn per process: two processes file the same key apart', async () => {
  const { execFileSync } = await import('node:child_process');
  const read = () =>
    execFileSync(
      process.execPath,
      ['--import', 'tsx', '-e', "import('./src/router/kv/key-table.ts').then((m) => console.log(m.PROCESS_SALT.join(',')))"],
      {
        encoding: 'utf8',
      },
    ).trim();
  const a = read();
  const b = read();
  assert.match(a, /^\d+,\d+$/);
  assert.notEqual(a, b);
  assert.notEqual(a, PROCESS_SALT.join(','));
});
