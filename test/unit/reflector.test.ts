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

test('failures of several kinds are logged once per backoff step, naming every kind that failed meanwhile', async () => {
  const { FailureLog } = await import('../../src/router/discovery/kubernetes/reflector.js');
  const lines: { resources: string[]; retryInMs: number }[] = [];
  const log = {
    warn: (o: { resources: string[]; retryInMs: number }) => lines.push(o),
  } as unknown as import('../../src/router/util/log.js').Logger;
  let now = 0;
  const failures = new FailureLog(log, () => now);
  for (const kind of ['pods', 'deployments', 'statefulsets', 'leaderworkersets']) failures.report(kind, 'ECONNREFUSED', 500);
  assert.deepEqual(
    lines.map((l) => l.resources),
    [['pods']],
    'the first failure is logged at once; the other kinds wait for the next step',
  );
  now = 400;
  for (const kind of ['pods', 'deployments']) failures.report(kind, 'ECONNREFUSED', 1_000);
  assert.equal(lines.length, 1, 'nothing within the step');
  now = 600;
  failures.report('pods', 'ECONNREFUSED', 2_000);
  assert.deepEqual(lines[1], {
    resources: ['deployments', 'leaderworkersets', 'pods', 'statefulsets'],
    retryInMs: 2_000,
    error: 'ECONNREFUSED',
  });
});
