// `llm-router probe` (the readiness sidecar, a process) against the simulator (in this process): /ready is 503 while
// the engine refuses connections, 503 while it loads, 200 once it lists the model, 503 when it lists another; /live;
// JSON reasons; --warmup.
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { freePort, startCli, stopAll, type Started } from '../support/process.js';
import { call, simStats } from '../support/router.js';
import { startSimHere, stopSimsHere } from '../support/sim-here.js';
import { eventually } from '../support/within.js';

interface ProbeBody {
  contract: string;
  ready: boolean;
  live: boolean;
  state: string;
  reason: string;
  models: string[];
}

async function startProbe(args: string[]): Promise<{ url: string; proc: Started }> {
  const proc = startCli(['probe', '--host', '127.0.0.1', '--port', '0', '--timeout', '1', ...args]);
  await proc.waitForOutput(/llm-router probe listening url=http:\/\/127\.0\.0\.1:\d+/);
  const url = (/url=(http:\/\/127\.0\.0\.1:\d+)/.exec(proc.output()) as RegExpExecArray)[1] as string;
  return { url, proc };
}

async function get(url: string): Promise<{ status: number; body: ProbeBody; contractHeader: unknown }> {
  const r = await call(url, { timeoutMs: 5_000 });
  return { status: r.status, body: r.json<ProbeBody>(), contractHeader: r.headers['x-llm-router-probe-contract'] };
}

/** Polls /ready until its state is `state`; returns that answer. */
function readyState(url: string, state: string): Promise<{ status: number; body: ProbeBody }> {
  return eventually(
    `the probe to say ${state}`,
    () => get(`${url}/ready`),
    (r) => r.body.state === state,
    10_000,
  );
}

describe('llm-router probe against the simulator', { timeout: 60_000 }, () => {
  after(async () => {
    await stopAll();
    await stopSimsHere();
  });

  test('503 while refusing, 503 while loading, 200 once the model is listed; /live follows the engine process', async () => {
    const port = await freePort();
    const probe = await startProbe(['--engine-url', `http://127.0.0.1:${port}`, '--model', 'llama-3-8b']);

    // the engine's port refuses connections: nothing listens there yet (the engine starts below)
    const refusing = await get(`${probe.url}/ready`);
    assert.equal(refusing.status, 503);
    assert.equal(refusing.contractHeader, 'llm-router-probe/v1');
    assert.deepEqual(
      { ...refusing.body, reason: undefined },
      { ...refusing.body, contract: 'llm-router-probe/v1', ready: false, live: false, state: 'unreachable', reason: undefined },
    );
    assert.match(refusing.body.reason, /ECONNREFUSED/);
    assert.equal((await get(`${probe.url}/live`)).status, 503);

    // it listens at once on that port, and loads its model 1.5 s
    const sim = await startSimHere(['--model', 'llama-3-8b', '--startup-loading-seconds', '1.5'], { port });
    const loading = await readyState(probe.url, 'loading');
    assert.equal(loading.status, 503);
    assert.equal(loading.body.live, true);
    assert.match(loading.body.reason, /\/v1\/models answered 503/);
    assert.equal((await get(`${probe.url}/live`)).status, 200, 'the engine answers while it loads');

    const ready = await readyState(probe.url, 'ready');
    assert.equal(ready.status, 200);
    assert.deepEqual(ready.body.models, ['llama-3-8b']);
    assert.match(ready.body.reason, /lists llama-3-8b/);

    // the engine goes away: not ready, not live
    await sim.stop();
    const gone = await readyState(probe.url, 'unreachable');
    assert.equal(gone.status, 503);
    await probe.proc.stop();
  });

  test('503 when the engine lists another model, with the listed models in the reason', async () => {
    const sim = await startSimHere(['--model', 'mistral-7b']);
    const probe = await startProbe(['--engine-url', sim.url, '--model', 'llama-3-8b']);
    const r = await get(`${probe.url}/ready`);
    assert.equal(r.status, 503);
    assert.equal(r.body.state, 'loading');
    assert.match(r.body.reason, /lists \[mistral-7b\], not llama-3-8b/);
    assert.equal((await get(`${probe.url}/live`)).status, 200);
    await Promise.all([sim.stop(), probe.proc.stop()]);
  });

  test('--warmup: 503 warming-up until one token was generated, then 200; the engine saw exactly one warm-up', async () => {
    // the warm-up token takes 1.5 s: the second check below must come while it is in progress, on a busy machine too
    const sim = await startSimHere(['--model', 'qwen3-8b', '--ttft-ms', '1500']);
    const probe = await startProbe(['--engine-url', sim.url, '--model', 'qwen3-8b', '--warmup']);
    const first = await get(`${probe.url}/ready`);
    assert.equal(first.status, 503);
    assert.equal(first.body.state, 'warming-up');
    assert.match(first.body.reason, /warm-up token requested/);
    const again = await get(`${probe.url}/ready`);
    assert.match(again.body.reason, /warm-up token in progress/);
    const ready = await readyState(probe.url, 'ready');
    assert.equal(ready.status, 200);
    const stats = await simStats(sim.url);
    assert.equal(stats.completed, 1);
    await Promise.all([sim.stop(), probe.proc.stop()]);
  });

  test('other engine kinds use the same rules as the router (TGI /health + /info); unknown paths 404, POST 405', async () => {
    const sim = await startSimHere(['--engine-kind', 'tgi', '--model', 'tiiuae/falcon-7b']);
    const probe = await startProbe(['--engine-url', sim.url, '--model', 'tiiuae/falcon-7b', '--engine-kind', 'tgi']);
    const r = await get(`${probe.url}/ready`);
    assert.equal(r.status, 200, r.body.reason);
    assert.match(r.body.reason, /\/info tiiuae\/falcon-7b/);
    assert.equal((await call(`${probe.url}/health`)).status, 404);
    assert.equal((await call(`${probe.url}/ready`, { method: 'POST', body: '{}' })).status, 405);
    await Promise.all([sim.stop(), probe.proc.stop()]);
  });

  test('usage errors exit 2: no --model, a bad --engine-url', async () => {
    // both at once: neither listens
    const noModel = startCli(['probe', '--port', '0']);
    const badUrl = startCli(['probe', '--port', '0', '--model', 'm', '--engine-url', 'localhost:8000']);
    const [noModelExit, badUrlExit] = await Promise.all([once(noModel.child, 'exit'), once(badUrl.child, 'exit')]);
    assert.equal(noModelExit[0], 2);
    assert.match(noModel.output(), /probe needs --model/);
    assert.equal(badUrlExit[0], 2);
    assert.match(badUrl.output(), /is not an http\(s\) URL/);
  });
});
