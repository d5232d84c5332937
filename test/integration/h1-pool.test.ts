// H1Pool (src/router/proxy/h1/pool.ts) against real servers on 127.0.0.1: raw `net` servers that misbehave on purpose, and
// Node's http server. Every wait is bounded; every server, socket, child process and pool is closed by the test.
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { H1Pool, type H1DispatchOptions, type H1Handler } from '../../src/router/proxy/h1/pool.js';
import { DEFAULT_ENGINE_TLS } from '../../src/router/config/engine-tls.js';
import type { Clock } from '../../src/router/util/clock.js';
import { FakeClock } from '../support/clock.js';
import { readRequests } from '../support/raw-http.js';
import { until, within } from '../support/within.js';

const WAIT_MS = 5_000;
/** A request the server side parsed: head text and body. */
interface SeenRequest {
  readonly head: string;
  readonly body: Buffer;
  /** index of the connection it came on (0-based, in accept order) */
  readonly conn: number;
  /** index of the request on its connection */
  readonly n: number;
}

interface RawServer {
  readonly port: number;
  readonly origin: string;
  /** connections accepted so far */
  readonly accepted: net.Socket[];
  /** per connection: its first 'data' chunk */
  readonly firstData: Buffer[];
  /** connections whose 'close' was seen */
  closed: number;
  readonly requests: SeenRequest[];
}

/**
 * A net server that parses requests (head + Content-Length body, one after another per connection) and calls
 * `onRequest` for each; what it does with the socket is up to the test. Closed (with all its sockets) after the test.
 */
async function rawServer(t: TestContext, onRequest: (socket: net.Socket, req: SeenRequest) => void): Promise<RawServer> {
  const state: RawServer = { port: 0, origin: '', accepted: [], firstData: [], closed: 0, requests: [] };
  const server = net.createServer((socket) => {
    const conn = state.accepted.length;
    state.accepted.push(socket);
    socket.on('error', () => undefined);
    socket.on('close', () => state.closed++);
    socket.on('data', (data: Buffer) => {
      if (state.firstData[conn] === undefined) state.firstData[conn] = data;
    });
    let n = 0;
    readRequests(socket, (head, body) => {
      const req: SeenRequest = { head, body, conn, n: n++ };
      state.requests.push(req);
      onRequest(socket, req);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  Object.assign(state, { port, origin: `http://127.0.0.1:${port}` });
  t.after(async () => {
    for (const s of state.accepted) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return state;
}

function respond(socket: net.Socket, body: string, extraHeaders = ''): void {
  socket.write(`HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n${extraHeaders}content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
}

class Recorder implements H1Handler {
  heads: { status: number; headers: string[] }[] = [];
  chunks: Buffer[] = [];
  completes = 0;
  errors: Error[] = [];
  /** calls that broke the handler contract */
  violations: string[] = [];
  connected = false;
  abort: (err?: Error) => void = () => assert.fail('abort before onConnect');
  resume: () => void = () => assert.fail('resume before onHeaders');
  onHeadersResult: (status: number) => boolean = () => true;
  onDataResult: (chunk: Buffer) => boolean = () => true;
  onConnectHook: (() => void) | undefined = undefined;
  readonly settled: Promise<void>;
  private settle!: () => void;

  constructor() {
    this.settled = new Promise((resolve) => (this.settle = resolve));
  }
  get done(): boolean {
    return this.completes + this.errors.length > 0;
  }
  get body(): string {
    return Buffer.concat(this.chunks).toString('latin1');
  }
  get error(): (Error & { code?: string }) | undefined {
    return this.errors[0];
  }
  onConnect(abort: (err?: Error) => void): void {
    if (this.connected) this.violations.push('onConnect twice');
    this.connected = true;
    this.abort = abort;
    this.onConnectHook?.();
  }
  onHeaders(statusCode: number, rawHeaders: Buffer[], resume: () => void): boolean {
    if (!this.connected || this.done) this.violations.push('onHeaders out of order');
    this.resume = resume;
    this.heads.push({ status: statusCode, headers: rawHeaders.map((b) => b.toString('latin1')) });
    return this.onHeadersResult(statusCode);
  }
  onData(chunk: Buffer): boolean {
    if (this.heads.length === 0 || this.done) this.violations.push('onData out of order');
    this.chunks.push(chunk);
    return this.onDataResult(chunk);
  }
  onComplete(trailers: null): void {
    if (trailers !== null || this.done) this.violations.push('onComplete after the end');
    this.completes++;
    this.settle();
  }
  onError(err: Error): void {
    if (this.done || !this.connected) this.violations.push(`onError after the end or before onConnect: ${err.message}`);
    this.errors.push(err);
    this.settle();
  }
}

function options(over: Partial<H1DispatchOptions> = {}): H1DispatchOptions {
  return { method: 'GET', path: '/', headers: [], body: undefined, headersTimeout: WAIT_MS, bodyTimeout: WAIT_MS, ...over };
}

function newPool(
  t: TestContext,
  origin: string,
  opts: { connectTimeoutMs?: number; keepAliveTimeoutMs?: number; maxConnections?: number; clock?: Clock } = {},
): H1Pool {
  const pool = new H1Pool(origin, {
    connectTimeoutMs: opts.connectTimeoutMs ?? 2_000,
    keepAliveTimeoutMs: opts.keepAliveTimeoutMs ?? 4_000,
    maxConnections: opts.maxConnections ?? 0,
    tls: DEFAULT_ENGINE_TLS,
    ...(opts.clock ? { clock: opts.clock } : {}),
  });
  t.after(() => pool.destroy());
  return pool;
}

async function run(pool: H1Pool, over: Partial<H1DispatchOptions> = {}, rec = new Recorder()): Promise<Recorder> {
  pool.dispatch(options(over), rec);
  await within(WAIT_MS, 'the request', rec.settled);
  assert.deepEqual(rec.violations, []);
  return rec;
}

async function ok(pool: H1Pool, over: Partial<H1DispatchOptions> = {}): Promise<Recorder> {
  const rec = await run(pool, over);
  assert.equal(rec.error, undefined, `request failed: ${rec.error?.message}`);
  assert.equal(rec.completes, 1);
  return rec;
}

test('the request goes out in one write, formatted as given; the response comes back', async (t) => {
  const server = await rawServer(t, (socket, req) => respond(socket, `echo ${req.body.length}`, 'X-Mixed-Case:  v  \r\n'));
  const pool = newPool(t, server.origin);
  // count the client socket's writes (and whether they were corked: one writev)
  const writes: { corked: boolean; bytes: number }[] = [];
  const write = net.Socket.prototype.write;
  net.Socket.prototype.write = function (this: net.Socket, chunk: unknown, ...rest: unknown[]) {
    if (this.remotePort === server.port) writes.push({ corked: this.writableCorked > 0, bytes: (chunk as Buffer).length });
    return (write as (...args: unknown[]) => boolean).call(this, chunk, ...rest);
  } as typeof write;
  t.after(() => {
    net.Socket.prototype.write = write;
  });
  const body = Buffer.from(JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }));
  const rec = await ok(pool, {
    method: 'POST',
    path: '/v1/chat/completions?x=1',
    headers: ['content-type', 'application/json', 'content-length', String(body.length), 'X-Request-Id', 'r1'],
    body,
  });
  const expected = `POST /v1/chat/completions?x=1 HTTP/1.1\r\nhost: 127.0.0.1:${server.port}\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\nX-Request-Id: r1\r\n\r\n${body.toString()}`;
  // the whole request in the server's first read: it was written at once
  assert.equal(server.firstData[0]?.toString('latin1'), expected);
  assert.deepEqual(writes, [{ corked: false, bytes: Buffer.byteLength(expected) }]);
  assert.equal(rec.heads.length, 1);
  assert.equal(rec.heads[0]?.status, 200);
  assert.deepEqual(rec.heads[0]?.headers, [
    'content-type',
    'text/plain',
    'X-Mixed-Case',
    'v',
    'content-length',
    String(`echo ${body.length}`.length),
  ]);
  // head and body arrived in one read: one body slice
  assert.deepEqual(rec.chunks.map(String), [`echo ${body.length}`]);

  // a large body (written with writev) arrives whole too
  const big = Buffer.alloc(300_000, 'b');
  const bigRec = await ok(pool, { method: 'POST', path: '/big', headers: ['content-length', String(big.length)], body: big });
  assert.equal(bigRec.body, 'echo 300000');
  assert.equal(server.requests[1]?.body.equals(big), true);
  // head and body in one writev
  assert.deepEqual(
    writes.slice(1).map((w) => w.corked),
    [true, true],
  );
  assert.equal(writes[2]?.bytes, big.length);
  net.Socket.prototype.write = write;
  assert.equal(server.accepted.length, 1);
});

test('keep-alive: sequential requests share one connection; concurrent ones open more, then are reused', async (t) => {
  const server = await rawServer(t, (socket, req) => {
    // a HEAD answer is its head alone: a Content-Length and no body
    if (req.head.startsWith('HEAD ')) socket.write('HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n');
    else respond(socket, `conn ${req.conn} request ${req.n}`);
  });
  const pool = newPool(t, server.origin);
  for (let i = 0; i < 3; i++) assert.equal((await ok(pool)).body, `conn 0 request ${i}`);
  assert.equal(server.accepted.length, 1);
  assert.equal(pool.connections, 1);
  const both = await Promise.all([ok(pool), ok(pool)]);
  assert.deepEqual(both.map((r) => r.body).sort(), ['conn 0 request 3', 'conn 1 request 0']);
  assert.equal(server.accepted.length, 2);
  assert.equal(pool.connections, 2);
  await ok(pool);
  assert.equal(server.accepted.length, 2);
  // HEAD: a Content-Length but no body; the connection stays usable
  const head = await ok(pool, { method: 'HEAD' });
  assert.equal(head.chunks.length, 0);
  assert.equal(server.accepted.length, 2);
});

test('Connection: close, HTTP/1.0 and bytes beyond the response: the connection is not reused; extra bytes in the same read fail the request', async (t) => {
  const server = await rawServer(t, (socket, req) => {
    if (req.head.includes('/close')) respond(socket, 'bye', 'Connection: close\r\n');
    else if (req.head.includes('/old')) socket.write('HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\nold');
    else socket.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA');
  });
  const pool = newPool(t, server.origin);
  assert.equal((await ok(pool, { path: '/close' })).body, 'bye');
  assert.equal((await ok(pool, { path: '/close' })).body, 'bye');
  assert.equal(server.accepted.length, 2);
  assert.equal((await ok(pool, { path: '/old' })).body, 'old');
  assert.equal(server.accepted.length, 3);
  for (let i = 0; i < 2; i++) {
    const extra = await run(pool, { path: '/extra' });
    assert.equal(extra.error?.code, 'LLM_ROUTER_H1_PARSE');
    // the last body bytes were not handed on: the caller could still answer with an error of its own
    assert.equal(extra.body, '');
  }
  assert.equal(server.accepted.length, 5);
  await until('the pool to hold no connection', () => pool.connections === 0);
});

test('keep-alive race: a reused connection the server closed as we wrote gets the request again on a fresh one', async (t) => {
  // each connection answers its first request, then closes when the second arrives, without answering
  const server = await rawServer(t, (socket, req) => {
    if (req.n === 0) respond(socket, `conn ${req.conn}`);
    else socket.destroy();
  });
  const pool = newPool(t, server.origin);
  assert.equal((await ok(pool)).body, 'conn 0');
  assert.equal((await ok(pool)).body, 'conn 1');
  assert.equal(server.accepted.length, 2);
  assert.equal(server.requests.length, 3);
});

test('keep-alive race: a connection the server resets as we write is retried too', async (t) => {
  const server = await rawServer(t, (socket, req) => {
    if (req.n === 0) respond(socket, `conn ${req.conn}`);
    else socket.resetAndDestroy();
  });
  const pool = newPool(t, server.origin);
  assert.equal((await ok(pool)).body, 'conn 0');
  assert.equal((await ok(pool)).body, 'conn 1');
  assert.equal(server.accepted.length, 2);
});

test('no retry on a fresh connection, nor once a response byte arrived', async (t) => {
  const closing = await rawServer(t, (socket) => socket.destroy());
  const pool = newPool(t, closing.origin);
  const rec = await run(pool);
  assert.ok(['UND_ERR_SOCKET', 'ECONNRESET'].includes(rec.error?.code ?? ''), String(rec.error?.code));
  assert.equal(closing.accepted.length, 1);

  const partial = await rawServer(t, (socket, req) => {
    if (req.n === 0) respond(socket, 'first');
    else socket.end('HTTP/1.1 200 OK\r\nContent-Le');
  });
  const pool2 = newPool(t, partial.origin);
  assert.equal((await ok(pool2)).body, 'first');
  const cut = await run(pool2);
  assert.equal(cut.error?.code, 'UND_ERR_SOCKET');
  assert.equal(partial.accepted.length, 1);
});

test('an idle connection the server closes is dropped; the next request opens a new one', async (t) => {
  const server = await rawServer(t, (socket, req) => {
    respond(socket, `conn ${req.conn}`);
    setImmediate(() => socket.end());
  });
  const pool = newPool(t, server.origin);
  assert.equal((await ok(pool)).body, 'conn 0');
  await until('the pool to drop the closed connection', () => pool.connections === 0);
  assert.equal((await ok(pool)).body, 'conn 1');
});

test('on a fake clock: an idle connection closes once keepAliveTimeoutMs is past, or the Keep-Alive: timeout=N the server sent less 500 ms', async (t) => {
  const clock = new FakeClock();
  const server = await rawServer(t, (socket, req) =>
    respond(socket, `conn ${req.conn}`, req.conn === 1 ? 'keep-alive: timeout=1\r\n' : ''),
  );
  const pool = newPool(t, server.origin, { keepAliveTimeoutMs: 4_000, clock });
  await ok(pool);
  await clock.advance(3_999);
  assert.equal(pool.connections, 1, 'kept while its time is not up');
  await clock.advance(1 + 20); // the sweep runs up to 20 ms late, to close sockets expiring together at once
  await until('the idle connection to close', () => pool.connections === 0 && server.closed === 1);

  assert.equal((await ok(pool)).body, 'conn 1');
  await clock.advance(499);
  assert.equal(pool.connections, 1);
  await clock.advance(1 + 20);
  await until('the hinted idle timeout', () => pool.connections === 0 && server.closed === 2);
});

test('on a fake clock: an idle connection past its time is not reused even before the sweep closed it', async (t) => {
  const clock = new FakeClock();
  const server = await rawServer(t, (socket, req) => respond(socket, `conn ${req.conn}`));
  const pool = newPool(t, server.origin, { keepAliveTimeoutMs: 1_000, clock });
  await ok(pool);
  await clock.advance(999);
  assert.equal((await ok(pool)).body, 'conn 0', 'reused within its time');
  await clock.advance(1_000); // the sweep is due 20 ms later
  assert.equal((await ok(pool)).body, 'conn 1');
  await until('the expired connection to close', () => server.closed === 1);
});

test('chunked streams from Node http: all events arrive in order, the connection is reused', async (t) => {
  const events = Array.from({ length: 50 }, (_, i) => `data: {"i":${i},"text":"${'x'.repeat(i)}"}\n\n`);
  const nodeServer = http.createServer(async (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    for (const e of events) {
      res.write(e);
      if (e.length % 7 === 0) await sleep(1); // the server's pace: some events in separate writes
    }
    res.end('data: [DONE]\n\n');
  });
  await new Promise<void>((resolve) => nodeServer.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => nodeServer.close(() => resolve())));
  let sockets = 0;
  nodeServer.on('connection', () => sockets++);
  const pool = newPool(t, `http://127.0.0.1:${(nodeServer.address() as net.AddressInfo).port}`);
  for (let i = 0; i < 2; i++) {
    const rec = await ok(pool, { method: 'POST', headers: ['content-length', '2'], body: Buffer.from('{}') });
    assert.equal(rec.body, events.join('') + 'data: [DONE]\n\n');
  }
  assert.equal(sockets, 1);
  nodeServer.closeAllConnections();
});

test('informational heads are reported before the final one; a 100 Continue nobody asked for is an error', async (t) => {
  const server = await rawServer(t, (socket, req) => {
    const info = req.head.includes('/continue') ? 'HTTP/1.1 100 Continue\r\n\r\n' : 'HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n';
    socket.write(`${info}HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\ndone`);
  });
  const pool = newPool(t, server.origin);
  const rec = await ok(pool);
  assert.deepEqual(
    rec.heads.map((h) => h.status),
    [103, 200],
  );
  assert.equal(rec.body, 'done');
  // the router never sends Expect: 100-continue (undici refuses an unasked-for 100 as well)
  const cont = await run(pool, { path: '/continue' });
  assert.equal(cont.error?.code, 'LLM_ROUTER_H1_PARSE');
});

test('connect refused: Node’s error with its code', async (t) => {
  const probe = net.createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const port = (probe.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  const pool = newPool(t, `http://127.0.0.1:${port}`);
  const rec = await run(pool);
  assert.equal(rec.error?.code, 'ECONNREFUSED');
  await until('no connection left', () => pool.connections === 0);
});

test('connect timeout: a listener whose accept queue is full never completes the handshake', async (t) => {
  // A child process listens with backlog 1 and then blocks its event loop, so it never accepts; once the kernel's
  // accept queue is full, further SYNs are dropped and a connect hangs.
  const child = spawn(
    process.execPath,
    [
      '-e',
      `const s = require('net').createServer(); s.listen(0, '127.0.0.1', 1, () => process.stdout.write(s.address().port + '\\n', () => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0)));`,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  t.after(() => {
    child.kill('SIGKILL');
  });
  const port = await within(
    WAIT_MS,
    'the child to listen',
    new Promise<number>((resolve) => child.stdout.once('data', (d) => resolve(Number(String(d).trim())))),
  );
  const fillers: net.Socket[] = [];
  t.after(() => {
    for (const s of fillers) s.destroy();
  });
  let full = false;
  for (let i = 0; i < 10 && !full; i++) {
    const s = net.connect(port, '127.0.0.1');
    s.on('error', () => undefined);
    fillers.push(s);
    full = !(await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), 500);
      s.once('connect', () => {
        clearTimeout(timer);
        resolve(true);
      });
    }));
  }
  if (!full) {
    t.skip('could not fill the accept queue here');
    return;
  }
  const pool = newPool(t, `http://127.0.0.1:${port}`, { connectTimeoutMs: 150 });
  const started = Date.now();
  const rec = await run(pool);
  assert.equal(rec.error?.code, 'UND_ERR_CONNECT_TIMEOUT');
  assert.ok(Date.now() - started >= 100, `timed out after ${Date.now() - started} ms`);
  await until('no connection left', () => pool.connections === 0);
});

test('on a fake clock: a connect that exceeds connectTimeoutMs fails with UND_ERR_CONNECT_TIMEOUT (a TLS handshake the server never answers)', async (t) => {
  const clock = new FakeClock();
  const server = await rawServer(t, () => assert.fail('no request gets through a handshake that never completes'));
  const pool = newPool(t, `https://127.0.0.1:${server.port}`, { connectTimeoutMs: 2_000, clock });
  const rec = new Recorder();
  pool.dispatch(options(), rec);
  await until('the client hello', () => server.firstData[0] !== undefined);
  await clock.advance(1_999);
  assert.equal(rec.done, false, 'still connecting within the timeout');
  await clock.advance(1);
  await within(WAIT_MS, 'the request', rec.settled);
  assert.equal(rec.error?.code, 'UND_ERR_CONNECT_TIMEOUT');
  assert.deepEqual(rec.violations, []);
  await until('no connection left', () => pool.connections === 0 && server.closed === 1);
});

test('headers timeout: the server says nothing; the socket is closed', async (t) => {
  const server = await rawServer(t, (socket, req) => {
    if (req.head.includes('/quick')) respond(socket, 'quick');
  });
  const pool = newPool(t, server.origin);
  const started = Date.now();
  const rec = await run(pool, { headersTimeout: 150 });
  assert.equal(rec.error?.code, 'UND_ERR_HEADERS_TIMEOUT');
  assert.ok(Date.now() - started >= 100);
  await until('the server to see the connection closed', () => server.closed === 1);
  assert.equal(pool.connections, 0);
  // on a reused connection whose timer already ran out idly after the previous request
  await ok(pool, { path: '/quick', headersTimeout: 100 });
  // time is the subject (the pool has no injectable clock): idle longer than the 100 ms headers timeout
  await sleep(250);
  const again = await run(pool, { headersTimeout: 100 });
  assert.equal(again.error?.code, 'UND_ERR_HEADERS_TIMEOUT');
  assert.equal(server.accepted.length, 2);
});

test('body timeout: the stream stalls; data that arrives in time keeps it going', async (t) => {
  const server = await rawServer(t, (socket, req) => {
    socket.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n');
    if (req.head.includes('/slow-but-steady')) {
      let i = 0;
      const timer = setInterval(() => {
        if (++i < 13) socket.write('1\r\n.\r\n');
        else {
          clearInterval(timer);
          socket.write('0\r\n\r\n');
        }
      }, 200);
      socket.on('close', () => clearInterval(timer));
    }
  });
  const pool = newPool(t, server.origin);
  const rec = await run(pool, { bodyTimeout: 150, headersTimeout: 150 });
  assert.equal(rec.error?.code, 'UND_ERR_BODY_TIMEOUT');
  assert.equal(rec.body, 'first');
  await until('the server to see the connection closed', () => server.closed === 1);
  // 2.6 s in total, but never 1.5 s of silence (the margin is for a busy machine: server and pool share this process)
  const steady = await ok(pool, { path: '/slow-but-steady', bodyTimeout: 1_500, headersTimeout: 1_500 });
  assert.equal(steady.body, 'first' + '.'.repeat(12));
});

test('back-pressure: no data while paused, all of it after resume; a reader paused for the whole body timeout is a stalled reader, not a body timeout', async (t) => {
  const big = Buffer.alloc(4 * 1024 * 1024);
  for (let i = 0; i < big.length; i++) big[i] = i % 251;
  const server = await rawServer(t, (socket, req) => {
    if (req.head.includes('/chunked')) {
      // many small chunks per read
      let out = 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n';
      for (let i = 0; i < 2000; i++) out += `${(10).toString(16)}\r\n${String(i).padStart(10, '0')}\r\n`;
      socket.write(out + '0\r\n\r\n');
    } else {
      socket.write(`HTTP/1.1 200 OK\r\nContent-Length: ${big.length}\r\n\r\n`);
      socket.write(big);
    }
  });
  const pool = newPool(t, server.origin);
  for (const path of ['/length', '/chunked']) {
    const rec = new Recorder();
    let paused = false;
    let pauses = 0;
    rec.onDataResult = () => {
      if (paused) rec.violations.push('onData while paused');
      paused = true;
      pauses++;
      setImmediate(() => {
        paused = false;
        rec.resume();
      });
      return false;
    };
    await run(pool, { path, bodyTimeout: 1_000 }, rec);
    assert.equal(rec.completes, 1, rec.error?.message);
    if (path === '/length') assert.ok(Buffer.concat(rec.chunks).equals(big));
    else assert.equal(rec.body, Array.from({ length: 2000 }, (_, i) => String(i).padStart(10, '0')).join(''));
    assert.equal(pauses, rec.chunks.length);
  }
  assert.equal(server.accepted.length, 1, 'the connection was reused after paused responses');

  // paused in onHeaders, resumed within the body timeout: no timeout, then everything
  const rec = new Recorder();
  rec.onHeadersResult = () => false;
  pool.dispatch(options({ path: '/length', bodyTimeout: 2_000 }), rec);
  await until('the head', () => rec.heads.length === 1);
  await sleep(100);
  assert.deepEqual(rec.errors, []);
  assert.equal(rec.chunks.length, 0);
  rec.resume();
  await within(WAIT_MS, 'the body', rec.settled);
  assert.equal(rec.completes, 1, rec.error?.message);
  assert.ok(Buffer.concat(rec.chunks).equals(big));

  // paused and never resumed: after the body timeout the request ends with the stalled reader's own code (the router's
  // client took nothing for that long; attempt.ts treats it as gone and does not blame the engine), its socket closed
  const stalled = new Recorder();
  stalled.onHeadersResult = () => false;
  const closedBefore = server.closed;
  pool.dispatch(options({ path: '/length', bodyTimeout: 100 }), stalled);
  await within(WAIT_MS, 'the stalled reader is ended', stalled.settled);
  assert.equal(stalled.completes, 0);
  assert.equal((stalled.error as { code?: string } | undefined)?.code, 'LLM_ROUTER_CLIENT_STALLED');
  await until('its connection closed', () => server.closed > closedBefore);
});

test('abort mid-body: onError once with the given error, the socket is closed; abort after the end does nothing', async (t) => {
  const server = await rawServer(t, (socket, req) => {
    if (req.head.includes('/stream')) socket.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n');
    else respond(socket, 'done');
  });
  const pool = newPool(t, server.origin);
  const rec = new Recorder();
  const reason = new Error('client went away');
  rec.onDataResult = () => {
    rec.abort(reason);
    rec.abort(new Error('again'));
    return true;
  };
  await run(pool, { path: '/stream' }, rec);
  assert.deepEqual(rec.errors, [reason]);
  assert.equal(rec.completes, 0);
  await until('the server to see the connection closed', () => server.closed === 1);
  await until('the pool to forget it', () => pool.connections === 0);

  const done = await ok(pool);
  done.abort(new Error('too late'));
  assert.deepEqual(done.errors, []);
  assert.equal(pool.connections, 1);

  // abort before the connection is up, and from inside onConnect
  const early = new Recorder();
  pool.dispatch(options({ path: '/stream' }), early);
  early.abort();
  await within(WAIT_MS, 'the early abort', early.settled);
  assert.equal(early.errors[0]?.message, 'aborted');
  const atOnce = new Recorder();
  atOnce.onConnectHook = () => atOnce.abort(new Error('at once'));
  pool.dispatch(options(), atOnce);
  assert.equal(atOnce.errors[0]?.message, 'at once');
  assert.deepEqual([...early.violations, ...atOnce.violations], []);
});

test('the server resets or closes mid-body: UND_ERR_SOCKET or ECONNRESET', async (t) => {
  const server = await rawServer(t, (socket, req) => {
    socket.write('HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial', () => {
      if (req.head.includes('/reset')) socket.resetAndDestroy();
      else socket.end();
    });
  });
  const pool = newPool(t, server.origin);
  for (const path of ['/reset', '/close']) {
    const rec = await run(pool, { path });
    assert.ok(['UND_ERR_SOCKET', 'ECONNRESET'].includes(rec.error?.code ?? ''), `${path}: ${rec.error?.code}`);
    assert.equal(rec.completes, 0);
  }
  assert.equal(server.accepted.length, 2);
});

test('invalid requests fail before anything is written', async (t) => {
  const server = await rawServer(t, (socket) => respond(socket, 'ok'));
  const pool = newPool(t, server.origin);
  for (const over of [
    { headers: ['x-evil', 'a\r\nInjected: 1'] },
    { headers: ['x-evil', 'a\nb'] },
    { headers: ['x-evil', 'a\0b'] },
    { headers: ['bad name', 'v'] },
    { headers: ['bad\r\nname', 'v'] },
    { path: '/a b' },
    { path: '/a\r\nb' },
    { method: 'GET /x' },
  ] satisfies Partial<H1DispatchOptions>[]) {
    const rec = await run(pool, over);
    assert.ok(rec.error, JSON.stringify(over));
    assert.equal(rec.error.code, 'UND_ERR_INVALID_ARG');
  }
  assert.equal(server.accepted.length, 0);
  assert.equal(pool.connections, 0);
});

test('close() waits for requests in flight and refuses new ones; destroy() fails them at once', async (t) => {
  const held: net.Socket[] = [];
  const server = await rawServer(t, (socket, req) => {
    if (req.head.includes('/quick')) respond(socket, 'quick');
    else held.push(socket);
  });
  const pool = newPool(t, server.origin);
  // two idle connections; the held request takes one of them
  await Promise.all([ok(pool, { path: '/quick' }), ok(pool, { path: '/quick' })]);
  assert.equal(pool.connections, 2);
  const first = new Recorder();
  pool.dispatch(options(), first);
  await until('the server to hold the request', () => held.length === 1);
  let closed = false;
  const closing = pool.close().then(() => (closed = true));
  const refused = await run(pool);
  assert.equal(refused.error?.code, 'UND_ERR_CLOSED');
  // the idle one closes at once, the busy one stays
  await until('the idle connection to close', () => server.closed === 1 && pool.connections === 1);
  // a bounded wait on purpose: close() must not resolve while a request is in flight
  await sleep(50);
  assert.equal(closed, false);
  assert.equal(first.done, false);
  respond(held[0] as net.Socket, 'finally');
  await within(WAIT_MS, 'close()', closing);
  assert.equal(first.completes, 1);
  assert.equal(first.body, 'finally');
  assert.equal(pool.connections, 0);
  await until('the server to see the connections closed', () => server.closed === 2);

  const pool2 = newPool(t, server.origin);
  const inFlight = new Recorder();
  pool2.dispatch(options(), inFlight);
  const other = new Recorder();
  pool2.dispatch(options(), other);
  await until('the server to hold both requests', () => held.length === 3);
  const connecting = new Recorder();
  pool2.dispatch(options(), connecting);
  await within(WAIT_MS, 'destroy()', pool2.destroy());
  for (const rec of [inFlight, other, connecting]) {
    assert.equal(rec.error?.code, 'UND_ERR_DESTROYED');
    assert.equal(rec.errors.length, 1);
    assert.deepEqual(rec.violations, []);
  }
  assert.equal(pool2.connections, 0);
  await until('the server to see those connections closed', () => server.closed >= 4);
  const late = await run(pool2);
  assert.equal(late.error?.code, 'UND_ERR_DESTROYED');
});

test('a connection cap: requests beyond it wait, in arrival order, for a free connection; the cap holds throughout', async (t) => {
  const held: { socket: net.Socket; path: string }[] = [];
  const server = await rawServer(t, (socket, req) => {
    const path = req.head.split(' ')[1] as string;
    if (path.startsWith('/close')) respond(socket, path, 'Connection: close\r\n');
    else held.push({ socket, path });
  });
  const pool = newPool(t, server.origin, { maxConnections: 2 });
  const recs = Array.from({ length: 6 }, () => new Recorder());
  for (const [i, rec] of recs.entries()) pool.dispatch(options({ path: `/r${i}` }), rec);
  await until('the server to hold two requests', () => held.length === 2);
  assert.equal(pool.connections, 2);
  assert.equal(pool.queued, 4);
  // a waiting request that is aborted leaves the queue and never reaches the server
  recs[3]?.abort(new Error('gone'));
  assert.equal(recs[3]?.error?.message, 'gone');
  assert.equal(pool.queued, 3);
  const answered: string[] = [];
  while (answered.length < 5) {
    await until('a held request', () => held.length > 0);
    const next = held.shift() as { socket: net.Socket; path: string };
    answered.push(next.path);
    respond(next.socket, next.path);
    assert.ok(server.accepted.length <= 2, 'never more than two connections');
  }
  await Promise.all(recs.filter((_, i) => i !== 3).map((r) => within(WAIT_MS, 'a queued request', r.settled)));
  assert.deepEqual(answered, ['/r0', '/r1', '/r2', '/r4', '/r5']);
  for (const [i, rec] of recs.entries()) if (i !== 3) assert.equal(rec.body, `/r${i}`);
  assert.equal(server.accepted.length, 2);
  assert.equal(
    server.requests.some((r) => r.head.includes('/r3')),
    false,
  );

  // a connection that closes after its answer frees its place: the next waiting request gets a new one
  const closing = Array.from({ length: 4 }, () => new Recorder());
  for (const [i, rec] of closing.entries()) pool.dispatch(options({ path: `/close${i}` }), rec);
  await Promise.all(closing.map((r) => within(WAIT_MS, 'a request behind a closing connection', r.settled)));
  assert.deepEqual(
    closing.map((r) => r.body),
    ['/close0', '/close1', '/close2', '/close3'],
  );
  assert.equal(pool.queued, 0);

  // destroy() fails the requests still waiting
  const pool2 = newPool(t, server.origin, { maxConnections: 1 });
  const busy = new Recorder();
  const waiting = new Recorder();
  pool2.dispatch(options({ path: '/busy' }), busy);
  pool2.dispatch(options({ path: '/waiting' }), waiting);
  await until('the busy request to be held', () => held.length === 1);
  await within(WAIT_MS, 'destroy()', pool2.destroy());
  assert.deepEqual([busy.error?.code, waiting.error?.code], ['UND_ERR_DESTROYED', 'UND_ERR_DESTROYED']);
  assert.deepEqual([...busy.violations, ...waiting.violations], []);
});
