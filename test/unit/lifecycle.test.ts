import { test } from 'node:test';
import assert from 'node:assert/strict';
import { afterProbe, nextProbeDelay, type ProbeCounters } from '../../src/router/health/lifecycle.js';
import type { ProbeResult } from '../../src/router/health/rules.js';
import type { EndpointState } from '../../src/router/core/endpoint.js';

const cfg = {
  intervalMs: 1000,
  wakeIntervalMs: 100,
  readyIntervalMs: 5000,
  timeoutMs: 500,
  failureThreshold: 3,
  successThreshold: 1,
  startupTimeoutMs: 60_000,
  warmup: false,
};
const ready: ProbeResult = { verdict: 'ready', refused: false, detail: 'ok' };
const loading: ProbeResult = { verdict: 'serving-api', refused: false, detail: '/v1/models answered 503' };
const refused: ProbeResult = { verdict: 'unreachable', refused: true, detail: 'ECONNREFUSED' };
const timeout: ProbeResult = { verdict: 'unreachable', refused: false, detail: 'timeout' };

function run(results: ProbeResult[], start: { state: EndpointState; everReady: boolean }, now = 1000): EndpointState[] {
  const c: ProbeCounters = { successes: 0, failures: 0, backoff: 0 };
  let state = start.state;
  let everReady = start.everReady;
  return results.map((r) => {
    state = afterProbe({ state, everReady, discoveredAt: 0, draining: false }, c, r, cfg, now).state;
    if (state === 'ready') everReady = true;
    return state;
  });
}

test('a starting engine goes discovered -> serving-api -> ready and is never failed while it refuses or loads', () => {
  assert.deepEqual(run([refused, refused, loading, loading, refused, loading, ready], { state: 'discovered', everReady: false }), [
    'discovered',
    'discovered',
    'serving-api',
    'serving-api',
    'serving-api',
    'serving-api',
    'ready',
  ]);
});

test('past the startup budget a never-ready engine is failed', () => {
  assert.deepEqual(run([loading], { state: 'serving-api', everReady: false }, 61_000), ['failed']);
});

test('a ready engine that refuses is failed at once; timeouts need the threshold', () => {
  assert.deepEqual(run([refused], { state: 'ready', everReady: true }), ['failed']);
  assert.deepEqual(run([timeout, timeout, timeout], { state: 'ready', everReady: true }), ['ready', 'ready', 'failed']);
  assert.deepEqual(run([timeout, ready, timeout, timeout], { state: 'ready', everReady: true }), ['ready', 'ready', 'ready', 'ready']);
});

test('a ready engine that unloads its model is loading again after the threshold; a failed one coming back loads then is ready', () => {
  assert.deepEqual(run([loading, loading, loading], { state: 'ready', everReady: true }), ['ready', 'ready', 'serving-api']);
  assert.deepEqual(run([refused, loading, ready], { state: 'failed', everReady: true }), ['failed', 'serving-api', 'ready']);
});

test('probe delay: fast while coming up, slow when ready, backing off up to 30 s while failed', () => {
  const c: ProbeCounters = { successes: 0, failures: 0, backoff: 0 };
  assert.equal(nextProbeDelay('discovered', c, cfg), 1000);
  assert.equal(nextProbeDelay('serving-api', c, cfg), 1000);
  assert.equal(nextProbeDelay('ready', c, cfg), 5000);
  assert.deepEqual(
    [1, 2, 3, 4, 9].map((b) => nextProbeDelay('failed', { ...c, backoff: b }, cfg)),
    [1000, 2000, 4000, 8000, 30000],
  );
});

test('probe delay while requests are held for the model: the wake interval for coming-up and failed endpoints, never for ready ones', () => {
  const c: ProbeCounters = { successes: 0, failures: 0, backoff: 0 };
  assert.equal(nextProbeDelay('discovered', c, cfg, true), 100);
  assert.equal(nextProbeDelay('serving-api', c, cfg, true), 100);
  assert.equal(nextProbeDelay('failed', { ...c, backoff: 9 }, cfg, true), 100, 'no backoff while someone waits');
  assert.equal(nextProbeDelay('ready', c, cfg, true), 5000);
});

test('a name mismatch is no load: an engine that serves other models is failed at its first such answer, and ready once it serves the model', () => {
  const renamed: ProbeResult = {
    verdict: 'serving-api',
    refused: false,
    detail: '/v1/models lists [Qwen/Qwen3-8B], not qwen3-8b',
    mismatch: { serves: ['Qwen/Qwen3-8B'], missing: ['qwen3-8b'] },
  };
  assert.deepEqual(run([renamed], { state: 'discovered', everReady: false }), ['failed'], 'within the start-up budget too');
  assert.deepEqual(run([renamed, renamed, ready], { state: 'ready', everReady: true }), ['failed', 'failed', 'ready']);
  assert.deepEqual(run([loading, renamed], { state: 'discovered', everReady: false }), ['serving-api', 'failed']);
});
