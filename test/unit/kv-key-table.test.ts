// The block-key hash table against a Map on random operations: keys crowded into a few home slots (long probe runs,
// runs that wrap around the table's end) so that backward-shift deletion and growth are exercised.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { KeyTable } from '../../src/router/kv/key-table.js';

test('KeyTable behaves as a Map on random sets and deletes, probe runs wrapping the end included', () => {
  // the table starts at 2048 slots; low bits 2045..2047, 0, 1 put homes at and across the end
  const key = fc
    .tuple(fc.integer({ min: 0, max: 5 }), fc.constantFrom(2045, 2046, 2047, 0, 1, 7))
    .map(([hi, lo]) => hi * 0x1_0000_0000 + lo);
  const op = fc.tuple(key, fc.integer({ min: 0, max: 3 }));
  fc.assert(
    fc.property(fc.array(op, { minLength: 1, maxLength: 200 }), (ops) => {
      const t = new KeyTable();
      const m = new Map<number, number>();
      for (const [k, v] of ops) {
        t.set(k, v);
        if (v === 0) m.delete(k);
        else m.set(k, v);
        assert.equal(t.size, m.size);
        for (let hi = 0; hi <= 5; hi++)
          for (const lo of [2045, 2046, 2047, 0, 1, 7]) {
            const kk = hi * 0x1_0000_0000 + lo;
            assert.equal(t.get(kk), m.get(kk) ?? 0, `key ${kk}`);
          }
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
