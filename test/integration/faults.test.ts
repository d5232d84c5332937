// Issue 9, item 5: the router survives faults of engines, of the Kubernetes API and of clients. Every scenario runs
// real processes on 127.0.0.1, is bounded in time and count, and ends with the same four checks:
//   1. no request hung: every client call resolved within its bound;
//   2. no endpoint left routable that should not be (the /engines states and endpoint set);
//   3. in-flight counts back to zero (/engines `inFlight` and /metrics `llm_router_endpoint_in_flight`);
//   4. no leaked sockets (the router process's TCP sockets, counted from /proc; see assertNoLeakedSockets).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import { startFakeKube, type FakeKube } from '../support/fake-kube/index.js';
import { stopAll } from '../support/process.js';
import { addReady, deployment, enginePod } from '../support/kube-objects.js';
import {
  allReady,
  call,
  chat,
  engines,
  FAST_PROBES,
  metric,
  setFault,
  simStats,
  startRouter,
  startSim,
  type Running,
} from '../support/router.js';
import { describeSockets, orphanedInbound, readByServer, socketCensus, tcpSockets } from '../support/sockets.js';
import { startLocalSim, stopLocalSims, type LocalSim } from '../support/sim-here.js';
import { until, within } from '../support/within.js';

/**
 * Connections the router may keep to an engine that is still up once it is idle. Its prober and its engine-stats
 * scraper each send one request at a time to an endpoint (src/router/health/prober.ts, engine-stats.ts), so each reuses
 * one keep-alive connection: 2 per engine, +1 for one of them being replaced (a timed-out probe) when we count.
 * The forwarding pool's idle connections close after its 4 s keep-alive (src/router/proxy/pools.ts; the sim hints 5 s),
 * so once that has passed, anything above 3 to one engine is a connection the router forgot.
 */
const MAX_IDLE_SOCKETS_PER_LIVE_ENGINE = 3;
/** how long the keep-alive of forwarding connections may take to expire, plus slack for a busy machine */
const SOCKET_SETTLE_MS = 12_000;

/** Sum of `llm_router_endpoint_in_flight` per endpoint, from /metrics. */
async function metricInFlight(router: string): Promise<Record<string, number>> {
  const text = (await call(`${router}/metrics`)).text;
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/^llm_router_endpoint_in_flight\{endpoint="([^"]*)"\} (\S+)$/gm)) out[m[1] as string] = Number(m[2]);
  return out;
}

interface SettleExpectation {
  /** every endpoint the router should list, with its state; nothing else may be listed */
  readonly states: Readonly<Record<string, string>>;
  /** engines that are still up (their connections may stay pooled up to MAX_IDLE_SOCKETS_PER_LIVE_ENGINE) */
  readonly live: readonly number[];
  /** engines the router must no longer talk to (dead, or no longer listed): no connection at all */
  readonly gone?: readonly number[];
  /** other servers the router talks to (the Kubernetes API) and how many connections it may keep to each */
  readonly others?: Readonly<Record<number, number>>;
}

/**
 * Checks 2-4. The first two are polled briefly (a probe may be on its way); sockets get SOCKET_SETTLE_MS.
 *
 * Socket count: the router's TCP sockets come from /proc/<pid>/fd matched against /proc/<pid>/net/tcp{,6}
 * (test/support/sockets.ts). Four rules, each a different way to leak:
 *  - inbound: every accepted connection must still have its client, i.e. be paired with a socket this test
 *    process holds (undici's keep-alive pool here); a connection whose client went away and that the router
 *    kept is a leak, even in ESTABLISHED state;
 *  - no socket in CLOSE_WAIT (the peer closed, the router never did);
 *  - no connection at all to an engine that is dead or no longer listed;
 *  - at most MAX_IDLE_SOCKETS_PER_LIVE_ENGINE to each live engine once the forwarding pool's keep-alive expired
 *    (polled for up to SOCKET_SETTLE_MS),
 *    and at most `others[port]` to other servers; no connection to any other port.
 */
async function assertSettled(router: Running, expect: SettleExpectation): Promise<void> {
  let last: { url: string; state: string; inFlight: number }[] = [];
  const wanted = JSON.stringify(Object.entries(expect.states).sort());
  await until(
    'the expected endpoints and states with nothing in flight',
    async () => {
      last = await engines(router.url);
      const seen = JSON.stringify(last.map((e) => [e.url, e.state]).sort());
      return seen === wanted && last.every((e) => e.inFlight === 0);
    },
    10_000,
  ).catch(() => assert.fail(`/engines: expected ${wanted} with inFlight 0, got ${JSON.stringify(last)}`));
  const gauge = await metricInFlight(router.url);
  assert.deepEqual(
    Object.values(gauge).filter((n) => n !== 0),
    [],
    `llm_router_endpoint_in_flight all zero: ${JSON.stringify(gauge)}`,
  );

  const pid = router.proc.child.pid as number;
  const allowed = new Map<number, number>(expect.live.map((p) => [p, MAX_IDLE_SOCKETS_PER_LIVE_ENGINE]));
  for (const p of expect.gone ?? []) allowed.set(p, 0);
  for (const [p, n] of Object.entries(expect.others ?? {})) allowed.set(Number(p), n);
  let problems: string[] = [];
  const check = (): boolean => {
    const census = socketCensus(pid, router.port);
    problems = [];
    const orphans = orphanedInbound(census, router.port);
    if (orphans.length) problems.push(`inbound connections without a client: ${describeSockets(orphans)}`);
    if (census.closeWait.length) problems.push(`CLOSE_WAIT: ${describeSockets(census.closeWait)}`);
    for (const [port, sockets] of census.outbound) {
      const max = allowed.get(port);
      if (max === undefined) problems.push(`connections to an unexpected port ${port}: ${describeSockets(sockets)}`);
      else if (sockets.length > max)
        problems.push(`${sockets.length} connections to port ${port} (at most ${max}): ${describeSockets(sockets)}`);
    }
    return problems.length === 0;
  };
  await until('no leaked sockets', check, SOCKET_SETTLE_MS, 200).catch(() => assert.fail(`router sockets: ${problems.join('; ')}`));
}

/** A raw connection to the router, for clients that misbehave at the byte level. */
async function rawConnect(port: number): Promise<net.Socket & { received(): string }> {
  const socket = net.connect({ port, host: '127.0.0.1' });
  let text = '';
  socket.on('data', (b: Buffer) => {
    text += b.toString('latin1');
  });
  socket.on('error', () => undefined);
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  return Object.assign(socket, { received: () => text });
}

function rawPost(model: string, extra: Record<string, unknown> = {}): string {
  const body = chat(model, extra);
  return `POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}

async function ok(router: string, model: string): Promise<void> {
  const res = await call(`${router}/v1/chat/completions`, { body: chat(model), timeoutMs: 10_000 });
  assert.equal(res.status, 200, `a normal request still succeeds: ${res.text}`);
}

// three independent routers and engines: their waits (the keep-alive expiry before the socket count) overlap
describe('engine faults', { timeout: 120_000, concurrency: true }, () => {
  after(async () => {
    await stopAll();
    await stopLocalSims();
  });

  test('an engine resetting connections: non-streaming requests fail over, streams end with an SSE error event', async () => {
    const a = await startLocalSim(['--model', 'r', '--id', 'a', '--ttft-ms', '5', '--itl-ms', '20', '--output-tokens', '8']);
    const b = await startLocalSim(['--model', 'r', '--id', 'b', '--ttft-ms', '5', '--itl-ms', '20', '--output-tokens', '8']);
    const router = await startRouter(['--static-backends', `${a.url},${b.url}`, '--static-models', 'r,r', ...FAST_PROBES]);
    await allReady(router.url, 2);
    await setFault(a.url, { mode: 'reset-mid-stream', afterChunks: 2 });

    // streams: round robin puts half of them on a; each of those is cut after 2 chunks
    const streams = await within(
      15_000,
      '6 streams',
      Promise.all(
        Array.from({ length: 6 }, () =>
          call(`${router.url}/v1/chat/completions`, { body: chat('r', { stream: true, max_tokens: 8 }), timeoutMs: 10_000 }),
        ),
      ),
    );
    const onA = streams.filter((s) => s.headers['x-sim-engine'] === 'a');
    assert.ok(onA.length >= 1, `some streams started on the resetting engine (${streams.map((s) => s.headers['x-sim-engine']).join(',')})`);
    for (const s of streams) {
      assert.equal(s.status, 200);
      if (s.headers['x-sim-engine'] === 'a') {
        assert.match(
          s.text,
          /^data: \{"error":\{[^\n]*"code":"upstream_stream_error"[^\n]*\}\}\n\n$/m,
          'a cut stream ends with an SSE error event',
        );
        assert.doesNotMatch(s.text, /\[DONE\]/);
      } else {
        assert.match(s.text, /data: \[DONE\]\n\n$/);
      }
    }

    // non-streaming: the engine drops the connection before any byte, so every request is retried on b
    await until('a ready again after its passive failures', async () => (await engines(router.url)).every((e) => e.state === 'ready'));
    const before = await simStats(a.url);
    const answers = await within(
      20_000,
      '12 requests',
      Promise.all(Array.from({ length: 12 }, () => call(`${router.url}/v1/chat/completions`, { body: chat('r'), timeoutMs: 10_000 }))),
    );
    assert.deepEqual(
      answers.map((x) => x.status),
      Array(12).fill(200),
      answers.map((x) => x.text.slice(0, 120)).join('\n'),
    );
    assert.ok(answers.every((x) => x.headers['x-sim-engine'] === 'b'));
    assert.ok((await simStats(a.url)).failed > before.failed, 'the resetting engine was tried (and failed over from)');
    const exposition = (await call(`${router.url}/metrics`)).text;
    assert.match(exposition, /llm_router_failovers_total\{model="r"\} [1-9]/);
    const failures = new RegExp(`^llm_router_upstream_failures_total\\{endpoint="${a.url}",kind="reset"\\} ([1-9]\\d*)$`, 'm');
    assert.match(exposition, failures, 'the failed attempts on a are counted by endpoint and kind');

    await setFault(a.url, { mode: 'none' });
    const [sa, sb] = [await simStats(a.url), await simStats(b.url)];
    assert.equal(sa.running + sb.running, 0, 'nothing left running on the engines');
    await ok(router.url, 'r');
    await assertSettled(router, { states: { [a.url]: 'ready', [b.url]: 'ready' }, live: [a.port, b.port] });
    await router.stop();
    await a.stop();
    await b.stop();
  });

  test('an engine that hangs before its headers or mid-stream: every request ends in time and its connection is closed, not kept', async () => {
    const sim = await startLocalSim(['--model', 'hg', '--id', 'hg', '--ttft-ms', '5', '--itl-ms', '5', '--output-tokens', '6']);
    const router = await startRouter([
      '--static-backends',
      sim.url,
      '--static-models',
      'hg',
      '--response-timeout',
      '1',
      '--idle-timeout',
      '0.5',
      ...FAST_PROBES,
    ]);
    await allReady(router.url, 1);

    await setFault(sim.url, { mode: 'hang' });
    const timedOut = await within(
      10_000,
      '4 requests to a hung engine',
      Promise.all(Array.from({ length: 4 }, () => call(`${router.url}/v1/chat/completions`, { body: chat('hg'), timeoutMs: 8_000 }))),
    );
    assert.deepEqual(
      timedOut.map((x) => [x.status, x.json<{ error: { code: string } }>().error.code]),
      Array(4).fill([504, 'upstream_timeout']),
    );
    // the router gave up on those requests, so the engine must see their connections close (a kept socket is a leak)
    await until('the hung engine saw 4 aborts', async () => (await simStats(sim.url)).aborted === 4, 5_000);

    await setFault(sim.url, { mode: 'slow-chunks', delayMs: 1_500 });
    await allReady(router.url, 1); // timeouts count against it (passive health) until a probe brings it back
    const stalled = await within(
      10_000,
      '2 stalled streams',
      Promise.all(
        Array.from({ length: 2 }, () =>
          call(`${router.url}/v1/chat/completions`, { body: chat('hg', { stream: true }), timeoutMs: 8_000 }),
        ),
      ),
    );
    for (const s of stalled) {
      assert.equal(s.status, 200);
      assert.match(s.text, /data: \{"error":\{[^\n]*"code":"upstream_timeout"[^\n]*\}\}\n\n$/);
    }
    await until('the stalled streams aborted on the engine', async () => (await simStats(sim.url)).aborted === 6, 5_000);

    await setFault(sim.url, { mode: 'none' });
    await allReady(router.url, 1);
    await ok(router.url, 'hg');
    assert.equal((await simStats(sim.url)).running, 0);
    await assertSettled(router, { states: { [sim.url]: 'ready' }, live: [sim.port] });
    await router.stop();
    await sim.stop();
  });

  test('an engine killed under 20 concurrent streams: its streams end with an error event, the others finish, it is failed and unused', async () => {
    const a = await startSim(['--model', 'k', '--id', 'a', '--ttft-ms', '5', '--itl-ms', '100', '--output-tokens', '40']);
    const b = await startLocalSim(['--model', 'k', '--id', 'b', '--ttft-ms', '5', '--itl-ms', '25', '--output-tokens', '40']);
    const router = await startRouter([
      '--static-backends',
      `${a.url},${b.url}`,
      '--static-models',
      'k,k',
      ...FAST_PROBES,
      '--probe-ready-interval',
      '5',
    ]);
    await allReady(router.url, 2);

    const started = await within(
      15_000,
      '20 stream heads',
      Promise.all(
        Array.from({ length: 20 }, async () => {
          const res = await request(`${router.url}/v1/chat/completions`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: chat('k', { stream: true, max_tokens: 40 }),
            headersTimeout: 10_000,
            bodyTimeout: 10_000,
          });
          const it = res.body[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
          const first = await it.next(); // the stream has begun on its engine
          return { engine: res.headers['x-sim-engine'] as string, it, text: first.done ? '' : String(first.value) };
        }),
      ),
    );
    assert.ok(started.filter((s) => s.engine === 'a').length >= 5, `streams on a: ${started.map((s) => s.engine).join(',')}`);
    await a.stop('SIGKILL');
    const texts = await within(
      15_000,
      'the 20 streams',
      Promise.all(
        started.map(async (s) => {
          let text = s.text;
          for (let r = await s.it.next(); !r.done; r = await s.it.next()) text += String(r.value);
          return { engine: s.engine, text };
        }),
      ),
    );
    for (const s of texts) {
      if (s.engine === 'a') {
        assert.match(
          s.text,
          /data: \{"error":\{[^\n]*"code":"upstream_stream_error"[^\n]*\}\}\n\n$/,
          'a killed stream ends with an error event',
        );
        assert.doesNotMatch(s.text, /\[DONE\]/);
      } else {
        assert.match(s.text, /data: \[DONE\]\n\n$/, 'a stream on the surviving engine finishes');
      }
    }
    const next = await within(
      15_000,
      '8 requests after the kill',
      Promise.all(Array.from({ length: 8 }, () => call(`${router.url}/v1/chat/completions`, { body: chat('k'), timeoutMs: 10_000 }))),
    );
    assert.deepEqual(
      next.map((x) => [x.status, x.headers['x-sim-engine']]),
      Array(8).fill([200, 'b']),
    );
    assert.equal((await simStats(b.url)).running, 0);
    await assertSettled(router, { states: { [a.url]: 'failed', [b.url]: 'ready' }, live: [b.port], gone: [a.port] });
    await router.stop();
    await b.stop();
  });
});

describe('a client that disconnects at every stage of a request', { timeout: 120_000 }, () => {
  after(async () => {
    await stopAll();
    await stopLocalSims();
  });

  test('headers, body, waiting for the engine (hung, slow, held for a cold start), mid-stream: the engine sees the abort, nothing stays in flight', async () => {
    const [stream, hung, slow] = await Promise.all([
      startLocalSim(['--model', 'c', '--id', 'c', '--ttft-ms', '5', '--itl-ms', '100', '--output-tokens', '50']),
      startLocalSim(['--model', 'h', '--id', 'h', '--fault', 'hang']),
      startLocalSim(['--model', 't', '--id', 't', '--ttft-ms', '20000']),
    ]);
    const router = await startRouter([
      '--static-backends',
      `${stream.url},${hung.url},${slow.url}`,
      '--static-models',
      'c,h,t',
      '--known-models',
      'z',
      '--cold-start-wait',
      '20',
      ...FAST_PROBES,
    ]);
    await allReady(router.url, 3);
    const inFlightOf = async (url: string): Promise<number> => (await engines(router.url)).find((e) => e.url === url)?.inFlight ?? -1;
    const received = async (): Promise<number[]> => Promise.all([stream, hung, slow].map(async (s) => (await simStats(s.url)).received));
    const receivedBefore = await received();
    const routerPid = router.proc.child.pid as number;

    // 1. during the request headers
    const s1 = await rawConnect(router.port);
    s1.write('POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty');
    await readByServer(routerPid, router.port, s1.localPort as number);
    s1.destroy();

    // 2. mid-body: Content-Length promises more than is sent
    const s2 = await rawConnect(router.port);
    s2.write(
      'POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"model":"c","messages":[',
    );
    await readByServer(routerPid, router.port, s2.localPort as number);
    s2.destroy();
    await ok(router.url, 'c');
    assert.deepEqual(
      await received(),
      receivedBefore.map((n, i) => n + (i === 0 ? 1 : 0)),
      'an incomplete request never reaches an engine',
    );

    // 3. after the body, while the router waits for the engine's response headers: a hung engine, then a slow one
    for (const [engine, model] of [
      [hung, 'h'],
      [slow, 't'],
    ] as const) {
      const s = await rawConnect(router.port);
      s.write(rawPost(model));
      await until(`the request for ${model} in flight`, async () => (await inFlightOf(engine.url)) === 1);
      await until(`the engine for ${model} got it`, async () => (await simStats(engine.url)).received === 1);
      s.destroy();
      await until(`the engine for ${model} saw the abort`, async () => (await simStats(engine.url)).aborted === 1, 5_000);
      await until(`in flight to ${model} back to 0`, async () => (await inFlightOf(engine.url)) === 0, 5_000);
      assert.equal((await simStats(engine.url)).running, 0);
    }

    // 4. while held for a model at zero (cold start): it leaves the queue
    const held = (): Promise<number> => metric(router.url, 'llm_router_model_requests_held', { model: 'z' });
    const sz = await rawConnect(router.port);
    sz.write(rawPost('z'));
    await until('the request for z held', async () => (await held()) === 1);
    sz.destroy();
    await until('the held request gone', async () => (await held()) === 0, 5_000);

    // 5. mid-stream
    const s5 = await rawConnect(router.port);
    s5.write(rawPost('c', { stream: true, max_tokens: 50 }));
    await until('stream chunks arriving', () => /data: \{/.test(s5.received()), 5_000);
    const streamStats = await simStats(stream.url);
    assert.equal(streamStats.running, 1);
    s5.destroy();
    await until('the engine saw the stream abort', async () => (await simStats(stream.url)).aborted === streamStats.aborted + 1, 5_000);
    assert.equal((await simStats(stream.url)).running, 0);

    // the router keeps serving, and every in-flight count and socket is back where it was
    await ok(router.url, 'c');
    assert.deepEqual(
      (await Promise.all([stream, hung, slow].map((s) => simStats(s.url)))).map((s) => s.running),
      [0, 0, 0],
    );
    await assertSettled(router, {
      states: { [stream.url]: 'ready', [hung.url]: 'ready', [slow.url]: 'ready' },
      live: [stream.port, hung.port, slow.port],
    });
    await router.stop();
  });
});

describe('kubernetes 410 storm', { timeout: 120_000 }, () => {
  let kube: FakeKube;
  before(async () => {
    kube = await startFakeKube();
  });
  after(async () => {
    await stopAll();
    await stopLocalSims();
    await kube.close();
  });

  const addReadyPod = (name: string, port: number): void => addReady(kube, enginePod(name, 'storm', port));
  const lists = (): number =>
    Object.entries(kube.requests)
      .filter(([k]) => k.startsWith('list '))
      .reduce((n, [, v]) => n + v, 0);

  test('410s and dropped watches, over and over: the router converges to the right endpoints, never forgets the model, does not hot-loop', async () => {
    const sims = await Promise.all(
      [1, 2, 3].map((i) => startLocalSim(['--model', 'storm', '--id', `s${i}`, '--ttft-ms', '2', '--itl-ms', '1'])),
    );
    const [s1, s2, s3] = sims as [LocalSim, LocalSim, LocalSim];
    kube.create(deployment('storm', 2, { labels: { model: 'storm' } }));
    addReadyPod('p1', s1.port);
    addReadyPod('p2', s2.port);
    const router = await startRouter(
      ['--service-discovery', 'k8s', '--k8s-label-selector', 'app=llm', '--k8s-resync-seconds', '60', ...FAST_PROBES],
      { KUBECONFIG: kube.kubeconfigPath },
    );
    await allReady(router.url, 2);
    await until('4 watches open', () => kube.openWatches() === 4);
    const pid = router.proc.child.pid as number;
    const toKube = (): number => tcpSockets(pid).filter((s) => s.remotePort === kube.port).length;
    const kubeSocketsBefore = toKube();

    // steady traffic during the storm: every answer must come within its bound, and the model is never unknown
    const answers: { status: number; code?: string }[] = [];
    let running = true;
    const traffic = (async () => {
      while (running) {
        // a call that takes longer than 10 s rejects: recorded as -1, a hung request
        const res = await call(`${router.url}/v1/chat/completions`, { body: chat('storm'), timeoutMs: 10_000 }).catch((err: Error) => ({
          status: -1,
          text: err.message,
        }));
        answers.push(res.status === 200 ? { status: 200 } : { status: res.status, code: res.text.slice(0, 200) });
        await sleep(20); // the pace of the traffic, not a wait for anything
      }
    })();

    kube.resetRequests();
    const ROUNDS = 10;
    let drops = 0;
    let injected410 = 0;
    for (let round = 0; round < ROUNDS; round++) {
      const answered = answers.length;
      kube.failWatchesWith410(3, round % 2 === 0 ? 'event' : 'http');
      injected410 += 3;
      // alternate clean ends (the informer re-watches and meets the 410s) and abrupt cuts (the router restarts it)
      const graceful = round % 3 === 0;
      kube.dropWatches({ graceful });
      if (!graceful) drops++;
      if (round === 2) addReadyPod('p3', s3.port);
      if (round === 4) kube.remove('pods', 'default', 'p1');
      if (round === 6) {
        // p2 leaves only once p3 serves, so the model always has a ready endpoint
        await until('p3 ready', async () => (await engines(router.url)).some((e) => e.url === s3.url && e.state === 'ready'), 15_000);
        kube.setPodReady('default', 'p2', false);
      }
      if (round === 7) kube.setPodReady('default', 'p2', true);
      if (round === 8) {
        kube.dropWatches(); // twice in a row: hits informers in the middle of their restart
        drops++;
      }
      // each round lasts until a request was answered in it (traffic runs through the storm) and the watches are back
      await until(`round ${round}: a request answered`, () => answers.length > answered, 20_000);
      await until(`round ${round}: the watches back`, () => kube.openWatches() === 4, 20_000);
    }
    // cancel the 410s the last round left unconsumed, so that the quiet check below sees none
    kube.failWatchesWith410(0);

    await allReady(router.url, 2);
    running = false;
    await within(15_000, 'the traffic loop', traffic);
    const storm = lists();
    // each abrupt drop restarts the 4 reflectors (a list each); each consumed 410 costs one list; +4 of slack
    const bound = 4 * drops + injected410 + 4;
    assert.ok(storm >= 1 && storm <= bound, `${storm} lists during the storm (bound ${bound}): ${JSON.stringify(kube.requests)}`);
    kube.resetRequests();
    // a bounded wait on purpose: it asserts that nothing happens (no list, no watch) within 2 s
    await sleep(2_000);
    assert.deepEqual(
      Object.entries(kube.requests).filter(([k]) => k.startsWith('list ') || k.startsWith('watch ')),
      [],
      'quiet once converged: no list or watch in 2 s',
    );

    const bad = answers.filter((x) => x.status !== 200);
    assert.ok(answers.length >= 10, `traffic ran (${answers.length} answers)`);
    assert.deepEqual(bad, [], 'every request during the storm was served');
    const settled = await Promise.all(Array.from({ length: 6 }, () => call(`${router.url}/v1/chat/completions`, { body: chat('storm') })));
    assert.deepEqual(
      settled.map((x) => x.status),
      Array(6).fill(200),
    );
    assert.ok(
      settled.every((x) => x.headers['x-sim-engine'] === 's2' || x.headers['x-sim-engine'] === 's3'),
      'never the deleted pod',
    );
    // the storm must not have piled up connections to the API server: 4 watches, plus the list agent's keep-alive
    const kubeSockets = toKube();
    assert.ok(
      kubeSockets <= Math.max(kubeSocketsBefore, 4) + 2,
      `${kubeSockets} connections to the API server (before the storm: ${kubeSocketsBefore})`,
    );
    await assertSettled(router, {
      states: { [s2.url]: 'ready', [s3.url]: 'ready' },
      // p1 left the catalog while its engine still runs: its pool is released, its probes stop
      live: [s2.port, s3.port],
      gone: [s1.port],
      others: { [kube.port]: Math.max(kubeSocketsBefore, 4) + 2 },
    });
    await router.stop();
    for (const s of sims) await s.stop();
  });
});
