// The KEDA scaler's sum across replicas and workers under the things that happen in a cluster: a worker restarted by
// the primary (counters must not go backwards, or Prometheus reads a reset and rate() asks for maxReplicas), API keys
// from a file only, a rollout (a replica stopping cleanly), one replica reached by two URLs, and this replica's own URL
// in the peer list.
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { GRPC, grpcCode, grpcCredentials, kedaClient } from '../support/keda.js';
import { promtoolCheckMetrics, startPrometheus } from '../support/prometheus.js';
import { freePort, stopAll } from '../support/process.js';
import { call, chat, kedaPort, startRouter, type Running } from '../support/router.js';
import { until, within } from '../support/within.js';
import { requireTool, withTool } from '../support/tools.js';
import { testCa } from '../support/certs.js';

interface Demand {
  instance: string;
  workers: number;
  stopping?: boolean;
  models: Record<string, { held: number; inFlight: number; arrivals: number }>;
}

/**
 * A GET on a new connection each time (one kept alive to a worker that was killed would fail), tried again when the
 * connection is reset: the primary may hand a connection to the worker being killed (Prometheus would see a failed
 * scrape, which is no sample at all, not a low one).
 */
async function get(url: string, headers: Record<string, string> = {}) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await call(url, { headers, newConnection: true });
    } catch (err) {
      if (attempt >= 5) throw err;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}
const demand = async (r: Running, headers: Record<string, string> = {}): Promise<Demand> =>
  (await get(`${r.adminUrl}/demand`, headers)).json<Demand>();
const scrape = async (r: Running): Promise<string> => (await get(`${r.adminUrl}/metrics`)).text;
/** the primary does not replace a worker that dies within 5 s of its start (it would only crash again) */
const pastWorkerInfancy = (startedAt: number): Promise<void> =>
  new Promise((r) => setTimeout(r, Math.max(0, startedAt + 6_000 - Date.now())));
const ref = (model: string) => ({ name: model, namespace: 'default', scalerMetadata: { model } });
const hold = (r: Running, model: string, headers: Record<string, string> = {}) =>
  call(`${r.url}/v1/chat/completions`, { body: chat(model), timeoutMs: 60_000, headers, newConnection: true }).catch((err: Error) => err);

/** Every counter sample of an exposition (the families typed counter or histogram), by series. */
function counterSamples(exposition: string): Map<string, number> {
  const counters = new Set([...exposition.matchAll(/^# TYPE (\S+) (counter|histogram)$/gm)].map((m) => m[1] as string));
  const out = new Map<string, number>();
  for (const line of exposition.split('\n')) {
    const m = /^([a-zA-Z_:][\w:]*)(\{[^}]*\})? (\S+)$/.exec(line);
    if (!m) continue;
    const name = m[1] as string;
    const family = counters.has(name) ? name : name.replace(/_(bucket|sum|count)$/, '');
    if (!counters.has(family)) continue;
    out.set(`${name}${m[2] ?? ''}`, Number(m[3]));
  }
  return out;
}

/** A TCP relay on a port of its own to `target` (host:port): a second URL to the same router. */
async function relay(target: number): Promise<{ url: string; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(target, '127.0.0.1');
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => undefined);
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

describe('the scaler across worker restarts, API key files, rollouts and URLs', { timeout: 120_000 }, () => {
  after(() => stopAll());

  test('--workers 2, one worker SIGKILLed and replaced: no counter on /metrics or /demand goes backwards; its held requests stop counting', async (t) => {
    const router = await startRouter([
      '--workers',
      '2',
      '--known-models',
      'w,held',
      '--cold-start-wait-per-model',
      'held=60',
      '--admin-port',
      '0',
      '--keda-scaler-port',
      '0',
      // a peer that is never there: the peer series show in the exposition (checked by promtool)
      '--scaler-peers',
      `http://127.0.0.1:${await freePort()}`,
    ]);
    await until('two workers listening', () => router.proc.output().split('llm-router listening').length - 1 === 2);
    const startedAt = Date.now();
    const pids = [...router.proc.output().matchAll(/"pid":(\d+)[^\n]*"msg":"llm-router listening"/g)].map((m) => Number(m[1]));
    assert.equal(pids.length, 2, router.proc.output());
    for (let i = 0; i < 41; i++) {
      const r = await call(`${router.url}/v1/chat/completions`, { body: chat('w'), newConnection: true });
      assert.equal(r.status, 503);
    }
    // held requests on both workers (new connections spread over them)
    const held = [1, 2, 3, 4, 5, 6].map(() => hold(router, 'held'));
    await until('6 held', async () => (await demand(router)).models.held?.held === 6);
    const keda = kedaClient(`127.0.0.1:${await kedaPort(router)}`);
    try {
      await until('the scaler sees them', async () => (await keda.metric(ref('held'))) === 6);
      let before = counterSamples(await scrape(router));
      assert.equal(before.get('llm_router_model_demand_total{model="w"}'), 41);
      let arrivals = (await demand(router)).models.w?.arrivals ?? 0;
      assert.equal(arrivals, 41);

      await pastWorkerInfancy(startedAt);
      process.kill(pids[0] as number, 'SIGKILL');
      const check = async (what: string): Promise<void> => {
        const now = counterSamples(await scrape(router));
        for (const [series, value] of before) {
          const v = now.get(series);
          assert.ok(v !== undefined && v >= value, `${what}: ${series} went from ${value} to ${v}`);
        }
        before = now;
        const d = await demand(router);
        assert.ok((d.models.w?.arrivals ?? 0) >= arrivals, `${what}: /demand arrivals went from ${arrivals} to ${d.models.w?.arrivals}`);
        arrivals = d.models.w?.arrivals ?? 0;
      };
      // the scrapes right after the kill, then until the replacement listens, then a few more
      for (let i = 0; i < 5; i++) await check(`scrape ${i} after the kill`);
      await until('the replacement worker listening', () => router.proc.output().split('llm-router listening').length - 1 === 3, 20_000);
      for (let i = 0; i < 5; i++) await check(`scrape ${i} after the replacement started`);
      assert.equal(before.get('llm_router_model_demand_total{model="w"}'), 41, 'the dead worker’s demand still counts');
      assert.equal((await demand(router)).models.w?.arrivals, 41);

      // the killed worker's held requests lost their connection; only the survivor's still count, nowhere phantom
      const lost = (await Promise.all(held.map((h) => Promise.race([h, new Promise((r) => setTimeout(() => r('pending'), 200))])))).filter(
        (r) => r instanceof Error,
      ).length;
      assert.ok(lost >= 1 && lost <= 5, `the killed worker held some of the 6, not all: ${lost}`);
      t.diagnostic(`the killed worker held ${lost} of the 6 held requests; ${6 - lost} still count`);
      await until('held: the survivor’s alone', async () => (await demand(router)).models.held?.held === 6 - lost);
      assert.match(await scrape(router), new RegExp(`^llm_router_model_requests_held\\{model="held"\\} ${6 - lost}$`, 'm'));
      await until('the scaler says so too', async () => (await keda.metric(ref('held')).catch(() => -1)) === 6 - lost);

      const exposition = await scrape(router);
      assert.match(exposition, /^llm_router_scaler_peer_up\{peer="http:\/\/127\.0\.0\.1:\d+"\} 0$/m);
      assert.match(exposition, /^# TYPE llm_router_ipc_gather_missed_total counter$/m);
      assert.match(exposition, /^# TYPE llm_router_keda_scaler_errors_total counter$/m);
      await withTool(t, 'promtool', 'promtool check metrics finds nothing', async () => {
        assert.deepEqual(await promtoolCheckMetrics(exposition), { code: 0, output: '' });
      });
    } finally {
      keda.close();
    }
    await router.stop();
    await Promise.all(held);
  });

  test('a real Prometheus scraping across a worker kill sees no counter reset: the trigger’s rate stays bounded', {
    skip: requireTool('prometheus'),
  }, async (t) => {
    // the admin port named in advance: Prometheus starts beside the router, not after it
    const admin = await freePort();
    const [router, prom] = await Promise.all([
      startRouter(['--workers', '2', '--known-models', 'w', '--admin-port', String(admin)]),
      startPrometheus([`127.0.0.1:${admin}`], 1),
    ]);
    await until('two workers listening', () => router.proc.output().split('llm-router listening').length - 1 === 2);
    const startedAt = Date.now();
    const pids = [...router.proc.output().matchAll(/"pid":(\d+)[^\n]*"msg":"llm-router listening"/g)].map((m) => Number(m[1]));
    const value = async (expr: string): Promise<number | undefined> => {
      const r = await prom.query(expr);
      assert.equal(r.status, 'success', `${expr}: ${r.error}`);
      return r.samples[0]?.value;
    };
    try {
      await until('Prometheus has the series', async () => (await value('llm_router_model_demand_total{model="w"}')) === 0, 30_000, 200);
      for (let i = 0; i < 41; i++) await call(`${router.url}/v1/chat/completions`, { body: chat('w'), newConnection: true });
      await until('Prometheus has the 41', async () => (await value('llm_router_model_demand_total{model="w"}')) === 41, 15_000, 200);
      await pastWorkerInfancy(startedAt);
      process.kill(pids[0] as number, 'SIGKILL');
      await until('the replacement worker listening', () => router.proc.output().split('llm-router listening').length - 1 === 3, 20_000);
      // several scrapes after the kill and the restart
      const scrapes = async (): Promise<number> => (await value('count_over_time(llm_router_model_demand_total{model="w"}[5m])')) ?? 0;
      const seen = await scrapes();
      await until('five more scrapes', async () => (await scrapes()) >= seen + 5, 20_000, 250);
      assert.equal(await value('resets(llm_router_model_demand_total{model="w"}[5m])'), 0, 'no counter reset');
      assert.equal(await value('min_over_time(llm_router_model_demand_total{model="w"}[5m])'), 0);
      assert.equal(await value('llm_router_model_demand_total{model="w"}'), 41);
      const increase = (await value('increase(llm_router_model_demand_total{model="w"}[5m])')) ?? Number.NaN;
      assert.ok(increase <= 41 * 1.25, `increase over the window is the 41 requests, no spike: ${increase}`);
      const peak = (await value('max_over_time(rate(llm_router_model_demand_total{model="w"}[10s])[5m:1s])')) ?? Number.NaN;
      assert.ok(peak <= 41, `the rate never read more than the requests sent: ${peak}/s`);
      t.diagnostic(`across the kill: resets 0, increase[5m] ${increase.toFixed(2)} for 41 requests, peak rate[10s] ${peak.toFixed(2)}/s`);
    } finally {
      await prom.stop();
      await router.stop();
    }
  });

  // the replicas present the file's first key (k-1) to each other; the client another (k-2)
  for (const [form, text] of [
    ['plain lines', '# the replicas share this file\nk-1\nk-2\n'],
    ['YAML entries', '# the replicas share this file\n- key: k-1\n  tenant: replicas\n- key: k-2\n  tenant: clients\n  priority: 2\n'],
  ] as const)
    test(`API keys from --api-keys-file only (${form}), no admin port: the peers read each other’s demand`, async () => {
      const dir = mkdtempSync(path.join(os.tmpdir(), 'keys-'));
      const file = path.join(dir, 'keys');
      writeFileSync(file, text);
      const auth = { authorization: 'Bearer k-2' };
      try {
        const common = ['--known-models', 'm', '--cold-start-wait', '60', '--keda-scaler-port', '0', '--api-keys-file', file];
        // B's port named in advance (the last --port wins), so that A, which lists it, starts beside it
        const bPort = await freePort();
        const [b, a] = await Promise.all([
          startRouter([...common, '--port', String(bPort)]),
          startRouter([...common, '--scaler-peers', `http://127.0.0.1:${bPort}`]),
        ]);
        const keda = kedaClient(`127.0.0.1:${await kedaPort(a)}`);
        try {
          assert.equal((await call(`${b.url}/demand`)).status, 401, 'the main port wants a key');
          const held = hold(b, 'm', auth);
          await until('B holds the request', async () => (await demand(b, auth)).models.m?.held === 1);
          await until('A sees it', async () => (await keda.metric(ref('m'))) === 1, 10_000);
          assert.equal(await keda.isActive(ref('m')), true);
          await b.stop();
          await held;
        } finally {
          keda.close();
          await a.stop();
        }
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

  test('a rollout: B stopping cleanly is counted while it still holds a request, and dropped at once when it has answered it', async (t) => {
    const grace = ['--scale-to-zero-grace-seconds', '60'];
    const [aAdmin, bAdmin] = [await freePort(), await freePort()];
    const common = ['--known-models', 'm', '--cold-start-wait', '60', '--keda-scaler-port', '0', ...grace];
    // B knows A (to say goodbye); A knows B; B drains for 2 s with its request still held. Both run two workers: B's
    // primary says it is stopping and says goodbye; A's worker that takes the goodbye hands it to A's primary
    // both admin ports named in advance: the two replicas start side by side
    const [b, a] = await Promise.all([
      startRouter([
        ...common,
        '--workers',
        '2',
        '--admin-port',
        String(bAdmin),
        '--scaler-peers',
        `http://127.0.0.1:${aAdmin}`,
        '--drain-seconds',
        '2',
      ]),
      startRouter([...common, '--workers', '2', '--admin-port', String(aAdmin), '--scaler-peers', `http://127.0.0.1:${bAdmin}`]),
    ]);
    const keda = kedaClient(`127.0.0.1:${await kedaPort(a)}`);
    try {
      const held = hold(b, 'm');
      await until('B holds the request', async () => (await demand(b)).models.m?.held === 1);
      await until('A counts it', async () => (await keda.metric(ref('m'))) === 1);
      const stopping = b.stop();
      await until('B says it is stopping', async () => (await demand(b)).stopping === true, 5_000);
      // still holding it: it still counts (and is what an engine would serve if one came up)
      assert.equal(await keda.metric(ref('m')), 1, 'B counted while it holds the request');
      const answer = await within(15_000, 'B answers its held request', held);
      assert.ok(!(answer instanceof Error) && answer.status === 503, String(answer));
      const answeredAt = Date.now();
      await until('A drops B', async () => (await keda.metric(ref('m'))) === 0, 10_000);
      await until('and B no longer keeps the model active', async () => !(await keda.isActive(ref('m'))), 10_000);
      const tookMs = Date.now() - answeredAt;
      assert.ok(tookMs < 15_000, 'at once, not after the 60 s grace period');
      t.diagnostic(`A dropped B ${tookMs} ms after B answered its held request (grace period 60 s)`);
      assert.equal(await stopping, 0);
    } catch (err) {
      // what each replica logged (no request content), to tell a farewell lost from one never sent
      const tail = (r: Running) => r.proc.output().split('\n').slice(-40).join('\n');
      throw new Error(`${(err as Error).message}\n--- B's log:\n${tail(b)}\n--- A's log:\n${tail(a)}`, { cause: err });
    } finally {
      keda.close();
      await a.stop();
    }
  });

  test('KEDA over mutual TLS from the command line (--keda-tls-cert, --keda-tls-key, --keda-tls-ca); errors show in llm_router_keda_scaler_errors_total', {
    skip: requireTool('openssl'),
  }, async () => {
    const certs = testCa('keda-tls-');
    try {
      const server = certs.sign('server', 'server', 'subjectAltName=IP:127.0.0.1,DNS:localhost');
      const client = certs.sign('client', 'client', 'extendedKeyUsage=clientAuth');
      const router = await startRouter([
        '--known-models',
        'm',
        '--admin-port',
        '0',
        '--keda-scaler-port',
        '0',
        '--keda-tls-cert',
        server.certFile,
        '--keda-tls-key',
        server.keyFile,
        '--keda-tls-ca',
        certs.caFile,
      ]);
      const address = `127.0.0.1:${await kedaPort(router)}`;
      assert.match(router.proc.output(), /"tls":"mutual","port":\d+,"msg":"KEDA external scaler listening/);
      const ca = Buffer.from(certs.ca);
      const keda = kedaClient(address, grpcCredentials.createSsl(ca, Buffer.from(client.key), Buffer.from(client.cert)));
      const anonymous = kedaClient(address, grpcCredentials.createSsl(ca));
      try {
        assert.equal(await keda.isActive(ref('m')), false);
        assert.equal((await grpcCode(anonymous.isActive(ref('m')))).code, GRPC.UNAVAILABLE, 'no client certificate: no connection');
        assert.equal((await grpcCode(keda.metric(ref('nope')))).code, GRPC.NOT_FOUND);
        const text = await scrape(router);
        assert.match(text, /^llm_router_keda_scaler_errors_total\{method="GetMetricSpec",code="NOT_FOUND"\} 1$/m);
      } finally {
        keda.close();
        anonymous.close();
        await router.stop();
      }
    } finally {
      certs.remove();
    }
  });

  test('one replica behind two URLs counts once; this replica’s own URLs (it holds a request) are not counted again', async () => {
    const common = ['--known-models', 'm', '--cold-start-wait', '60', '--keda-scaler-port', '0'];
    // both admin ports named in advance: the two replicas start side by side
    const [aAdmin, bAdmin] = [await freePort(), await freePort()];
    const bAgain = await relay(bAdmin);
    const aAgain = await relay(aAdmin);
    const [b, a] = await Promise.all([
      startRouter([...common, '--admin-port', String(bAdmin)]),
      startRouter([
        ...common,
        '--admin-port',
        String(aAdmin),
        '--scaler-peers',
        [`http://127.0.0.1:${bAdmin}`, bAgain.url, `http://127.0.0.1:${aAdmin}`, aAgain.url].join(','),
      ]),
    ]);
    const keda = kedaClient(`127.0.0.1:${await kedaPort(a)}`);
    try {
      const onB = hold(b, 'm');
      const onA = hold(a, 'm');
      await until('B holds one', async () => (await demand(b)).models.m?.held === 1);
      await until('A holds one', async () => (await demand(a)).models.m?.held === 1);
      await until('A sees both', async () => (await keda.metric(ref('m'))) >= 2);
      for (let i = 0; i < 5; i++) {
        assert.equal(await keda.metric(ref('m')), 2, 'B once (two URLs), A once (itself twice in the list)');
        await new Promise((r) => setTimeout(r, 300));
      }
      await b.stop();
      await a.stop();
      await Promise.all([onA, onB]);
    } finally {
      keda.close();
      await Promise.all([bAgain.close(), aAgain.close()]);
    }
  });
});
