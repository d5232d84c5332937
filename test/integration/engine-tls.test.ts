// Issue 14, item 5: engines behind TLS. The simulator serves https with a certificate this test makes (openssl, for
// 127.0.0.1), optionally asking for a client certificate; routers reach it for requests, probes and stats scrapes.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Agent, request } from 'undici';
import { startFakeKube } from '../support/fake-kube/index.js';
import { addReadyPod } from '../support/kube-objects.js';
import { stopAll } from '../support/process.js';
import { call, chat, engines, startRouter, startSim, waitModelStatus, type EngineView, type Running } from '../support/router.js';
import { eventually, until } from '../support/within.js';
import { requireTool } from '../support/tools.js';

const MODEL = 'tls-model';

/** A self-signed certificate and key for 127.0.0.1 (EC keys: made in milliseconds). */
function selfSigned(dir: string, name: string): { cert: string; key: string } {
  const cert = path.join(dir, `${name}.crt`);
  const key = path.join(dir, `${name}.key`);
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      key,
      '-out',
      cert,
      '-days',
      '2',
      '-subj',
      `/CN=${name}`,
      '-addext',
      'subjectAltName=IP:127.0.0.1,DNS:localhost',
    ],
    { stdio: 'ignore', timeout: 10_000 },
  );
  return { cert, key };
}

/** `llm-router sim` serving https (the URL it logs says so); resolves once it listens. */
function startTlsSim(args: readonly string[]): Promise<Running> {
  return startSim(['--model', MODEL, '--ttft-ms', '0', '--itl-ms', '1', '--output-tokens', '3', ...args]);
}

/** Polls /engines until the one endpoint's last probe says something; returns that view. */
async function probed(router: Running): Promise<EngineView & { lastProbe: { ok: boolean; detail: string } | null }> {
  type ProbedView = EngineView & { lastProbe: { ok: boolean; detail: string } | null };
  const view = await eventually(
    'a probe result',
    async () => (await call(`${router.url}/engines`)).json<{ endpoints: ProbedView[] }>().endpoints[0],
    (v) => Boolean(v?.lastProbe),
    10_000,
  );
  return view as ProbedView;
}

async function assertServes(router: Running, what: string): Promise<void> {
  const json = await call(`${router.url}/v1/chat/completions`, { body: chat(MODEL) });
  assert.equal(json.status, 200, `${what}: ${json.text}`);
  assert.equal(json.json<{ object: string }>().object, 'chat.completion', what);
  const stream = await call(`${router.url}/v1/chat/completions`, { body: chat(MODEL, { stream: true }) });
  assert.equal(stream.status, 200, `${what}: ${stream.text}`);
  assert.match(String(stream.headers['content-type']), /text\/event-stream/, what);
  assert.match(stream.text, /data: \[DONE\]\n\n$/, what);
}

async function assertNotReady(router: Running, why: RegExp, what: string): Promise<void> {
  const view = await probed(router);
  assert.notEqual(view.state, 'ready', what);
  assert.equal(view.lastProbe?.ok, false, what);
  assert.match(view.lastProbe?.detail ?? '', why, `${what}: /engines says why`);
  const answer = await call(`${router.url}/v1/chat/completions`, { body: chat(MODEL) });
  assert.equal(answer.status, 503, what);
  assert.equal(answer.json<{ error: { code: string } }>().error.code, 'model_unavailable', what);
}

describe('https engines', { timeout: 120_000, skip: requireTool('openssl') }, () => {
  let dir: string;
  let server: { cert: string; key: string };
  let client: { cert: string; key: string };
  let sim: Running;
  let mtlsSim: Running;
  /** the simulator's own view, over https with its certificate trusted */
  let trusting: Agent;

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'llm-router-tls-'));
    server = selfSigned(dir, '127.0.0.1');
    client = selfSigned(dir, 'router-client');
    sim = await startTlsSim(['--tls-cert', server.cert, '--tls-key', server.key]);
    mtlsSim = await startTlsSim(['--tls-cert', server.cert, '--tls-key', server.key, '--tls-client-ca', client.cert]);
    trusting = new Agent({ connect: { ca: readFileSync(server.cert, 'utf8') } });
  });
  after(async () => {
    await stopAll();
    await trusting?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  async function simCounts(): Promise<Record<string, number>> {
    const res = await request(`${sim.url}/_sim/stats`, { dispatcher: trusting, headersTimeout: 5_000, bodyTimeout: 5_000 });
    return ((await res.body.json()) as { byPath: Record<string, number> }).byPath;
  }

  test('a self-signed engine trusted through NODE_EXTRA_CA_CERTS: probes, JSON and streaming answers, stats scrapes (both engine clients)', async () => {
    for (const engineClient of ['h1', 'undici']) {
      const router = await startRouter(
        ['--static-backends', sim.url, '--static-models', MODEL, '--probe-interval', '0.2', '--engine-stats-interval', '0.2'],
        {
          NODE_EXTRA_CA_CERTS: server.cert,
          LLM_ROUTER_ENGINE_CLIENT: engineClient,
        },
      );
      await waitModelStatus(router.url, MODEL, 'ready');
      await assertServes(router, engineClient);
      // the stats scraper reaches /metrics over TLS too: the engine's load shows in /engines
      await until(
        `${engineClient}: engine load scraped over https`,
        async () => ((await call(`${router.url}/engines`)).json<{ endpoints: { load: unknown }[] }>().endpoints[0]?.load ?? null) !== null,
        10_000,
      );
      await router.stop();
    }
    const counts = await simCounts();
    assert.ok(
      (counts['/v1/models'] ?? 0) > 0 && (counts['/metrics'] ?? 0) > 0 && (counts['/v1/chat/completions'] ?? 0) >= 4,
      JSON.stringify(counts),
    );
  });

  test('without the CA the endpoint is not ready, and /engines says it is the certificate', async () => {
    const router = await startRouter(['--static-backends', sim.url, '--static-models', MODEL, '--probe-interval', '0.2']);
    await assertNotReady(router, /certificate|CERT/i, 'untrusted');
    await router.stop();
  });

  test('--engine-ca-file trusts a private CA; --engine-tls-insecure trusts anything and warns at startup', async () => {
    const withCa = await startRouter([
      '--static-backends',
      sim.url,
      '--static-models',
      MODEL,
      '--probe-interval',
      '0.2',
      '--engine-ca-file',
      server.cert,
    ]);
    await waitModelStatus(withCa.url, MODEL, 'ready');
    await assertServes(withCa, '--engine-ca-file');
    await withCa.stop();

    const insecure = await startRouter([
      '--static-backends',
      sim.url,
      '--static-models',
      MODEL,
      '--probe-interval',
      '0.2',
      '--engine-tls-insecure',
    ]);
    const warning = insecure.proc
      .output()
      .split('\n')
      .find((l) => l.includes('--engine-tls-insecure'));
    assert.ok(warning, 'a startup line names the flag');
    assert.equal((JSON.parse(warning) as { level: number }).level, 40, 'at warn level');
    await waitModelStatus(insecure.url, MODEL, 'ready');
    await assertServes(insecure, '--engine-tls-insecure');
    await insecure.stop();
  });

  test('mTLS: an engine that asks for a client certificate gets --engine-client-cert; without it the endpoint is not ready', async () => {
    const withCert = await startRouter([
      '--static-backends',
      mtlsSim.url,
      '--static-models',
      MODEL,
      '--probe-interval',
      '0.2',
      '--engine-ca-file',
      server.cert,
      '--engine-client-cert',
      client.cert,
      '--engine-client-key',
      client.key,
    ]);
    await waitModelStatus(withCert.url, MODEL, 'ready');
    await assertServes(withCert, 'mTLS');
    await withCert.stop();

    const without = await startRouter([
      '--static-backends',
      mtlsSim.url,
      '--static-models',
      MODEL,
      '--probe-interval',
      '0.2',
      '--engine-ca-file',
      server.cert,
    ]);
    await assertNotReady(without, /certificate|ECONNRESET|socket|alert|handshake|UND_ERR/i, 'no client certificate');
    await without.stop();
  });

  test('discovered pods: --k8s-engine-scheme https, and the llm-router/scheme annotation for one pod that speaks http', async () => {
    const kube = await startFakeKube();
    try {
      const plain = await startSim(['--model', 'plain-model', '--ttft-ms', '0', '--itl-ms', '1', '--output-tokens', '3']);
      addReadyPod(kube, 'tls-pod', MODEL, sim.port);
      addReadyPod(kube, 'plain-pod', 'plain-model', plain.port, { annotations: { 'llm-router/scheme': 'http' } });
      const router = await startRouter(
        ['--service-discovery', 'k8s', '--k8s-label-selector', 'app=llm', '--k8s-engine-scheme', 'https', '--probe-interval', '0.2'],
        { KUBECONFIG: kube.kubeconfigPath, NODE_EXTRA_CA_CERTS: server.cert },
      );
      await waitModelStatus(router.url, MODEL, 'ready');
      await waitModelStatus(router.url, 'plain-model', 'ready');
      const urls = (await engines(router.url)).map((e) => e.url).sort();
      assert.deepEqual(urls, [`http://127.0.0.1:${plain.port}`, sim.url].sort());
      await assertServes(router, 'discovered https pod');
      assert.equal((await call(`${router.url}/v1/chat/completions`, { body: chat('plain-model') })).status, 200);
      await router.stop();
      await plain.stop();
    } finally {
      await kube.close();
    }
  });
});
