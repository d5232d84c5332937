// Issue 14, items 1, 2, 3 and 7: the router frames every answer itself, refuses engine answers it cannot pass on as
// framed, and no answer's bytes reach another request. A raw-socket engine (test/support/raw-engine.ts) misbehaves on
// purpose; raw client connections (test/support/raw-http.ts) see the exact bytes the router writes. Every check runs
// against both inbound paths: the fast path (the default) and node:http (--fast-path false).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type net from 'node:net';
import { stopAll } from '../support/process.js';
import { RawEngine, type EngineRequest } from '../support/raw-engine.js';
import { RawClient, type RawAnswer } from '../support/raw-http.js';
import { engines, startRouter, waitModelStatus, type Running } from '../support/router.js';
import { until } from '../support/within.js';

const MODEL = 'raw';
const WAIT_MS = 5_000;

function request(opts: { id: string; kase?: string; stream?: boolean; extra?: string }): string {
  const body = JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], ...(opts.stream ? { stream: true } : {}) });
  const kase = opts.kase ? `x-case: ${opts.kase}\r\n` : '';
  return `POST /v1/chat/completions HTTP/1.1\r\nHost: router\r\ncontent-type: application/json\r\nx-request-id: ${opts.id}\r\n${kase}${opts.extra ?? ''}content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}

function errorCode(a: RawAnswer | undefined): string | undefined {
  if (a === undefined) return undefined;
  try {
    return (JSON.parse(a.body.toString('utf8')) as { error?: { code?: string } }).error?.code;
  } catch {
    return undefined;
  }
}

/** The engine's default echo for request `id`, as the router must pass it on. */
function assertEcho(a: RawAnswer | undefined, id: string, what: string): void {
  assert.ok(a, `${what}: no answer`);
  assert.equal(a.status, 200, `${what}: ${a.body.toString('latin1').slice(0, 200)}`);
  assert.equal(a.truncated, false, what);
  assert.equal((JSON.parse(a.body.toString('utf8')) as { id: string }).id, id, `${what}: the answer is its own`);
  assert.equal(a.headers['x-request-id'], id, what);
}

const HEAD_JSON = 'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n';

describe('the router frames every answer itself', { timeout: 120_000 }, () => {
  let engine: RawEngine;
  const routers: { name: string; router: Running }[] = [];

  before(async () => {
    engine = await RawEngine.start([MODEL]);
    const c = engine.cases;
    c.set('204-length-then-bytes', (s) => {
      s.write('HTTP/1.1 204 No Content\r\ncontent-length: 5\r\n\r\n');
      setTimeout(() => s.write('HTTP/1.1 200 OK\r\ncontent-length: 8\r\n\r\nsmuggled'), 20);
    });
    c.set('204-length-and-bytes', (s) =>
      s.write('HTTP/1.1 204 No Content\r\ncontent-length: 5\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 8\r\n\r\nsmuggled'),
    );
    c.set('length-and-chunked', (s) =>
      s.write(`${HEAD_JSON}content-length: 5\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n`),
    );
    c.set('gzip-coding', (s) => s.write(`${HEAD_JSON}transfer-encoding: gzip\r\n\r\nzzzz`));
    c.set('two-lengths', (s) => s.write(`${HEAD_JSON}content-length: 2\r\ncontent-length: 2\r\n\r\n{}`));
    c.set('bytes-beyond-length', (s) =>
      s.write(`${HEAD_JSON}content-length: 2\r\n\r\n{}HTTP/1.1 200 OK\r\ncontent-length: 8\r\n\r\nsmuggled`),
    );
    c.set('bad-chunk', (s) => s.write(`${HEAD_JSON}transfer-encoding: chunked\r\n\r\n2 \r\n{}\r\n0\r\n\r\n`));
    c.set('chunked-json', (s, r) => {
      const body = JSON.stringify({ id: r.headers['x-request-id'], object: 'chat.completion', bytes: r.body.length });
      s.write(`${HEAD_JSON}transfer-encoding: chunked\r\n\r\n`);
      s.write(`${(5).toString(16)}\r\n${body.slice(0, 5)}\r\n`);
      s.write(`${Buffer.byteLength(body.slice(5)).toString(16)}\r\n${body.slice(5)}\r\n0\r\n\r\n`);
    });
    c.set('sse-length-cut-short', (s) => {
      s.write('HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: 1000\r\n\r\ndata: {"n":1}\n\n');
      setTimeout(() => s.end(), 20);
    });
    c.set('json-length-cut-short', (s) => {
      s.write(`${HEAD_JSON}content-length: 1000\r\n\r\n{"partial":`);
      setTimeout(() => s.end(), 20);
    });
    c.set('sse-bad-chunk-mid-stream', (s) => {
      s.write('HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n');
      s.write('f\r\ndata: {"n":1}\n\n\r\n');
      setTimeout(() => s.write('zz\r\n'), 20);
    });
    // both routers started at once, kept in this order
    const started = await Promise.all(
      (
        [
          ['fast path', []],
          ['node:http', ['--fast-path', 'false']],
        ] as const
      ).map(async ([name, args]) => {
        const router = await startRouter([
          '--static-backends',
          engine.origin,
          '--static-models',
          MODEL,
          '--passive-failure-threshold',
          '1000',
          '--probe-interval',
          '0.2',
          ...args,
        ]);
        await waitModelStatus(router.url, MODEL, 'ready');
        return { name, router };
      }),
    );
    routers.push(...started);
  });
  after(async () => {
    await stopAll();
    await engine?.close();
  });

  /** Sends request `kase` on a new client connection; returns the answer, the client and the engine's record of it. */
  async function send(
    router: Running,
    kase: string,
    id: string,
    opts: { stream?: boolean } = {},
  ): Promise<{ answer: RawAnswer | undefined; client: RawClient; seen: EngineRequest | undefined }> {
    const client = await RawClient.connect(router.port);
    await client.write(request({ id, kase, ...opts }));
    const answer = await client.next(WAIT_MS);
    return { answer, client, seen: engine.requests.find((r) => r.headers['x-request-id'] === id) };
  }

  /** After a bad answer: the same client connection (if open) and a new one both get their own clean answers. */
  async function othersAreClean(router: Running, client: RawClient, tag: string): Promise<void> {
    if (!client.closed) {
      await client.write(request({ id: `${tag}-same` }));
      const again = await client.next(WAIT_MS);
      if (again !== undefined) assertEcho(again, `${tag}-same`, `${tag}: the next request on the same connection`);
    }
    client.destroy();
    const other = await RawClient.connect(router.port);
    for (let i = 0; i < 3; i++) {
      await other.write(request({ id: `${tag}-other-${i}` }));
      assertEcho(await other.next(WAIT_MS), `${tag}-other-${i}`, `${tag}: another client's request ${i}`);
    }
    other.destroy();
  }

  test('a 204 that declares a length, with bytes after it (later or in the same read): a 502, and nobody gets those bytes', async () => {
    for (const { name, router } of routers) {
      for (const kase of ['204-length-then-bytes', '204-length-and-bytes']) {
        const tag = `${name}/${kase}`.replace(/[^a-z0-9-]/gi, '_');
        const { answer, client, seen } = await send(router, kase, tag);
        assert.ok(answer, `${tag}: an answer`);
        // a clean 204, or a 502 upstream_protocol_error; never the bytes the engine sent after its 204
        if (answer.status === 204) assert.equal(answer.body.length, 0, tag);
        else assert.deepEqual([answer.status, errorCode(answer)], [502, 'upstream_protocol_error'], tag);
        assert.ok(!client.unread.includes('smuggled'), tag);
        assert.ok(seen, `${tag}: the engine got the request`);
        await until(`${tag}: the engine connection closed`, () => engine.connections[seen.conn]?.closed === true);
        await othersAreClean(router, client, tag);
      }
    }
  });

  test('contradictory or illegal framing from the engine: 502 upstream_protocol_error, the engine connection closed', async () => {
    for (const { name, router } of routers) {
      for (const kase of ['length-and-chunked', 'gzip-coding', 'two-lengths', 'bytes-beyond-length', 'bad-chunk']) {
        const tag = `${name}/${kase}`.replace(/[^a-z0-9-]/gi, '_');
        const { answer, client, seen } = await send(router, kase, tag);
        assert.deepEqual(
          [answer?.status, errorCode(answer)],
          [502, 'upstream_protocol_error'],
          `${tag}: ${answer?.body.toString('latin1')}`,
        );
        assert.ok(seen, tag);
        await until(`${tag}: the engine connection closed`, () => engine.connections[seen.conn]?.closed === true);
        assert.ok(!client.received.includes('smuggled'), tag);
        await othersAreClean(router, client, tag);
      }
    }
  });

  test("the engine's framing is never copied: a chunked JSON answer is framed by the router; a length only when exactly that many bytes follow", async () => {
    for (const { name, router } of routers) {
      const tag = `${name}-chunked`.replace(/[^a-z0-9-]/gi, '_');
      const { answer, client } = await send(router, 'chunked-json', tag);
      assertEcho(answer, tag, tag);
      assert.equal(answer?.framing, 'chunked', tag);
      const plain = `${name}-plain`.replace(/[^a-z0-9-]/gi, '_');
      await client.write(request({ id: plain }));
      const echo = await client.next(WAIT_MS);
      assertEcho(echo, plain, plain);
      assert.equal(echo?.framing, 'content-length', plain);
      client.destroy();
    }
  });

  test('an event stream declared with a length and cut short: chunked by the router, ended with its own error event, the connection still serves', async () => {
    for (const { name, router } of routers) {
      const tag = `${name}-sse-cut`.replace(/[^a-z0-9-]/gi, '_');
      const { answer, client } = await send(router, 'sse-length-cut-short', tag, { stream: true });
      assert.equal(answer?.status, 200, tag);
      assert.equal(answer?.framing, 'chunked', tag);
      assert.equal(answer?.truncated, false, tag);
      assert.equal(answer?.headers['content-length'], undefined, tag);
      const text = answer?.body.toString('utf8') ?? '';
      assert.match(text, /^data: \{"n":1\}\n\n/, tag);
      assert.match(text, /"code":"upstream_stream_error"/, tag);
      await othersAreClean(router, client, tag);
    }
  });

  test('a stream whose chunk framing breaks mid-way ends with upstream_protocol_error; a JSON answer cut short closes the client connection', async () => {
    for (const { name, router } of routers) {
      const tag = `${name}-sse-bad`.replace(/[^a-z0-9-]/gi, '_');
      const sse = await send(router, 'sse-bad-chunk-mid-stream', tag, { stream: true });
      assert.equal(sse.answer?.framing, 'chunked', tag);
      assert.match(sse.answer?.body.toString('utf8') ?? '', /^data: \{"n":1\}\n\ndata: \{"error".*"code":"upstream_protocol_error"/s, tag);
      await othersAreClean(router, sse.client, tag);

      const cut = `${name}-json-cut`.replace(/[^a-z0-9-]/gi, '_');
      const json = await send(router, 'json-length-cut-short', cut);
      // the head promised 1000 bytes; the router closes the connection instead of adding anything
      assert.equal(json.answer?.status, 200, cut);
      assert.equal(json.answer?.truncated, true, cut);
      assert.equal(await json.client.closesWithin(WAIT_MS), true, cut);
      await othersAreClean(router, json.client, cut);
    }
  });

  test('fast path: a Content-Length followed by a tab is refused with 400 as node:http refuses it, and what is pipelined behind it never reaches the engine', async () => {
    for (const { name, router } of routers) {
      const tag = `${name}-tab`.replace(/[^a-z0-9-]/gi, '_');
      const before = engine.inference.length;
      const client = await RawClient.connect(router.port);
      const body = JSON.stringify({ model: MODEL });
      await client.write(
        `POST /v1/chat/completions HTTP/1.1\r\nHost: r\r\nx-request-id: ${tag}\r\nContent-Length: ${body.length}\t\r\n\r\n${body}${request({ id: `${tag}-behind` })}`,
      );
      const answer = await client.next(WAIT_MS);
      assert.equal(answer?.status, 400, tag);
      assert.equal(errorCode(answer), 'bad_request', tag);
      assert.equal(await client.closesWithin(WAIT_MS), true, `${tag}: the connection is closed`);
      assert.equal(await client.next(WAIT_MS), undefined, `${tag}: nothing answers the pipelined request`);
      assert.equal(engine.inference.length, before, `${tag}: nothing reached the engine`);
      await othersAreClean(router, client, tag);
    }
  });

  test('junk pipelined after a whole request: that request is answered, then a 400, then the connection closes; no ERROR is logged', async () => {
    for (const { name, router } of routers) {
      const tag = `${name}-junk`.replace(/[^a-z0-9-]/gi, '_');
      const client = await RawClient.connect(router.port);
      await client.write(`${request({ id: tag })}JUNK\r\n\r\n`);
      assertEcho(await client.next(WAIT_MS), tag, tag);
      const refused = await client.next(WAIT_MS);
      assert.equal(refused?.status, 400, tag);
      assert.equal(await client.closesWithin(WAIT_MS), true, tag);
      // and a request line with no headers, then junk
      const bare = await RawClient.connect(router.port);
      await bare.write('POST /v1/chat/completions HTTP/1.1\r\n\r\nJUNK\r\n\r\n');
      assert.deepEqual([(await bare.next(WAIT_MS))?.status], [400], tag);
      assert.equal(await bare.closesWithin(WAIT_MS), true, tag);
    }
  });

  test('afterwards: no input above made the router log an ERROR, and both still hold nothing in flight', async () => {
    for (const { name, router } of routers) {
      const errorsLogged = router.proc
        .output()
        .split('\n')
        .filter((l) => l.includes('"level":50') || l.includes('"level":60'));
      assert.deepEqual(errorsLogged, [], name);
      assert.deepEqual(
        (await engines(router.url)).map((e) => [e.state, e.inFlight]),
        [['ready', 0]],
        name,
      );
    }
  });
});

describe('an engine that breaks framing counts as a failing endpoint', { timeout: 60_000 }, () => {
  after(stopAll);

  test('protocol errors are passive failures: a run of them marks the endpoint failed, with the reason in /engines', async () => {
    const engine = await RawEngine.start([MODEL]);
    try {
      engine.cases.set('bad', (s: net.Socket) =>
        s.write(`${HEAD_JSON}content-length: 2\r\ntransfer-encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n`),
      );
      // probes far apart, so that the failed state is still there when /engines is read
      const router = await startRouter([
        '--static-backends',
        engine.origin,
        '--static-models',
        MODEL,
        '--passive-failure-threshold',
        '2',
        '--probe-interval',
        '0.2',
        '--probe-ready-interval',
        '60',
      ]);
      await waitModelStatus(router.url, MODEL, 'ready');
      for (let i = 0; i < 2; i++) {
        const client = await RawClient.connect(router.port);
        await client.write(request({ id: `bad-${i}`, kase: 'bad' }));
        const a = await client.next(WAIT_MS);
        assert.deepEqual([a?.status, errorCode(a)], [502, 'upstream_protocol_error']);
        client.destroy();
      }
      const [view] = await engines(router.url);
      assert.equal(view?.state, 'failed');
      assert.match(view?.lastError ?? '', /Content-Length and Transfer-Encoding|protocol|PARSE/i);
    } finally {
      await stopAll();
      await engine.close();
    }
  });
});

describe('--max-connections-per-engine', { timeout: 60_000 }, () => {
  after(stopAll);

  test('requests beyond the cap wait for a free engine connection and are all answered, in order; the cap holds (both engine clients)', async () => {
    // one engine and one router per engine client, the two routers started at once; then each is checked in turn
    const engineList: RawEngine[] = [];
    try {
      const setups = await Promise.all(
        ['h1', 'undici'].map(async (engineClient) => {
          const engine = await RawEngine.start([MODEL]);
          engineList.push(engine);
          const held: { socket: net.Socket; req: EngineRequest }[] = [];
          engine.cases.set('hold', (socket, req) => held.push({ socket, req }));
          const router = await startRouter(
            ['--static-backends', engine.origin, '--static-models', MODEL, '--max-connections-per-engine', '2', '--probe-interval', '0.2'],
            { LLM_ROUTER_ENGINE_CLIENT: engineClient },
          );
          await waitModelStatus(router.url, MODEL, 'ready');
          return { engineClient, engine, held, router };
        }),
      );
      for (const { engineClient, engine, held, router } of setups) {
        const clients = await Promise.all(Array.from({ length: 5 }, () => RawClient.connect(router.port)));
        for (const [i, c] of clients.entries()) {
          await c.write(request({ id: `capped-${i}`, kase: 'hold' }));
          // one at a time, so that the arrival order is known: each is forwarded (counted in flight, waiting for an
          // engine connection beyond the first two) before the next is sent
          await until(`request ${i} forwarded`, async () => (await engines(router.url))[0]?.inFlight === i + 1, WAIT_MS);
          if (i < 2) await until(`request ${i} at the engine`, () => held.length === i + 1, WAIT_MS);
        }
        const answers: string[] = [];
        while (answers.length < 5) {
          await until('a held request', () => held.length > 0);
          const inference = new Set(engine.inference.map((r) => r.conn));
          assert.ok(inference.size <= 2, `${engineClient}: at most 2 engine connections carried requests (${inference.size})`);
          const { socket, req } = held.shift() as { socket: net.Socket; req: EngineRequest };
          answers.push(req.headers['x-request-id'] as string);
          const body = JSON.stringify({ id: req.headers['x-request-id'], object: 'chat.completion', bytes: req.body.length });
          socket.write(`${HEAD_JSON}content-length: ${body.length}\r\n\r\n${body}`);
        }
        for (const [i, c] of clients.entries()) assertEcho(await c.next(WAIT_MS), `capped-${i}`, `${engineClient}: request ${i}`);
        // the first two went out at once; the other three waited and went out in their order of arrival
        assert.deepEqual(answers.slice(0, 2), ['capped-0', 'capped-1'], engineClient);
        assert.deepEqual(new Set(engine.inference.map((r) => r.conn)).size, 2, engineClient);
        for (const c of clients) c.destroy();
        await router.stop();
      }
    } finally {
      await stopAll();
      await Promise.all(engineList.map((e) => e.close()));
    }
  });
});
