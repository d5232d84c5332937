// The scaler's peers as instances (not URLs), the shared round of peer requests, the counters a --workers primary keeps
// for workers that are gone, the peers' key, and TLS on the scaler's port.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { loadRouterConfig } from '../../src/router/config/config.js';
import { retainedCounters, type WorkerMetrics } from '../../src/router/metrics/metrics.js';
import { countersOnly, EMPTY_MODEL_DEMAND, type DemandSnapshot } from '../../src/router/scaling/demand-snapshot.js';
import { AggregateDemand, workerGatherMs } from '../../src/router/scaling/demand-view.js';
import { KedaScaler } from '../../src/router/scaling/keda.js';
import { farewellTimeoutMs, PeerDemand, StaticPeers } from '../../src/router/scaling/peers.js';
import { peerAuthorization } from '../../src/router/scaling/system.js';
import { createLogger } from '../../src/router/util/log.js';
import { GRPC, grpcCode, grpcCredentials, kedaClient } from '../support/keda.js';
import { testCa } from '../support/certs.js';
import { requireTool } from '../support/tools.js';

const silent = createLogger({ level: 'silent', format: 'json' });
const m = (over: Partial<typeof EMPTY_MODEL_DEMAND>) => ({ ...EMPTY_MODEL_DEMAND, ...over });
const snap = (instance: string, at: number, models: DemandSnapshot['models'], extra: Partial<DemandSnapshot> = {}): DemandSnapshot => ({
  instance,
  at,
  workers: 1,
  models,
  ...extra,
});

/** An in-process stand-in for a replica's admin port: GET /demand answers `answer()`, POST /demand is recorded. */
async function fakeReplica(answer: () => DemandSnapshot | undefined) {
  const notices: unknown[] = [];
  const auth: (string | undefined)[] = [];
  const server = http.createServer((req, res) => {
    auth.push(req.headers.authorization);
    if (req.method === 'POST') {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        notices.push(JSON.parse(Buffer.concat(chunks).toString('utf8')));
        res.writeHead(204).end();
      });
      return;
    }
    const s = answer();
    if (!s) {
      res.writeHead(503).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    notices,
    auth,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const held = (r: { snapshot: DemandSnapshot }[]): number =>
  r.reduce((n, x) => n + Object.values(x.snapshot.models).reduce((k, d) => k + d.held + d.inFlight, 0), 0);

test('one instance behind two URLs counts once; its newest answer wins', async () => {
  let at = 1_000;
  const b = await fakeReplica(() => snap('b', at++, { x: m({ held: 1 }) }));
  // a second address of the same replica (a Service URL beside its pod's): the same instance id
  const c = await fakeReplica(() => snap('b', at++, { x: m({ held: 1 }) }));
  try {
    const two = new PeerDemand(new StaticPeers([b.url, c.url]), { self: 'a', timeoutMs: 2_000, maxAgeMs: 60_000 }, silent);
    const got = await two.poll();
    assert.equal(got.length, 1, 'one instance');
    assert.equal(held(got), 1, 'its held request once, not once per URL');
  } finally {
    await Promise.all([b.close(), c.close()]);
  }
});

test('a URL that answered with our own id is asked again later, and counts once it is another replica', async () => {
  let who = 'a';
  let now = 10_000;
  const svc = await fakeReplica(() => snap(who, now, { x: m({ held: 1 }) }));
  try {
    const peers = new PeerDemand(
      new StaticPeers([svc.url]),
      { self: 'a', timeoutMs: 2_000, maxAgeMs: 60_000, selfRecheckMs: 5_000, now: () => now },
      silent,
    );
    assert.equal((await peers.poll()).length, 0, 'itself: not counted');
    assert.equal(svc.auth.length, 1);
    who = 'b';
    now += 1_000;
    assert.equal((await peers.poll()).length, 0, 'not asked again at once');
    assert.equal(svc.auth.length, 1, 'skipped while it is known as this router');
    now += 5_000;
    const got = await peers.poll();
    assert.equal(got.length, 1, 're-checked after selfRecheckMs: it is another replica now');
    assert.equal(got[0]?.snapshot.instance, 'b');
    assert.deepEqual(
      peers.status().map((s) => [s.up, s.ageSeconds]),
      [[true, 0]],
    );
  } finally {
    await svc.close();
  }
});

test('a replica that stops cleanly counts while it holds requests, and is dropped once it has answered them; one that vanishes counts for the grace period', async () => {
  let now = 0;
  let b: DemandSnapshot | undefined = snap('b', 0, { x: m({ held: 1 }) });
  let c: DemandSnapshot | undefined = snap('c', 0, { x: m({ inFlight: 2 }) });
  const rb = await fakeReplica(() => b);
  const rc = await fakeReplica(() => c);
  try {
    const peers = new PeerDemand(
      new StaticPeers([rb.url, rc.url]),
      { self: 'a', timeoutMs: 2_000, maxAgeMs: 300_000, now: () => now },
      silent,
    );
    assert.equal(held(await peers.poll()), 3);
    // B drains: still holding its request, it says it is stopping
    b = snap('b', 1, { x: m({ held: 1 }) }, { stopping: true });
    now = 1_000;
    assert.equal(held(await peers.poll()), 3, 'B counts while it holds the request');
    // C vanishes (crash): its last snapshot counts for the grace period
    c = undefined;
    b = snap('b', 2, { x: m({ arrivals: 1, lastArrivalAt: 1 }) }, { stopping: true });
    now = 2_000;
    const after = await peers.poll();
    assert.deepEqual(
      after.map((r) => r.snapshot.instance),
      ['c'],
      'B dropped at once (stopping, nothing held or in flight); C still counts',
    );
    // a late answer from B (a second URL, a slow request) does not bring it back
    peers.notice(snap('b', 3, { x: m({ held: 1 }) }));
    assert.deepEqual(
      (await peers.poll()).map((r) => r.snapshot.instance),
      ['c'],
    );
    now = 2_000 + 300_001;
    assert.equal((await peers.poll()).length, 0, 'C dropped after the grace period');
    assert.deepEqual(
      peers.status().map((s) => s.up),
      [true, false],
    );
  } finally {
    await Promise.all([rb.close(), rc.close()]);
  }
});

test('the farewell: the last snapshot, stopping, to every peer but this router itself; a notice drops the sender', async () => {
  const a = await fakeReplica(() => snap('me', 0, {}));
  let bSays: DemandSnapshot | undefined = snap('b', 0, { x: m({ held: 1 }) });
  const b = await fakeReplica(() => bSays);
  try {
    const peers = new PeerDemand(
      new StaticPeers([a.url, b.url]),
      { self: 'me', timeoutMs: 2_000, maxAgeMs: 60_000, authorization: () => 'Bearer k' },
      silent,
    );
    const view = new AggregateDemand({
      instance: 'me',
      locals: async () => [{ snapshot: snap('w1', Date.now(), { x: m({ arrivals: 4 }) }), receivedAt: Date.now() }],
      peers,
      graceMs: 60_000,
      stopping: () => true,
    });
    assert.equal((await view.system()).models.x?.held, 1);
    await view.farewell();
    assert.equal(a.notices.length, 0, 'not to itself');
    assert.equal(b.notices.length, 1);
    const sent = b.notices[0] as DemandSnapshot;
    assert.equal(sent.instance, 'me');
    assert.equal(sent.stopping, true);
    assert.equal(sent.models.x?.arrivals, 4);
    assert.ok(b.auth.every((x) => x === 'Bearer k'));
    // and the receiving side: B's notice that it leaves, with nothing left; then it is gone
    peers.notice(snap('b', 1, { x: m({}) }, { stopping: true }));
    bSays = undefined;
    assert.equal((await peers.poll()).length, 0, 'B leaves at once');
    // a notice in B's name while B is still there (forged, or from an earlier life) holds only until B is asked
    bSays = snap('b', 5, { x: m({ held: 1 }) });
    assert.equal(held(await peers.poll()), 1, 'B itself, asked and not stopping, is back');
  } finally {
    await Promise.all([a.close(), b.close()]);
  }
});

test('the farewell waits at least 2 s for a peer (one that takes 1 s still hears it, under a 500 ms peer timeout); the ones that did not hear it are named', async () => {
  const notices: unknown[] = [];
  const slow = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      notices.push(JSON.parse(Buffer.concat(chunks).toString('utf8')));
      setTimeout(() => res.writeHead(204).end(), 1_000);
    });
  });
  await new Promise<void>((resolve) => slow.listen(0, '127.0.0.1', resolve));
  const slowUrl = `http://127.0.0.1:${(slow.address() as AddressInfo).port}`;
  // a port nothing listens on: found free, then closed
  const gone = http.createServer();
  await new Promise<void>((resolve) => gone.listen(0, '127.0.0.1', resolve));
  const goneUrl = `http://127.0.0.1:${(gone.address() as AddressInfo).port}`;
  await new Promise<void>((resolve) => gone.close(() => resolve()));
  try {
    assert.equal(farewellTimeoutMs(500), 2_000);
    assert.equal(farewellTimeoutMs(5_000), 5_000);
    const peers = new PeerDemand(new StaticPeers([slowUrl, goneUrl]), { self: 'me', timeoutMs: 500, maxAgeMs: 60_000 }, silent);
    const outcome = await peers.farewell(snap('me', 1, { x: m({}) }, { stopping: true }));
    assert.equal(outcome.told, 1);
    assert.deepEqual(
      outcome.missed.map((x) => x.url),
      [goneUrl],
    );
    assert.equal(notices.length, 1);
  } finally {
    slow.closeAllConnections();
    await new Promise<void>((resolve) => slow.close(() => resolve()));
  }
});

test('questions about the system within 250 ms share one round of peer requests (concurrent or back to back)', async () => {
  let now = 0;
  let polls = 0;
  const view = new AggregateDemand({
    instance: 'a',
    locals: async () => [{ snapshot: snap('a', now, { x: m({ held: 1 }) }), receivedAt: now }],
    peers: {
      poll: async () => {
        polls++;
        return [];
      },
    } as never,
    graceMs: 60_000,
    now: () => now,
  });
  await Promise.all([view.system(), view.system(), view.system()]);
  assert.equal(polls, 1, 'concurrent');
  now += 100;
  await view.system();
  now += 100;
  await view.system();
  assert.equal(polls, 1, 'back to back, KEDA asking once per ScaledObject');
  now += 100;
  await view.system();
  assert.equal(polls, 2, 'a new round after 250 ms');
});

test("a replica's gather from its workers is bounded well inside the time its peers give it", () => {
  for (const peer of [1, 50, 500, 5_000]) {
    const g = workerGatherMs(peer);
    assert.ok(g >= 1 && g <= peer / 2 + 1, `${peer} -> ${g}`);
  }
  assert.equal(workerGatherMs(500), 125);
});

test('counters of workers that are gone: summed (max where the family says so), their gauges left out', async () => {
  const part = async (demand: number, held: number, coldStarts: number): Promise<WorkerMetrics> => {
    const r = new Registry();
    new Counter({ name: 'd_total', help: 'd', labelNames: ['model'], registers: [r] }).inc({ model: 'm' }, demand);
    new Gauge({ name: 'held', help: 'h', labelNames: ['model'], registers: [r] }).set({ model: 'm' }, held);
    const h = new Histogram({ name: 'cold', help: 'c', buckets: [1], aggregator: 'max', registers: [r] });
    for (let i = 0; i < coldStarts; i++) h.observe(0.5);
    return (await r.getMetricsAsJSON()) as WorkerMetrics;
  };
  const kept = retainedCounters([await part(3, 1, 1), await part(5, 2, 2)]);
  const byName = new Map(kept.map((f) => [f.name, f]));
  assert.equal(byName.has('held'), false, 'no gauge');
  assert.deepEqual(
    byName.get('d_total')?.values.map((v) => v.value),
    [8],
  );
  const count = byName.get('cold')?.values.find((v) => (v as { metricName?: string }).metricName === 'cold_count');
  assert.equal(count?.value, 2, 'max for a max family');
  // combined again with a later gone worker
  const again = retainedCounters([kept, await part(1, 9, 0)]);
  assert.deepEqual(
    again.find((f) => f.name === 'd_total')?.values.map((v) => v.value),
    [9],
  );
  // the demand snapshot's counterpart keeps arrivals and times, drops held and in flight
  const c = countersOnly(snap('w', 5, { x: m({ held: 2, inFlight: 1, arrivals: 7, lastArrivalAt: 4, oldestHeldAt: 3 }) }));
  assert.deepEqual(c.models.x, m({ arrivals: 7, lastArrivalAt: 4 }));
});

test('peers show any configured key: --api-key first, else the first key of --api-keys-file (plain or YAML), re-read when it changes', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'peer-keys-'));
  try {
    const file = path.join(dir, 'keys');
    writeFileSync(file, '# comment\n\n  k-file  \nk-two\n');
    const base = { apiKeys: [] as string[], apiKeysFile: file, adminPort: undefined } as never;
    const fromFile = peerAuthorization(base);
    assert.equal(fromFile(), 'Bearer k-file');
    writeFileSync(file, 'k-rotated-and-longer\n');
    assert.equal(fromFile(), 'Bearer k-rotated-and-longer');
    rmSync(file);
    assert.equal(fromFile(), 'Bearer k-rotated-and-longer', 'a file gone for a moment keeps the key read last');
    // YAML entries: the first entry's key
    writeFileSync(file, '# tenants\n- key: k-yaml-first\n  tenant: acme\n  priority: 3\n- key: k-yaml-second\n');
    assert.equal(fromFile(), 'Bearer k-yaml-first');
    writeFileSync(file, '- key: k-broken\n  priority: urgent\n');
    assert.equal(fromFile(), 'Bearer k-yaml-first', 'a file that is not valid keeps the key read last, as the gate does');
    assert.equal(peerAuthorization({ apiKeys: ['k-flag'], apiKeysFile: file } as never)(), 'Bearer k-flag');
    assert.equal(peerAuthorization({ apiKeys: [], apiKeysFile: undefined } as never)(), undefined);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('--keda-tls-*: cert and key together, the CA only with them, only with --keda-scaler-port', () => {
  const load = (args: string[]) => loadRouterConfig(['--known-models', 'm', ...args], {});
  assert.throws(() => load(['--keda-scaler-port', '0', '--keda-tls-cert', 'c.pem']), /--keda-tls-cert and --keda-tls-key go together/);
  assert.throws(() => load(['--keda-scaler-port', '0', '--keda-tls-ca', 'ca.pem']), /needs --keda-tls-cert/);
  assert.throws(() => load(['--keda-tls-cert', 'c.pem', '--keda-tls-key', 'k.pem']), /--keda-scaler-port/);
  assert.deepEqual(
    load(['--keda-scaler-port', '0', '--keda-tls-cert', 'c.pem', '--keda-tls-key', 'k.pem', '--keda-tls-ca', 'ca.pem']).scaling.kedaTls,
    {
      certFile: 'c.pem',
      keyFile: 'k.pem',
      caFile: 'ca.pem',
    },
  );
  assert.equal(load([]).scaling.kedaTls, undefined);
});

test('the scaler over TLS, and mutual TLS with --keda-tls-ca; errors are counted by method and code', {
  skip: requireTool('openssl'),
}, async () => {
  const certs = testCa('keda-tls-');
  try {
    const server = certs.sign('server', 'localhost', 'subjectAltName=IP:127.0.0.1,DNS:localhost');
    const client = certs.sign('client', 'keda', 'extendedKeyUsage=clientAuth');
    const errors: string[] = [];
    const view = {
      lookup: (model: string) => (model === 'm' ? ({ kind: 'known', model } as const) : ({ kind: 'unknown' } as const)),
      totals: async () => ({ m: { held: 2, inFlight: 0, queued: 0, arrivals: 2, sinceActivityMs: 0 } }),
      graceMs: 1_000,
      onError: (method: string, code: string) => errors.push(`${method} ${code}`),
    };
    const ref = (model: string) => ({ name: 'so', namespace: 'ns', scalerMetadata: { model } });
    const ca = Buffer.from(certs.ca);

    const tls = new KedaScaler(view, silent);
    await tls.start('127.0.0.1', 0, { cert: server.cert, key: server.key });
    const ok = kedaClient(`127.0.0.1:${tls.port}`, grpcCredentials.createSsl(ca));
    const plain = kedaClient(`127.0.0.1:${tls.port}`);
    try {
      assert.equal(await ok.metric(ref('m')), 2, 'a client that trusts the CA');
      assert.equal((await grpcCode(plain.isActive(ref('m')))).code, GRPC.UNAVAILABLE, 'plaintext is refused');
      assert.equal((await grpcCode(ok.isActive(ref('nope')))).code, GRPC.NOT_FOUND);
      assert.deepEqual(errors, ['IsActive NOT_FOUND']);
    } finally {
      ok.close();
      plain.close();
      await tls.stop();
    }

    const mutual = new KedaScaler(view, silent);
    await mutual.start('127.0.0.1', 0, { cert: server.cert, key: server.key, ca: certs.ca });
    const withCert = kedaClient(
      `127.0.0.1:${mutual.port}`,
      grpcCredentials.createSsl(ca, Buffer.from(client.key), Buffer.from(client.cert)),
    );
    const noCert = kedaClient(`127.0.0.1:${mutual.port}`, grpcCredentials.createSsl(ca));
    try {
      assert.equal(await withCert.isActive(ref('m')), true, 'a client certificate the CA signed');
      assert.equal((await grpcCode(noCert.isActive(ref('m')))).code, GRPC.UNAVAILABLE, 'no client certificate: refused');
    } finally {
      withCert.close();
      noCert.close();
      await mutual.stop();
    }
  } finally {
    certs.remove();
  }
});
