// Where this router just sent a prompt (src/router/kv/pending.ts): the leading keys sent to one endpoint, for ttl at
// most, bounded to maxKeys with the least recently routed going first, in O(1) past the bound.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PendingPrefixes } from '../../src/router/kv/pending.js';

test('the leading run of keys last sent to one endpoint; expired entries and other endpoints end it', () => {
  let now = 0;
  const p = new PendingPrefixes(1000, 100, () => now);
  p.record([1, 2, 3, 4], 'a');
  p.record([3, 4, 5], 'b');
  assert.deepEqual(p.leading([1, 2, 3, 4]), { endpointId: 'a', length: 2 }, '3 and 4 went to b since');
  assert.deepEqual(p.leading([3, 4, 5, 6]), { endpointId: 'b', length: 3 });
  assert.equal(p.leading([9]), undefined);
  now = 1001;
  assert.equal(p.leading([3, 4, 5]), undefined, 'past its ttl the events alone decide');
  assert.equal(new PendingPrefixes(0, 100).leading([1]), undefined);
});

test('past the bound the least recently routed keys go; a lookup does not make a key recent', () => {
  const p = new PendingPrefixes(60_000, 4);
  p.record([1, 2], 'a');
  p.record([3, 4], 'b');
  assert.ok(p.leading([1]));
  p.record([5, 6], 'c');
  assert.equal(p.size, 4);
  assert.equal(p.leading([1]), undefined, '1 and 2 were routed longest ago, looked up or not');
  assert.deepEqual(p.leading([3, 4]), { endpointId: 'b', length: 2 });
});

test('recording past the bound costs what recording below it costs (12k-token prompts: 750 keys each)', () => {
  // relative, so a busy machine slows both halves alike. A Map used as the queue took 40-130 ms per prompt past the
  // bound against 1-6 ms below it: V8 walks every key deleted since the table's last rebuild to find the first one
  const p = new PendingPrefixes(60_000, 262_144);
  const time = (from: number, to: number): number => {
    const started = process.hrtime.bigint();
    for (let r = from; r < to; r++)
      p.record(
        Array.from({ length: 750 }, (_, i) => r * 1000 + i),
        `e${r % 4}`,
      );
    return Number(process.hrtime.bigint() - started) / 1e6 / (to - from);
  };
  const below = time(0, 300);
  const past = time(300, 900);
  assert.equal(p.size, 262_144);
  assert.ok(past < 8 * Math.max(below, 0.2), `per prompt: ${below.toFixed(2)} ms below the bound, ${past.toFixed(2)} ms past it`);
});
