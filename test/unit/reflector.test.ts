import { test } from 'node:test';
import assert from 'node:assert/strict';
import { jittered } from '../../src/router/discovery/kubernetes/reflector.js';

test('reflector backoff jitter: a delay in the upper half of the backoff, so replicas do not retry in step', () => {
  assert.equal(
    jittered(1000, () => 0),
    500,
  );
  assert.equal(
    jittered(1000, () => 1),
    1000,
  );
  const seen = new Set(Array.from({ length: 50 }, () => jittered(10_000)));
  assert.ok(seen.size > 10, 'spread out');
  for (const d of seen) assert.ok(d >= 5_000 && d <= 10_000);
});
