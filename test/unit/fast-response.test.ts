import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import type { Socket } from 'node:net';
import { FastResponse, type ResponseOwner } from '../../src/router/server/fast/response.js';

/** Records every write() as one string, as the kernel would get it. */
class FakeSocket extends EventEmitter {
  writes: string[] = [];
  destroyed = false;
  writableLength = 0;
  writableHighWaterMark = 16_384;
  /** what write() returns (false = back-pressure) */
  accept = true;
  private corked: string[] | undefined;
  write(chunk: Buffer | string, encoding?: BufferEncoding): boolean {
    const text = typeof chunk === 'string' ? Buffer.from(chunk, encoding ?? 'utf8').toString('latin1') : chunk.toString('latin1');
    if (this.corked) this.corked.push(text);
    else this.writes.push(text);
    return this.accept;
  }
  cork(): void {
    this.corked = [];
  }
  uncork(): void {
    this.writes.push((this.corked ?? []).join(''));
    this.corked = undefined;
  }
  destroy(): void {
    this.destroyed = true;
  }
}

function response(keepAlive = true): { res: FastResponse; socket: FakeSocket; done: boolean[] } {
  const socket = new FakeSocket();
  const done: boolean[] = [];
  const owner: ResponseOwner = { responseDone: (k) => done.push(k) };
  return { res: new FastResponse(socket as unknown as Socket, keepAlive, 65, owner), socket, done };
}

const headOf = (wire: string): string => wire.slice(0, wire.indexOf('\r\n\r\n'));
const bodyOf = (wire: string): string => wire.slice(wire.indexOf('\r\n\r\n') + 4);

test('a whole answer with a known length is one write: head, then body', () => {
  const { res, socket, done } = response();
  res.writeHead(200, ['content-type', 'application/json', 'content-length', '2', 'x-request-id', 'r']);
  res.end(Buffer.from('{}'));
  assert.equal(socket.writes.length, 1);
  const wire = socket.writes[0] as string;
  assert.match(
    headOf(wire),
    /^HTTP\/1\.1 200 OK\r\ncontent-type: application\/json\r\ncontent-length: 2\r\nx-request-id: r\r\nDate: .+ GMT\r\nConnection: keep-alive\r\nKeep-Alive: timeout=65$/,
  );
  assert.equal(bodyOf(wire), '{}');
  assert.deepEqual(done, [true]);
  assert.equal(res.writableFinished, true);
});

test('without a length the answer is chunked; each write is framed in one write; end() sends the last chunk', () => {
  const { res, socket } = response();
  res.writeHead(200, ['content-type', 'text/event-stream']);
  res.flushHeaders();
  assert.match(socket.writes[0] as string, /Transfer-Encoding: chunked\r\n\r\n$/);
  res.write(Buffer.from('data: a\n\n'));
  res.write('data: é\n\n');
  res.end();
  assert.deepEqual(socket.writes.slice(1), ['9\r\ndata: a\n\n\r\n', 'a\r\ndata: \xc3\xa9\n\n\r\n', '0\r\n\r\n']);
});

test('the head goes out with the first chunk when nothing flushed it', () => {
  const { res, socket } = response();
  res.writeHead(200, ['content-type', 'text/plain']);
  res.write('hi');
  res.end('!');
  assert.equal(socket.writes.length, 2);
  assert.match(socket.writes[0] as string, /chunked\r\n\r\n2\r\nhi\r\n$/);
  assert.equal(socket.writes[1], '1\r\n!\r\n0\r\n\r\n');
});

test('an error answered with setHeader and end(body) gets its Content-Length, as node:http does', () => {
  const { res, socket } = response();
  res.statusCode = 404;
  res.setHeader('content-type', 'application/json');
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.end('{"error":1}');
  const wire = socket.writes[0] as string;
  assert.match(headOf(wire), /^HTTP\/1\.1 404 Not Found\r\ncontent-type: application\/json; charset=utf-8\r\nDate: /);
  assert.match(headOf(wire), /\r\nContent-Length: 11$/);
  assert.equal(bodyOf(wire), '{"error":1}');
});

test('Connection: close from the handler or the client closes after the answer', () => {
  const a = response();
  a.res.statusCode = 503;
  a.res.setHeader('connection', 'close');
  a.res.end('x');
  assert.match(a.socket.writes[0] as string, /Connection: close\r\n/);
  assert.doesNotMatch(a.socket.writes[0] as string, /keep-alive/i);
  assert.deepEqual(a.done, [false]);
  const b = response(false);
  b.res.end('x');
  assert.match(b.socket.writes[0] as string, /Connection: close\r\n/);
  assert.deepEqual(b.done, [false]);
});

test('204 and 304 get no framing headers and no body framing', () => {
  const { res, socket } = response();
  res.writeHead(204, []);
  res.end();
  assert.doesNotMatch(socket.writes[0] as string, /Transfer-Encoding|Content-Length/);
  assert.ok((socket.writes[0] as string).endsWith('\r\n\r\n'));
});

test('a header value with CR or LF is refused before anything is written (no response splitting)', () => {
  const { res, socket } = response();
  assert.throws(() => res.writeHead(200, ['x-a', 'ok\r\nSet-Cookie: evil=1']), /Invalid character/);
  assert.equal(socket.writes.length, 0);
});

test('back-pressure: write() returns false and drain is passed on once the socket drains', () => {
  const { res, socket } = response();
  res.writeHead(200, ['content-type', 'text/event-stream']);
  socket.accept = false;
  assert.equal(res.write('data: 1\n\n'), false);
  let drained = 0;
  res.on('drain', () => drained++);
  socket.emit('drain');
  socket.emit('drain');
  assert.equal(drained, 1);
});

test('a closed connection says close once, and nothing is written after it', () => {
  const { res, socket } = response();
  let closes = 0;
  res.on('close', () => closes++);
  res.writeHead(200, ['content-type', 'text/event-stream']);
  res.flushHeaders();
  res.connectionClosed();
  res.connectionClosed();
  assert.equal(closes, 1);
  assert.equal(res.destroyed, true);
  assert.equal(res.write('late'), false);
  res.end('late');
  assert.equal(socket.writes.length, 1);
});
