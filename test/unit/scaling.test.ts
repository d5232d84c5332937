import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ModelCatalog } from '../../src/router/catalog/catalog.js';
import { expectedRemainingSeconds } from '../../src/router/scaling/cold-start.js';
import { HoldQueue, QueueFullError } from '../../src/router/scaling/hold-queue.js';
import { metricNameFor } from '../../src/router/scaling/keda.js';
import { within } from '../support/within.js';

test('Retry-After: the flag default until measured, then the remaining expected time, at least 1 s, capped', () => {
  const opts = { defaultSeconds: 5, maxSeconds: 60 };
  assert.equal(expectedRemainingSeconds(undefined, 0, opts), 5);
  assert.equal(expectedRemainingSeconds(4_000, 0, opts), 4);
  assert.equal(expectedRemainingSeconds(4_000, 1_500, opts), 3);
  assert.equal(expectedRemainingSeconds(4_000, 9_000, opts), 1);
  assert.equal(expectedRemainingSeconds(600_000, 0, opts), 60);
});

test('KEDA metric names are DNS-label-like', () => {
  assert.equal(metricNameFor('meta-llama/Llama-3.1-8B-Instruct'), 'llm-router-meta-llama-llama-3-1-8b-instruct');
  assert.ok(metricNameFor('x'.repeat(200)).length <= 63);
});

// The hold queue re-checks its waiters on a timer (tickMs) and reads the time from its `now` option: these tests drive
// both, so a tick happens only where a test calls tick(), and a wait is over only when the test moves the clock.

test('hold queue: FIFO, bounded, released onto endpoints as they come up, a bounded number per endpoint', async (t) => {
  t.mock.timers.enable({ apis: ['setInterval'] });
  const now = 0;
  const c = new ModelCatalog({ now: () => now });
  c.setDeclarations('k8s', [{ model: 'm', replicasWanted: true }]);
  const q = new HoldQueue(c, { waitMs: () => 10_000, maxPerModel: 5, releasePerEndpoint: 2, tickMs: 5, now: () => now });
  q.start();
  const order: number[] = [];
  const held = [0, 1, 2, 3, 4].map((i) => {
    const h = q.hold('m');
    void h.outcome.then((o) => o === 'ready' && order.push(i));
    return h;
  });
  assert.throws(() => q.hold('m'), QueueFullError);
  assert.equal(q.held('m'), 5);

  c.setEndpoints('k8s', [{ id: 'a', url: 'http://a', models: ['m'] }]);
  c.setState(c.endpoints()[0]!, 'ready');
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(order, [0, 1], 'the first endpoint takes two, in arrival order');
  assert.equal(q.held('m'), 3);

  held[3]!.abort();
  assert.equal(q.held('m'), 2, 'a client that leaves is gone at once');
  assert.equal(await held[3]!.outcome, 'aborted');

  c.setEndpoints('k8s', [
    { id: 'a', url: 'http://a', models: ['m'] },
    { id: 'b', url: 'http://b', models: ['m'] },
  ]);
  c.setState(c.endpoints().find((e) => e.id === 'b')!, 'ready');
  assert.deepEqual(await within(5_000, 'the rest released', Promise.all([held[2]!.outcome, held[4]!.outcome])), ['ready', 'ready']);
  assert.deepEqual(order, [0, 1, 2, 4], 'the second endpoint takes the rest');
  q.stop();
});

test('hold queue: a wait that is over times out for a model still not ready, and goes on for a ready one', async (t) => {
  t.mock.timers.enable({ apis: ['setInterval'] });
  let now = 0;
  const c = new ModelCatalog({ now: () => now });
  c.setDeclarations('k8s', [{ model: 'm', replicasWanted: true }]);
  const q = new HoldQueue(c, { waitMs: () => 1_000, maxPerModel: 10, releasePerEndpoint: 1, tickMs: 5, now: () => now });
  q.start();
  t.after(() => q.stop());
  const first = q.hold('m');
  t.mock.timers.tick(5);
  assert.equal(q.held('m'), 1, 'its wait is not over yet');
  now = 1_001;
  t.mock.timers.tick(5);
  assert.equal(await first.outcome, 'timeout');
  c.setEndpoints('k8s', [{ id: 'a', url: 'http://a', models: ['m'] }]);
  const e = c.endpoints()[0]!;
  c.setState(e, 'ready');
  for (let i = 0; i < 5; i++) c.requestStarted(e); // full
  const second = q.hold('m');
  t.mock.timers.tick(5);
  assert.equal(q.held('m'), 1, 'waits for room on the endpoint');
  now = 2_100;
  t.mock.timers.tick(5);
  assert.equal(await second.outcome, 'ready', 'its wait is over and the model is ready: it goes on');
});
