// GET /events on a real node:http server and real sockets: a snapshot first, then timeline events, state changes and
// heartbeats; a client that stops reading is dropped once what it has not taken passes the bound (the router's memory
// never grows with it) while a reading client goes on; the stream cap and shutdown.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http, { type ServerResponse } from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { once } from 'node:events';
import { EventStream, type StreamOptions } from '../../src/router/server/dashboard/stream.js';
import { Timeline } from '../../src/router/server/dashboard/timeline.js';
import type { DashboardState } from '../../src/router/server/dashboard/view.js';
import { createLogger } from '../../src/router/util/log.js';
import { until, within } from '../support/within.js';

const silent = createLogger({ level: 'silent', format: 'json' });
const BOUND = 64 * 1024;
/** each state differs from the last and is about 100 KB: a client that stops reading falls behind fast */
const STATE_BYTES = 100_000;

/** The states the stream is given: a new one on every call, as when endpoints change. */
class ChangingState {
  calls = 0;
  async state(): Promise<DashboardState> {
    this.calls++;
    return {
      at: Date.now(),
      instance: { version: 't', pid: 1, worker: null, workers: 1, startedAt: 0 },
      models: [],
      endpoints: [],
      kv: null,
      padding: `${this.calls}`.padEnd(STATE_BYTES, '.'),
    } as DashboardState;
  }
}

/** Reads a server-sent event stream over a raw socket; `paused` sockets read nothing at all. */
function openStream(port: number, method = 'GET'): net.Socket {
  const socket = net.connect(port, '127.0.0.1');
  socket.write(`${method} /events HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n`);
  return socket;
}

describe('GET /events', { timeout: 60_000 }, () => {
  const timeline = new Timeline();
  const source = new ChangingState();
  const opts: StreamOptions = { tickMs: 60_000, heartbeatMs: 100, maxClients: 3, maxBufferedBytes: BOUND, snapshotEvents: 10 };
  const stream = new EventStream(source, timeline, silent, opts);
  const responses: ServerResponse[] = [];
  let server: http.Server;
  let port: number;

  before(async () => {
    timeline.add({ type: 'failover', model: 'before', count: 1 });
    stream.start();
    server = http.createServer((req, res) => {
      responses.push(res);
      void stream.handle(req, res);
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    port = (server.address() as AddressInfo).port;
  });
  after(async () => {
    stream.stop();
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  test('a snapshot with the recent timeline, then each event, the changed state and heartbeats', async () => {
    const socket = openStream(port);
    let text = '';
    socket.on('data', (b: Buffer) => {
      text += b.toString('utf8');
    });
    await until('the snapshot', () => text.includes('event: snapshot\n'), 10_000);
    assert.match(text, /^HTTP\/1\.1 200 OK\r\n/);
    assert.match(text, /content-type: text\/event-stream; charset=utf-8\r\n/i);
    assert.match(text, /cache-control: no-store\r\n/i);
    assert.match(text, /retry: 2000\n\n/);
    const snapshot = JSON.parse(/event: snapshot\ndata: (.*)\n\n/.exec(text)![1]!) as { timeline: { model: string }[] };
    assert.deepEqual(
      snapshot.timeline.map((e) => e.model),
      ['before'],
    );
    timeline.add({ type: 'failover', model: 'after', count: 2 });
    await until(
      'the event and the new state',
      () => /event: timeline\ndata: \{[^\n]*"model":"after"/.test(text) && text.includes('event: state\n'),
    );
    await until('a heartbeat', () => text.includes(': heartbeat\n\n'));
    socket.destroy();
    await until('the client is gone', () => stream.connected === 0);
  });

  test('a client that stops reading is dropped at the bound; one that reads gets every event', async () => {
    const reader = openStream(port);
    let received = '';
    reader.on('data', (b: Buffer) => {
      received += b.toString('utf8');
    });
    // node:http writes each frame as one chunk of its chunked encoding, so a frame's text is never split
    const seenEvents = (): number => received.match(/event: timeline\n/g)?.length ?? 0;
    const stalled = openStream(port);
    stalled.pause();
    await until('both connected', () => stream.connected === 2);
    const stalledResponse = responses.at(-1)!;
    let sent = 0;
    let largest = 0;
    while (stream.dropped === 0 && sent < 2_000) {
      timeline.add({ type: 'failover', model: `m${sent++}`, count: 1 });
      // the state frame goes out after the state is computed (a promise): let it
      await new Promise((r) => setImmediate(r));
      largest = Math.max(largest, stalledResponse.writableLength);
    }
    assert.equal(stream.dropped, 1, `dropped after ${sent} events`);
    assert.ok(largest <= BOUND + 2 * STATE_BYTES, `never more than the bound and a frame or two held: ${largest}`);
    assert.ok(stalledResponse.destroyed, 'the router let go of it');
    // what was in flight reaches it when it reads again, and then the end
    const stalledEnded = once(stalled, 'end');
    stalled.resume();
    await within(10_000, 'the stalled client sees its connection end', stalledEnded);
    assert.equal(stream.connected, 1, 'the reader stays');
    await until(`the reader saw all ${sent} events`, () => seenEvents() === sent, 20_000);
    reader.destroy();
    await until('the reader is gone', () => stream.connected === 0);
  });

  test('HEAD answers the head only; beyond the cap 503 too_many_streams; stop() ends every stream', async () => {
    const head = await fetch(`http://127.0.0.1:${port}/events`, { method: 'HEAD' });
    assert.equal(head.status, 200);
    assert.equal(head.headers.get('content-type'), 'text/event-stream; charset=utf-8');
    const open = [openStream(port), openStream(port), openStream(port)];
    const texts = open.map(() => '');
    open.forEach((s, i) => {
      s.on('data', (b: Buffer) => {
        texts[i] += b.toString('utf8');
      });
    });
    await until('three streams', () => stream.connected === 3);
    const refused = await fetch(`http://127.0.0.1:${port}/events`);
    assert.equal(refused.status, 503);
    assert.equal(((await refused.json()) as { error: { code: string } }).error.code, 'too_many_streams');
    stream.stop();
    // the last chunk of the chunked encoding: the answer is over (the connection is then idle, and a server that shuts
    // down closes it)
    await until('every stream ended by stop()', () => texts.every((t) => t.endsWith('\r\n0\r\n\r\n')), 5_000);
    assert.equal(stream.connected, 0);
    for (const s of open) s.destroy();
  });
});

describe('GET /events: the cap holds for connects that arrive together', { timeout: 60_000 }, () => {
  test('N + 5 concurrent connects with a cap of N: exactly N streams, the rest 503 too_many_streams', async () => {
    const N = 4;
    /** the first state takes a while (a peer round under --workers): every connect is admitted before one resolves */
    const slow = {
      async state(): Promise<DashboardState> {
        await new Promise((r) => setTimeout(r, 300));
        return (await new ChangingState().state()) as DashboardState;
      },
    };
    const stream = new EventStream(slow, new Timeline(), silent, {
      tickMs: 60_000,
      heartbeatMs: 60_000,
      maxClients: N,
      maxBufferedBytes: BOUND,
      snapshotEvents: 10,
    });
    stream.start();
    const server = http.createServer((req, res) => void stream.handle(req, res));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const port = (server.address() as AddressInfo).port;
    const sockets = Array.from({ length: N + 5 }, () => openStream(port));
    const texts = sockets.map(() => '');
    sockets.forEach((s, i) => {
      s.on('data', (b: Buffer) => {
        texts[i] += b.toString('utf8');
      });
    });
    try {
      const settled = (t: string): boolean => t.includes('event: snapshot\n') || (t.startsWith('HTTP/1.1 503') && t.includes('}'));
      await until('every connect answered', () => texts.every(settled), 20_000);
      const streams = texts.filter((t) => t.includes('event: snapshot\n')).length;
      const refused = texts.filter((t) => t.startsWith('HTTP/1.1 503') && t.includes('"too_many_streams"')).length;
      assert.equal(streams, N, 'exactly N streams');
      assert.equal(refused, 5, 'the rest refused with too_many_streams');
      assert.equal(stream.connected, N);
    } finally {
      stream.stop();
      for (const s of sockets) s.destroy();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });

  test('stop() also ends a stream still waiting for its first state (under --workers it waits on the other workers)', async () => {
    let release: (() => void) | undefined;
    const slow = {
      state: () =>
        new Promise<DashboardState>((resolve) => {
          release = () => void new ChangingState().state().then(resolve);
        }),
    };
    const waiting = new EventStream(slow, new Timeline(), silent, {
      tickMs: 60_000,
      heartbeatMs: 60_000,
      maxClients: 3,
      maxBufferedBytes: BOUND,
      snapshotEvents: 10,
    });
    waiting.start();
    const server = http.createServer((req, res) => void waiting.handle(req, res));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const socket = openStream((server.address() as AddressInfo).port);
    let text = '';
    socket.on('data', (b: Buffer) => {
      text += b.toString('utf8');
    });
    try {
      await until('the state asked for', () => release !== undefined, 10_000);
      waiting.stop();
      // the chunked stream's last chunk: the answer is over, the connection free to close
      await until('the stream ended', () => text.startsWith('HTTP/1.1 200') && text.endsWith('0\r\n\r\n'), 10_000);
      release?.();
      assert.doesNotMatch(text, /event: snapshot/);
    } finally {
      socket.destroy();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});
