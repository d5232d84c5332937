// Issue 25's smaller items: a body announced over --max-body-bytes with Expect: 100-continue is refused (413) before
// any 100 Continue, on the fast path's port and with node:http alone; no metric name with a doubled prefix; an
// adapter's requests counted under its own demand series and /demand entry (and its base's); `npx llm-router` on a
// fresh checkout works after `npm ci` (the prepare script builds).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { stopAll } from '../support/process.js';
import { firstHead } from '../support/raw-http.js';
import { call, chat, FAST_PROBES, metric, startRouter, startSim } from '../support/router.js';
import { eventually } from '../support/within.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

const expectHead = (length: number): string =>
  `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${length}\r\nexpect: 100-continue\r\n\r\n`;

describe('issue 25: 100-continue, metric names, adapter demand, npx', { timeout: 60_000 }, () => {
  after(stopAll);

  for (const fastPath of [true, false]) {
    test(`Expect: 100-continue over --max-body-bytes: 413 at once, no 100 Continue (${fastPath ? 'fast path on' : 'node:http only'})`, async () => {
      const router = await startRouter(['--known-models', 'm', '--max-body-bytes', '1000', ...(fastPath ? [] : ['--no-fast-path'])]);
      const refused = await firstHead(router.port, expectHead(1001));
      assert.match(refused, /^HTTP\/1\.1 413 /, refused);
      assert.match(refused, /connection: close/i);
      // within the limit the client is still told to go on
      assert.match(await firstHead(router.port, expectHead(1000)), /^HTTP\/1\.1 100 Continue/);
      await router.stop();
    });
  }

  test('no metric name with a doubled prefix: llm_router_process_cpu_user_seconds_total', async () => {
    const router = await startRouter(['--known-models', 'm']);
    const exposition = (await call(`${router.url}/metrics`)).text;
    assert.doesNotMatch(exposition, /^llm_router_process_process_/m);
    assert.match(exposition, /^llm_router_process_cpu_user_seconds_total \d/m);
    assert.match(exposition, /^llm_router_nodejs_heap_size_used_bytes \d/m);
    const dashboard = readFileSync(path.join(ROOT, 'deploy', 'grafana', 'llm-router.json'), 'utf8');
    for (const name of dashboard.match(/llm_router_(process|nodejs)_[a-z_]+/g) ?? [])
      assert.match(exposition, new RegExp(`^# TYPE ${name} `, 'm'), `the dashboard's ${name} exists`);
    await router.stop();
  });

  test("an adapter's requests: its own demand series and /demand entry, and its base's as before", async () => {
    const sim = await startSim(['--model', 'base', '--enable-lora', '--max-loras', '2', '--lora-load-delay-ms', '10']);
    const router = await startRouter([
      '--static-backends',
      sim.url,
      '--static-models',
      'base',
      '--lora-adapters',
      'ad@base=/adapters/ad',
      ...FAST_PROBES,
    ]);
    await eventually(
      'base ready',
      async () => (await call(`${router.url}/v1/chat/completions`, { body: chat('base') })).status,
      (s) => s === 200,
    );
    for (let i = 0; i < 2; i++) assert.equal((await call(`${router.url}/v1/chat/completions`, { body: chat('ad') })).status, 200);
    assert.equal(await metric(router.url, 'llm_router_model_demand_total', { model: 'ad' }), 2);
    assert.ok((await metric(router.url, 'llm_router_model_demand_total', { model: 'base' })) >= 3, 'the base counts them too');
    const demand = (await call(`${router.url}/demand`)).json<{ models: Record<string, { arrivals: number; held: number }> }>();
    assert.equal(demand.models.ad?.arrivals, 2);
    assert.ok((demand.models.base?.arrivals ?? 0) >= 3);
    await router.stop();
    await sim.stop();
  });

  test('npm ci builds (prepare), so `npx llm-router` works on a fresh checkout', () => {
    const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    assert.equal(pkg.scripts.prepare, 'npm run --silent build');
  });
});
