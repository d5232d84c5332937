// bench/kv-model.ts: the offline replay runs the real policies over the simulator's cache; its combined-cache figure
// is bench/kv-trace.ts's, and kvaware beats round robin on a generated trace.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runModel, type ModelOptions } from '../../bench/kv-model.js';
import { cacheFigures, generateTrace, lruHitRate } from '../../bench/kv-trace.js';

const rows = generateTrace({ requests: 200, seed: 7 });
const scale = { blockTokens: 32, kvBlockSize: 16 };
const base: ModelOptions = {
  rows,
  scale,
  cacheShare: 0.1,
  rate: 30,
  concurrency: 32,
  replicas: 1,
  policy: 'roundrobin',
  events: 'start',
  eventLagMs: 2,
  ttftMs: 5,
  prefillMsPerToken: 0.25,
  itlMs: 1,
  maxNumSeqs: 16,
  statsIntervalMs: 1000,
  kv: {},
};

test('kv-model: every request served; the combined cache as bench/kv-trace.ts computes it; kvaware above round robin', async () => {
  const rr = await runModel(base);
  const kv = await runModel({ ...base, policy: 'kvaware', replicas: 2 });
  for (const r of [rr, kv])
    assert.equal(
      r.perEngine.reduce((a, b) => a + b, 0),
      rows.length,
    );
  const capacity = Math.max(1, Math.round(cacheFigures(rows, scale).distinctBlocks * 0.1)) * 4;
  assert.ok(Math.abs(rr.combinedHitRate - lruHitRate(rows, scale, capacity)) < 1e-12);
  assert.ok(kv.hitRate > rr.hitRate, `kvaware ${kv.hitRate} vs round robin ${rr.hitRate}`);
  // every kvaware decision is attributed to a reason
  const decided = Object.values(kv.byReason).reduce((n, x) => n + x.requests, 0);
  assert.equal(decided, rows.length);
});
