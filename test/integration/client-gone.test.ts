// A client that leaves ends its request within a second at every stage (src/router/core/client-gone.ts): before the
// discovery sync completes, while held for a cold start, during a P/D prefill call, during the engine attempt before
// its head, and mid-body. What it held is given back: the engine's connection (closed), the concurrency slot (the
// next request is admitted under --max-concurrent-requests 1), the in-flight count (/engines) and the demand (/demand).
// Engines are raw sockets (test/support/raw-engine.ts) that hang or stall on purpose; clients are raw sockets cut by
// the test. Both inbound paths run: the fast path and node:http, one router each, shared by every test but the
// discovery one (whose router starts with the API server down); a client that stays but stops reading is ended by
// --idle-timeout on the same two routers.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { startFakeKube, type FakeKube } from '../support/fake-kube/index.js';
import { addReadyPod, deployment } from '../support/kube-objects.js';
import { stopAll } from '../support/process.js';
import { RawEngine, type EngineRequest } from '../support/raw-engine.js';
import { RawClient } from '../support/raw-http.js';
import { call, chat, engines, FAST_PROBES, startRouter, waitModelStatus, type Running } from '../support/router.js';
import { until } from '../support/within.js';

/** the bound the fix promises: a departed client's request is over within a second */
const GONE_MS = 1_000;

function request(model: string, id: string, kase?: string, stream = false): string {
  const body = chat(model, stream ? { stream: true } : {});
  const extra = kase ? `x-case: ${kase}\r\n` : '';
  return `POST /v1/chat/completions HTTP/1.1\r\nHost: router\r\ncontent-type: application/json\r\nx-request-id: ${id}\r\n${extra}content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}

interface Demand {
  models: Record<string, { held: number; inFlight: number }>;
}
const demandOf = async (r: Running, model: string): Promise<{ held: number; inFlight: number }> =>
  (await call(`${r.adminUrl}/demand`)).json<Demand>().models[model] ?? { held: 0, inFlight: 0 };

/** Registers the misbehaving replies: no answer at all, and a stream that stops after its first event. */
function misbehave(engine: RawEngine): void {
  engine.cases.set('hang', () => undefined);
  engine.cases.set('stall-stream', (s) => {
    s.write('HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n');
    s.write('f\r\ndata: {"n":1}\n\n\r\n');
  });
}

/** The engine request with this request id, once it arrived. */
async function arrived(engine: RawEngine, id: string): Promise<EngineRequest> {
  let seen: EngineRequest | undefined;
  await until(`the engine got ${id}`, () => {
    seen = engine.requests.find((r) => r.headers['x-request-id'] === id);
    return seen !== undefined;
  });
  return seen as EngineRequest;
}

/** Everything a departed request held is given back within GONE_MS of `leftAt`. */
async function assertFreed(
  router: Running,
  what: string,
  leftAt: number,
  engineConn?: { engine: RawEngine; conn: number },
): Promise<number> {
  if (engineConn) {
    await until(`${what}: the engine connection closed`, () => engineConn.engine.connections[engineConn.conn]?.closed === true, 5_000, 10);
  }
  await until(`${what}: nothing in flight on /engines`, async () => (await engines(router.url)).every((e) => e.inFlight === 0), 5_000, 20);
  const took = Date.now() - leftAt;
  assert.ok(took <= GONE_MS, `${what}: freed ${took} ms after the client left (at most ${GONE_MS})`);
  // the slot: with --max-concurrent-requests 1 a request is admitted only when no other holds it
  const next = await call(`${router.url}/v1/chat/completions`, { body: chat('m') });
  assert.equal(next.status, 200, `${what}: the next request is admitted: ${next.text}`);
  return took;
}

describe('a client that leaves frees what its request held, at every stage', { timeout: 120_000 }, () => {
  let plain: RawEngine;
  let prefill: RawEngine;
  let decode: RawEngine;
  /** lists no model: the model it is declared for stays loading, so its requests are held */
  let cold: RawEngine;
  const routers: { name: string; router: Running }[] = [];

  before(async () => {
    [plain, prefill, decode, cold] = await Promise.all([
      RawEngine.start(['m']),
      RawEngine.start(['pd']),
      RawEngine.start(['pd']),
      RawEngine.start([]),
    ]);
    for (const e of [plain, prefill, decode]) misbehave(e);
    // far more than the sockets between engine, router and client buffer: the router must hold the engine back
    plain.cases.set('huge', (s) => {
      const size = 64 * 1024 * 1024;
      s.write(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${size}\r\n\r\n`);
      s.write(Buffer.alloc(size, 0x20));
    });
    const paths: [name: string, args: string[]][] = [
      ['fast path', []],
      ['node:http', ['--fast-path', 'false']],
    ];
    // both started at once
    const started = paths.map(async ([name, args]) => {
      const router = await startRouter([
        '--static-backends',
        [plain.origin, prefill.origin, decode.origin, cold.origin].join(','),
        '--static-models',
        'm,pd,pd,held',
        '--static-backend-roles',
        'both,prefill,decode,both',
        '--pd-protocol',
        'vllm-nixl',
        '--cold-start-wait',
        '60',
        '--max-concurrent-requests',
        '1',
        // for the stalled reader below. The engines here run in this test process: on a busy machine one may take a
        // second to answer, and an engine silent for --idle-timeout is the engine's fault (502), not the client's.
        // Every other request here is left by its client within milliseconds of reaching the engine.
        '--idle-timeout',
        '3',
        // the access log: the stalled reader's status is read from it
        '--log-level',
        'info',
        ...FAST_PROBES,
        ...args,
      ]);
      await waitModelStatus(router.url, 'm', 'ready');
      await waitModelStatus(router.url, 'pd', 'ready');
      return { name, router };
    });
    routers.push(...(await Promise.all(started)));
  });
  after(async () => {
    await stopAll();
    await Promise.all([plain, prefill, decode, cold].map((e) => e?.close()));
  });

  test('held for a cold start: it leaves the queue (/demand held 0) and its slot', async (t) => {
    for (const { name, router } of routers) {
      const client = await RawClient.connect(router.port);
      await client.write(request('held', `held-${name.replace(/\W/g, '')}`));
      await until(`${name}: held`, async () => (await demandOf(router, 'held')).held === 1);
      const leftAt = Date.now();
      client.destroy();
      await until(`${name}: no longer held`, async () => (await demandOf(router, 'held')).held === 0, 5_000, 20);
      t.diagnostic(`${name} held: freed in ${await assertFreed(router, `${name} held`, leftAt)} ms`);
    }
  });

  test('during the P/D prefill call: the prefill connection closes, nothing in flight', async (t) => {
    for (const { name, router } of routers) {
      const id = `prefill-${name.replace(/\W/g, '')}`;
      const client = await RawClient.connect(router.port);
      await client.write(request('pd', id, 'hang'));
      const seen = await arrived(prefill, id);
      const leftAt = Date.now();
      client.destroy();
      t.diagnostic(
        `${name} prefill: freed in ${await assertFreed(router, `${name} prefill`, leftAt, { engine: prefill, conn: seen.conn })} ms`,
      );
      assert.equal((await demandOf(router, 'pd')).inFlight, 0);
      assert.equal(
        decode.requests.some((r) => r.headers['x-request-id'] === id),
        false,
        'no decode call for a client that left',
      );
    }
  });

  test('during the attempt, before the head, and mid-body: the engine connection closes, nothing in flight', async (t) => {
    for (const { name, router } of routers) {
      for (const [kase, stream] of [
        ['hang', false],
        ['stall-stream', true],
      ] as const) {
        const id = `${kase}-${name.replace(/\W/g, '')}`;
        const client = await RawClient.connect(router.port);
        await client.write(request('m', id, kase, stream));
        const seen = await arrived(plain, id);
        if (stream) await until(`${id}: the first event reached the client`, () => client.received.includes('data: {"n":1}'));
        const leftAt = Date.now();
        client.destroy();
        t.diagnostic(
          `${name} ${kase}: freed in ${await assertFreed(router, `${name} ${kase}`, leftAt, { engine: plain, conn: seen.conn })} ms`,
        );
        assert.equal((await demandOf(router, 'm')).inFlight, 0);
      }
    }
  });

  // on the same routers, after the tests above (a suite runs its tests one at a time)
  describe('a client that stays connected but stops reading', () => {
    test('is ended after --idle-timeout without a byte taken: 499, the engine connection closed, nothing against the engine', async (t) => {
      const upstreamFailures = async (router: Running): Promise<string[]> =>
        (await call(`${router.url}/metrics`)).text.match(/^llm_router_upstream_failures_total\{.*$/gm) ?? [];
      // both routers at once: each waits out its own --idle-timeout
      await Promise.all(
        routers.map(async ({ name, router }) => {
          const blamedBefore = await upstreamFailures(router);
          const id = `stalled-${name.replace(/\W/g, '')}`;
          // a client that sends its request and then reads nothing at all
          const client = net.connect({ port: router.port, host: '127.0.0.1' });
          client.on('error', () => undefined);
          client.pause();
          client.write(request('m', id, 'huge'));
          const seen = await arrived(plain, id);
          const logged = new RegExp(`"requestId":"${id}"[^\\n]*"status":(\\d+)`);
          const started = Date.now();
          await until(`${name}: the stalled request is ended`, () => logged.test(router.proc.output()), 15_000);
          t.diagnostic(`${name}: ended ${Date.now() - started} ms after the engine got it`);
          assert.equal(logged.exec(router.proc.output())?.[1], '499');
          await until(`${name}: the engine connection closed`, () => plain.connections[seen.conn]?.closed === true, 5_000);
          await until(`${name}: nothing in flight`, async () => (await engines(router.url)).every((e) => e.inFlight === 0), 5_000);
          assert.deepEqual(await upstreamFailures(router), blamedBefore, `${name}: the engine is not blamed`);
          client.destroy();
        }),
      );
    });
  });
});

describe('a client that leaves while the router waits for its first discovery sync', { timeout: 120_000 }, () => {
  let kube: FakeKube;
  let engine: RawEngine;

  before(async () => {
    kube = await startFakeKube();
    engine = await RawEngine.start(['late-model']);
    misbehave(engine);
  });
  after(async () => {
    await stopAll();
    await kube?.close();
    await engine?.close();
  });

  test('its requests end at once (499, slots back); once discovery has listed, none reaches an engine or is held', async (t) => {
    // the API server is down when the router starts: every model is "not listed yet", and requests wait for the sync.
    // Once it lists: late-model is served by the raw engine (which would hang), cold-model is declared at one replica
    // with no pod yet (loading: a request for it would be held for the cold start)
    addReadyPod(kube, 'late-1', 'late-model', engine.port);
    kube.create(deployment('cold', 1, { labels: { model: 'cold-model' } }));
    await kube.stop();
    const router = await startRouter(
      [
        '--service-discovery',
        'k8s',
        '--k8s-label-selector',
        'app=llm',
        '--sync-wait-seconds',
        '60',
        '--cold-start-wait',
        '60',
        '--max-concurrent-requests',
        '2',
        '--log-level',
        'info',
        ...FAST_PROBES,
      ],
      { KUBECONFIG: kube.kubeconfigPath },
    );
    try {
      await router.proc.waitForOutput('kubernetes list/watch failed');
      assert.equal((await call(`${router.url}/ready`)).status, 503);
      const clients: RawClient[] = [];
      for (const [model, id] of [
        ['late-model', 'before-sync-late'],
        ['cold-model', 'before-sync-cold'],
      ] as const) {
        const client = await RawClient.connect(router.port);
        await client.write(request(model, id, 'hang'));
        clients.push(client);
      }
      // they wait in the sync stage (no answer yet), then the clients leave
      assert.equal(await clients[0]?.closesWithin(300), false, 'still waiting');
      const leftAt = Date.now();
      for (const c of clients) c.destroy();
      await until(
        'both requests ended with 499 in the access log',
        () => ['late', 'cold'].every((m) => new RegExp(`"requestId":"before-sync-${m}"[^\\n]*"status":499`).test(router.proc.output())),
        5_000,
        10,
      );
      const took = Date.now() - leftAt;
      assert.ok(took <= GONE_MS, `ended ${took} ms after the clients left`);
      t.diagnostic(`before sync: ended in ${took} ms`);
      // their slots are free: two more requests are admitted (they wait for the sync themselves; not refused 429)
      const more = await Promise.all(
        [1, 2].map(() =>
          call(`${router.url}/v1/chat/completions`, { body: chat('cold-model'), timeoutMs: 500 }).catch((err: Error) => err),
        ),
      );
      assert.ok(
        more.every((m) => m instanceof Error),
        `the next requests were admitted and wait: ${more.map((m) => (m instanceof Error ? 'waiting' : m.status)).join(', ')}`,
      );
      await kube.restart();
      await until('synced, the engine ready', async () => (await engines(router.url)).some((e) => e.state === 'ready'), 30_000);
      // what the departed requests would have done once the sync came: reach the engine and hold it for good, or wait
      // in the hold queue (counted as demand) until the cold-start wait ran out
      await until('nothing in flight', async () => (await engines(router.url)).every((e) => e.inFlight === 0), 5_000);
      await until('nothing held', async () => (await demandOf(router, 'cold-model')).held === 0, 5_000);
      assert.equal((await demandOf(router, 'late-model')).inFlight, 0, 'not counted as demand in flight');
      assert.equal(
        engine.requests.some((r) => r.headers['x-request-id'] === 'before-sync-late'),
        false,
        'the engine never got the request of a client that had left',
      );
    } finally {
      await router.stop();
    }
  });
});
