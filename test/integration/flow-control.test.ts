// Flow control end to end: two simulators of two batch slots each behind a router with --flow-control. A tenant that
// floods the engines (12 clients back to back) and one with 2 clients share the answers in turn, not in proportion to
// what they send; a sheddable request is refused at once while the pool is saturated; a request that waits too long
// gets 503 queue_timeout; what waits is demand (/demand) and in the metrics; bad priorities are 400s.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { allReady, call, FAST_PROBES, type Running, startRouter, startSim } from '../support/router.js';
import { stopAll } from '../support/process.js';
import { eventually } from '../support/within.js';

const MODEL = 'flow-model';
const FAIRNESS = 'x-gateway-inference-fairness-id';
const PRIORITY = 'x-llm-router-priority';

function ask(router: string, tenant: string, priority?: number, timeoutMs = 20_000) {
  return call(`${router}/v1/completions`, {
    body: JSON.stringify({ model: MODEL, prompt: 'hello there', max_tokens: 8 }),
    headers: { [FAIRNESS]: tenant, ...(priority !== undefined ? { [PRIORITY]: String(priority) } : {}) },
    timeoutMs,
  });
}

/** `clients` of `tenant` sending back to back until `until` (ms epoch); the statuses they got */
async function clients(router: string, tenant: string, clients: number, until: number): Promise<number[]> {
  const statuses: number[] = [];
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (Date.now() < until) statuses.push((await ask(router, tenant)).status);
    }),
  );
  return statuses;
}

describe('flow control: a saturated pool queues by priority and in turn between tenants', { timeout: 120_000 }, () => {
  let a: Running;
  let b: Running;
  let router: Running;

  before(async () => {
    // two slots each, about 0.3 s a request, a KV cache of two blocks (a request holds one): two running fill it, and
    // the engines count as full (GIE's 0.8); twelve clients keep both engines full and more waiting
    const sim = [
      '--model',
      MODEL,
      '--max-num-seqs',
      '2',
      '--num-gpu-blocks',
      '2',
      '--ttft-ms',
      '60',
      '--itl-ms',
      '30',
      '--output-tokens',
      '8',
    ];
    [a, b] = await Promise.all([startSim([...sim, '--id', 'A']), startSim([...sim, '--id', 'B'])]);
    router = await startRouter([
      ...FAST_PROBES,
      '--static-backends',
      `${a.url},${b.url}`,
      '--static-models',
      `${MODEL},${MODEL}`,
      '--flow-control',
      '--flow-queue-timeout',
      '20',
    ]);
    await allReady(router.url, 2);
  });
  after(stopAll);

  test('a flood and a small tenant share the answers in turn; sheddable refused at once; queued is demand; bad priority 400', async () => {
    const until = Date.now() + 5_000;
    const flood = clients(router.url, 'big', 12, until);
    const small = clients(router.url, 'small', 2, until);
    // while it floods: requests wait in the router (demand, metrics), a sheddable one is refused at once
    const demand = await eventually(
      'requests queued in the router',
      async () => (await call(`${router.url}/demand`)).json<{ models: Record<string, { queued?: number }> }>().models[MODEL],
      (m) => (m?.queued ?? 0) > 0,
      4_000,
    );
    assert.ok((demand?.queued ?? 0) > 0);
    const t0 = Date.now();
    const shed = await ask(router.url, 'batch', -1);
    assert.equal(shed.status, 429, shed.text);
    assert.equal(shed.json<{ error: { code: string } }>().error.code, 'overloaded');
    assert.ok(Number(shed.headers['retry-after']) >= 1);
    assert.ok(Date.now() - t0 < 2_000, 'refused at once, not after a wait');
    const metrics = (await call(`${router.url}/metrics`)).text;
    assert.match(metrics, new RegExp(`llm_router_flow_queued_requests\\{model="${MODEL}",priority="0"\\} [1-9]`));
    assert.match(metrics, new RegExp(`llm_router_flow_refusals_total\\{model="${MODEL}",reason="overloaded"\\} 1`));
    assert.match(metrics, /llm_router_flow_pool_saturation\{model="flow-model"\} /);

    const [big, few] = await Promise.all([flood, small]);
    assert.ok(big.every((s) => s === 200) && few.every((s) => s === 200), `${big.join(',')} | ${few.join(',')}`);
    // in proportion to what they send the small tenant would get 2 of 14; in turn it gets nearly as many as its two
    // clients can send while they wait half as long as the flood's
    const share = few.length / (few.length + big.length);
    assert.ok(share >= 0.25, `the small tenant's share ${share.toFixed(2)} (${few.length} of ${few.length + big.length})`);

    const bad = await ask(router.url, 'x', Number.NaN);
    assert.equal(bad.status, 400);
    assert.equal(bad.json<{ error: { code: string } }>().error.code, 'invalid_priority');
  });
});

describe('flow control: a request waits at most --flow-queue-timeout', { timeout: 60_000 }, () => {
  after(stopAll);

  test('a flood with a short time-out: some wait too long and get 503 queue_timeout with Retry-After; every one ends', async () => {
    const sim = await startSim([
      '--model',
      MODEL,
      '--max-num-seqs',
      '1',
      '--num-gpu-blocks',
      '1',
      '--ttft-ms',
      '200',
      '--itl-ms',
      '10',
      '--output-tokens',
      '4',
    ]);
    const router = await startRouter([
      ...FAST_PROBES,
      '--static-backends',
      sim.url,
      '--static-models',
      MODEL,
      '--flow-control',
      '--flow-queue-timeout',
      '0.5',
    ]);
    await allReady(router.url, 1);
    const answers = await Promise.all(Array.from({ length: 10 }, () => ask(router.url, 'big', undefined, 10_000)));
    const timedOut = answers.filter((r) => r.status === 503);
    assert.ok(
      answers.every((r) => r.status === 200 || r.status === 503),
      answers.map((r) => r.status).join(','),
    );
    assert.ok(timedOut.length >= 1 && answers.some((r) => r.status === 200), answers.map((r) => r.status).join(','));
    for (const r of timedOut) {
      assert.equal(r.json<{ error: { code: string } }>().error.code, 'queue_timeout');
      assert.ok(Number(r.headers['retry-after']) >= 1);
    }
  });
});
