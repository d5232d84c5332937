import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseRequestHead, type HeadLimits, type RequestHead } from '../../src/router/server/fast/request-head.js';

const limits: HeadLimits = { maxHeadBytes: 16 * 1024, maxBodyBytes: 1000, paths: new Set(['/v1/chat/completions', '/v1/completions']) };
const BODY = '{"model":"m"}';

function head(lines: readonly string[], body = BODY): Buffer {
  return Buffer.from(`${lines.join('\r\n')}\r\n\r\n${body}`, 'latin1');
}

function accepted(buf: Buffer, l: HeadLimits = limits): RequestHead {
  const r = parseRequestHead(buf, l);
  assert.equal(typeof r, 'object', `expected an accepted head, got ${String(r)}`);
  return r as RequestHead;
}

test('a plain request is accepted with its headers, length and body offset', () => {
  const buf = head([
    'POST /v1/chat/completions?x=1 HTTP/1.1',
    'Host: r',
    'Content-Type:  application/json  ',
    `Content-Length: ${BODY.length}`,
    'X-Request-Id: abc',
  ]);
  const h = accepted(buf);
  assert.equal(h.url, '/v1/chat/completions?x=1');
  assert.equal(h.path, '/v1/chat/completions');
  assert.equal(h.contentLength, BODY.length);
  assert.equal(h.keepAlive, true);
  assert.deepEqual(h.rawHeaders, [
    'Host',
    'r',
    'Content-Type',
    'application/json',
    'Content-Length',
    String(BODY.length),
    'X-Request-Id',
    'abc',
  ]);
  assert.equal(h.headers['content-type'], 'application/json');
  assert.equal(h.headers['x-request-id'], 'abc');
  assert.equal(buf.subarray(h.bodyStart).toString(), BODY);
});

test('Connection: close is honoured, keep-alive is the default', () => {
  assert.equal(accepted(head(['POST /v1/completions HTTP/1.1', 'Host: r', 'Connection: Close', 'Content-Length: 13'])).keepAlive, false);
  assert.equal(
    accepted(head(['POST /v1/completions HTTP/1.1', 'Host: r', 'connection: keep-alive', 'Content-Length: 13'])).keepAlive,
    true,
  );
});

test('a head that has not fully arrived is incomplete, at every split point', () => {
  const buf = head(['POST /v1/completions HTTP/1.1', 'Host: r', 'Content-Length: 13']);
  const end = buf.indexOf('\r\n\r\n') + 4;
  for (let i = 0; i < end; i++) assert.equal(parseRequestHead(buf.subarray(0, i), limits), 'incomplete', `split at ${i}`);
  // the body need not have arrived: the caller waits for it
  assert.equal(accepted(buf.subarray(0, end)).contentLength, 13);
});

test('everything outside the strict subset goes to node:http', () => {
  const cases: Record<string, Buffer> = {
    GET: head(['GET /v1/completions HTTP/1.1', 'Content-Length: 13']),
    HEAD: head(['HEAD /v1/completions HTTP/1.1', 'Content-Length: 13']),
    'lower-case method': head(['post /v1/completions HTTP/1.1', 'Content-Length: 13']),
    'HTTP/1.0': head(['POST /v1/completions HTTP/1.0', 'Content-Length: 13']),
    'another path': head(['POST /v1/models HTTP/1.1', 'Content-Length: 13']),
    'absolute form': head(['POST http://x/v1/completions HTTP/1.1', 'Content-Length: 13']),
    'double space': head(['POST  /v1/completions HTTP/1.1', 'Content-Length: 13']),
    'space in target': head(['POST /v1/completions x HTTP/1.1', 'Content-Length: 13']),
    'no length': head(['POST /v1/completions HTTP/1.1', 'Host: x']),
    'lengths in a differently cased pair': head(['POST /v1/completions HTTP/1.1', 'Host: x', 'content-length: 13', 'CONTENT-LENGTH: 13']),
    chunked: head(['POST /v1/completions HTTP/1.1', 'Transfer-Encoding: chunked']),
    'length and chunked': head(['POST /v1/completions HTTP/1.1', 'Content-Length: 13', 'Transfer-Encoding: chunked']),
    'two lengths': head(['POST /v1/completions HTTP/1.1', 'Content-Length: 13', 'Content-Length: 13']),
    'signed length': head(['POST /v1/completions HTTP/1.1', 'Content-Length: +13']),
    'length list': head(['POST /v1/completions HTTP/1.1', 'Content-Length: 13, 13']),
    'body over the limit': head(['POST /v1/completions HTTP/1.1', 'Content-Length: 1001']),
    expect: head(['POST /v1/completions HTTP/1.1', 'Content-Length: 13', 'Expect: 100-continue']),
    upgrade: head(['POST /v1/completions HTTP/1.1', 'Content-Length: 13', 'Upgrade: h2c']),
    'connection with tokens': head(['POST /v1/completions HTTP/1.1', 'Content-Length: 13', 'Connection: keep-alive, x-hop']),
    'repeated header': head(['POST /v1/completions HTTP/1.1', 'Content-Length: 13', 'Accept: a', 'accept: b']),
    'obs-fold': head(['POST /v1/completions HTTP/1.1', 'Content-Length: 13', 'X-A: a', ' folded']),
    'space before colon': head(['POST /v1/completions HTTP/1.1', 'Content-Length : 13']),
    'no colon': head(['POST /v1/completions HTTP/1.1', 'Content-Length: 13', 'garbage']),
    'empty name': head(['POST /v1/completions HTTP/1.1', 'Content-Length: 13', ': x']),
    'bare LF inside': Buffer.from('POST /v1/completions HTTP/1.1\r\nContent-Length: 13\nX: y\r\n\r\n' + BODY, 'latin1'),
    'bare CR inside': Buffer.from('POST /v1/completions HTTP/1.1\r\nX: a\rb\r\nContent-Length: 13\r\n\r\n' + BODY, 'latin1'),
    'NUL in a value': head(['POST /v1/completions HTTP/1.1', 'Content-Length: 13', 'X: a\0b']),
    'leading empty line': Buffer.from('\r\nPOST /v1/completions HTTP/1.1\r\nHost: r\r\nContent-Length: 13\r\n\r\n' + BODY, 'latin1'),
    'no Host': head(['POST /v1/completions HTTP/1.1', 'Content-Length: 13']),
    'two Hosts': head(['POST /v1/completions HTTP/1.1', 'Host: a', 'Content-Length: 13', 'host: a']),
    'a tab after the length': head(['POST /v1/completions HTTP/1.1', 'Host: r', 'Content-Length: 13\t']),
    'a tab before the length': head(['POST /v1/completions HTTP/1.1', 'Host: r', 'Content-Length:\t13']),
    'a tab inside a value': head(['POST /v1/completions HTTP/1.1', 'Host: r', 'Content-Length: 13', 'X-A: a\tb']),
    'DEL in a value': head(['POST /v1/completions HTTP/1.1', 'Host: r', 'Content-Length: 13', 'X-A: a\x7f']),
    'HTTP/2.0': head(['POST /v1/completions HTTP/2.0', 'Host: r', 'Content-Length: 13']),
    'too many header lines': head([
      'POST /v1/completions HTTP/1.1',
      'Host: r',
      'Content-Length: 13',
      ...Array.from({ length: 100 }, (_, i) => `X-${i}: ${i}`),
    ]),
  };
  for (const [name, buf] of Object.entries(cases)) assert.equal(parseRequestHead(buf, limits), 'other', name);
});

test('a head over the size limit goes to node:http (which answers 431), complete or not', () => {
  const small: HeadLimits = { ...limits, maxHeadBytes: 100 };
  const big = head(['POST /v1/completions HTTP/1.1', 'Host: r', 'Content-Length: 13', `X-Big: ${'a'.repeat(200)}`]);
  assert.equal(parseRequestHead(big, small), 'other');
  assert.equal(parseRequestHead(big.subarray(0, 150), small), 'other');
  assert.equal(parseRequestHead(big.subarray(0, 50), small), 'incomplete');
});

test('header values keep bytes above 0x7f and spaces inside', () => {
  const h = accepted(head(['POST /v1/completions HTTP/1.1', 'Host: r', 'Content-Length: 13', 'X-Name: caf\xe9 au  lait ']));
  assert.equal(h.headers['x-name'], 'caf\xe9 au  lait');
  // 99 header lines are still the fast path's
  accepted(
    head(['POST /v1/completions HTTP/1.1', 'Host: r', 'Content-Length: 13', ...Array.from({ length: 97 }, (_, i) => `X-${i}: ${i}`)]),
  );
});
