// Live configuration against real router processes, over simulators in this process (issue 32): a router started
// with --config FILE routes a backend and its model added to the file within 15 s, answers 503 scaled-to-zero for a
// known model added, finishes a stream begun on a backend the edit removes, and keeps its last good configuration on
// an invalid edit (a WARN naming the file); a second replica on the same file answers the same. Under --workers 2, with
// vllm_router's --dynamic-config-json in a directory laid out as a Kubernetes ConfigMap volume (its ..data symlink
// swapped), the primary reads each version once and both workers apply it.
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { request } from 'undici';
import { stopAll } from '../support/process.js';
import { call, chat, FAST_PROBES, metric, startRouter, waitModelStatus } from '../support/router.js';
import { startSimHere, stopSimsHere } from '../support/sim-here.js';
import { eventually, until } from '../support/within.js';

const scratch = mkdtempSync(path.join(tmpdir(), 'live-config-'));
after(() => rmSync(scratch, { recursive: true, force: true }));

/** writes the file anew and renames it over the old one, as editors and `kubectl cp` do */
function replace(file: string, text: string): void {
  writeFileSync(`${file}.new`, text);
  renameSync(`${file}.new`, file);
}

/** The text a chat stream carried: its chunks' content, in order. */
function streamedText(sse: string): string {
  return [...sse.matchAll(/^data: (\{.*\})$/gm)]
    .map((m) => (JSON.parse(m[1] as string) as { choices?: { delta?: { content?: string } }[] }).choices?.[0]?.delta?.content ?? '')
    .join('');
}

const status = async (url: string, model: string): Promise<number> =>
  (await call(`${url}/v1/chat/completions`, { body: chat(model) })).status;

/** Waits (15 s at most) until the router routes `model`: 200. */
async function routes(url: string, model: string): Promise<void> {
  await eventually(
    `${url} routes ${model}`,
    () => status(url, model),
    (s) => s === 200,
    15_000,
    100,
  );
}

async function scaledToZero(url: string, model: string): Promise<void> {
  const answer = await call(`${url}/v1/chat/completions`, { body: chat(model) });
  assert.equal(answer.status, 503);
  assert.equal(answer.headers['x-llm-router-model-state'], 'scaled-to-zero');
}

describe('live configuration', { timeout: 120_000 }, () => {
  after(async () => {
    await stopAll();
    await stopSimsHere();
  });

  test('--config FILE: a backend added routes within 15 s, a known model added is 503 scaled-to-zero, a stream on a removed backend finishes intact, an invalid edit keeps the last good version; a second replica answers the same', async (t) => {
    // the stream's engine: 40 tokens 100 ms apart, so it runs well past the edit
    const [old, fresh] = await Promise.all([
      startSimHere(['--model', 'old', '--id', 'old', '--ttft-ms', '10', '--itl-ms', '100', '--output-tokens', '40']),
      startSimHere(['--model', 'fresh', '--id', 'fresh']),
    ]);
    const file = path.join(scratch, 'router.yaml');
    writeFileSync(file, `static-backends: [${old.url}]\nstatic-models: [old]\n`);
    const args = ['--config', file, '--config-reload-interval', '0.5', ...FAST_PROBES];
    const [router, replica] = await Promise.all([startRouter(args), startRouter(args)]);
    await waitModelStatus(router.url, 'old', 'ready');
    for (const r of [router, replica]) {
      assert.equal(await status(r.url, 'fresh'), 404);
      assert.equal(await status(r.url, 'zero'), 404);
    }

    const body = chat('old', { stream: true, max_tokens: 40 });
    // the same stream straight from the engine, for its tokens: beside the routed one (each takes 4 s)
    const direct = call(`${old.url}/v1/chat/completions`, { body });
    const stream = await request(`${router.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
    });
    assert.equal(stream.statusCode, 200);
    let sse = '';
    let ended = false;
    const read = (async () => {
      for await (const chunk of stream.body) sse += String(chunk);
      ended = true;
    })();
    await until('the stream has begun', () => sse.includes('data: '), 10_000);

    const edited = Date.now();
    replace(file, `static-backends: [${fresh.url}]\nstatic-models: [fresh]\nknown-models: [zero]\n`);
    await routes(router.url, 'fresh');
    const took = Date.now() - edited;
    t.diagnostic(`the added backend routed ${took} ms after the edit`);
    assert.ok(took < 15_000);
    await scaledToZero(router.url, 'zero');
    assert.equal(await status(router.url, 'old'), 404, 'the removed model is no longer declared');
    assert.ok(!ended, 'the stream was still running when its backend left the configuration');
    await read;
    assert.match(sse, /data: \[DONE\]\n\n$/);
    assert.equal(streamedText(sse), streamedText((await direct).text), 'every token of the stream arrived');

    // the replica on the same file answers the same
    await routes(replica.url, 'fresh');
    await scaledToZero(replica.url, 'zero');
    assert.equal(await status(replica.url, 'old'), 404);

    // an invalid edit: refused whole, said in a WARN naming the file, the last good version stays
    writeFileSync(file, `static-backends: [${fresh.url}\nstatic-models: []\n`);
    await until(
      'a WARN names the file and the error',
      () =>
        new RegExp(`"level":40[^\\n]*"msg":"--config ${file}: new version refused, the last good one stays: not valid YAML`).test(
          router.proc.output(),
        ),
      15_000,
    );
    assert.equal(await status(router.url, 'fresh'), 200);
    await scaledToZero(router.url, 'zero');
    assert.equal(await metric(router.url, 'llm_router_config_reloads_total', { result: 'applied' }), 1);
    assert.equal(await metric(router.url, 'llm_router_config_reloads_total', { result: 'invalid' }), 1);
    assert.equal(await metric(router.url, 'llm_router_config_last_reload_successful'), 0);
    // a setting that cannot change live is said once, and changes nothing
    replace(file, `static-backends: [${fresh.url}]\nstatic-models: [fresh]\nknown-models: [zero]\nmax-body-bytes: 1024\n`);
    await router.proc.waitForOutput(/changes max-body-bytes to \\"1024\\": it takes a restart/, 15_000);
    assert.equal(await metric(router.url, 'llm_router_config_last_reload_successful'), 1);
    assert.equal(await status(router.url, 'fresh'), 200);
  });

  test("--workers 2, vllm_router's --dynamic-config-json in a ConfigMap volume: the primary reads each version once, both workers apply it, a worker restarted runs it", async () => {
    const [a, b] = await Promise.all([startSimHere(['--model', 'a']), startSimHere(['--model', 'b'])]);
    // the kubelet's layout: config.json -> ..data/config.json, ..data -> ..<timestamp>; an update swaps ..data
    const dir = path.join(scratch, 'configmap');
    mkdirSync(dir);
    const version = (name: string, doc: Record<string, unknown>): void => {
      mkdirSync(path.join(dir, name));
      writeFileSync(path.join(dir, name, 'config.json'), JSON.stringify(doc));
    };
    const doc = { service_discovery: 'static', routing_logic: 'roundrobin', static_backends: a.url, static_models: 'a' };
    version('..v1', doc);
    symlinkSync('..v1', path.join(dir, '..data'));
    symlinkSync('..data/config.json', path.join(dir, 'config.json'));
    const router = await startRouter([
      '--workers',
      '2',
      '--dynamic-config-json',
      path.join(dir, 'config.json'),
      '--config-reload-interval',
      '0.5',
      ...FAST_PROBES,
    ]);
    await router.proc.waitForOutput(/llm-router listening[\s\S]*llm-router listening/, 20_000);
    const listening = Date.now();

    const swap = (name: string): void => {
      symlinkSync(name, path.join(dir, '..data_tmp'));
      renameSync(path.join(dir, '..data_tmp'), path.join(dir, '..data'));
    };
    version('..v2', { ...doc, static_backends: `${a.url},${b.url}`, static_models: 'a,b' });
    swap('..v2');
    const appliedBy = (): Set<number> =>
      new Set([...router.proc.output().matchAll(/"worker":(\d+)[^\n]*"msg":"configuration applied/g)].map((m) => Number(m[1])));
    await until('both workers applied the new version', () => appliedBy().size === 2, 15_000);
    // each worker's prober finds the new engine ready; then every request, whichever worker takes it, routes
    const allRoute = async (): Promise<void> => {
      let inARow = 0;
      await until(
        'six requests in a row for the added model answer 200',
        async () => {
          inARow =
            (await call(`${router.url}/v1/chat/completions`, { body: chat('b'), newConnection: true })).status === 200 ? inARow + 1 : 0;
          return inARow >= 6;
        },
        15_000,
      );
      for (let i = 0; i < 10; i++)
        assert.equal((await call(`${router.url}/v1/chat/completions`, { body: chat('b'), newConnection: true })).status, 200);
    };
    await allRoute();

    // an invalid version, then a worker dies: the one started in its place runs the version in force, not the file
    version('..v3', { ...doc, static_backends: a.url, static_models: 'a', callbacks: 'module.handler' });
    swap('..v3');
    await router.proc.waitForOutput(/new version refused, the last good one stays: --callbacks is not supported/, 15_000);
    const pid = Number(/"pid":(\d+)[^\n]*"msg":"llm-router listening"/.exec(router.proc.output())?.[1]);
    // the primary restarts a worker that lived 5 s at least
    await new Promise((r) => setTimeout(r, Math.max(0, listening + 5_500 - Date.now())));
    process.kill(pid, 'SIGKILL');
    await router.proc.waitForOutput(/(llm-router listening[\s\S]*){3}/, 20_000);
    await allRoute();
    const primaryApplied = [...router.proc.output().matchAll(/"msg":"--dynamic-config-json [^"]*: new version applied/g)];
    assert.equal(primaryApplied.length, 1, 'the primary read and applied the version once');
    assert.equal(await metric(router.url, 'llm_router_config_reloads_total', { result: 'applied' }), 1, 'counted once for the instance');
  });
});
