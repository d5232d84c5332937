import { test } from 'node:test';
import assert from 'node:assert/strict';
import { downstreamResponseHeaders, upstreamRequestHeaders } from '../../src/router/proxy/headers.js';

test('hop-by-hop, host, length and client credentials are not forwarded; the engine key is', () => {
  const raw = [
    'Host',
    'router',
    'Connection',
    'keep-alive, X-Secret-Hop',
    'X-Secret-Hop',
    '1',
    'Authorization',
    'Bearer client',
    'Content-Length',
    '10',
    'X-Request-Id',
    'abc',
    'Accept',
    'text/event-stream',
    'TE',
    'trailers',
  ];
  const out = upstreamRequestHeaders(raw, {
    requestId: 'rid',
    contentLength: 12,
    engineAuthorization: 'Bearer engine',
    forwardClientAuth: false,
  });
  assert.deepEqual(out, ['Accept', 'text/event-stream', 'content-length', '12', 'x-request-id', 'rid', 'authorization', 'Bearer engine']);
  const passed = upstreamRequestHeaders(raw, {
    requestId: 'rid',
    contentLength: 12,
    engineAuthorization: undefined,
    forwardClientAuth: true,
  });
  assert.ok(passed.includes('Bearer client'));
  const dropped = upstreamRequestHeaders(raw, {
    requestId: 'rid',
    contentLength: 12,
    engineAuthorization: undefined,
    forwardClientAuth: false,
  });
  assert.ok(!dropped.some((h) => h.toLowerCase() === 'authorization'));
});

test('engine response headers pass except hop-by-hop; x-request-id is the router one', () => {
  const raw = [
    'content-type',
    'text/event-stream',
    'transfer-encoding',
    'chunked',
    'x-engine',
    'v',
    'x-request-id',
    'other',
    'set-cookie',
    'a=1',
    'set-cookie',
    'b=2',
  ].map((s) => Buffer.from(s));
  const head = downstreamResponseHeaders(raw, 'rid');
  assert.equal(head.contentType, 'text/event-stream');
  assert.deepEqual(head.headers, [
    'content-type',
    'text/event-stream',
    'x-engine',
    'v',
    'set-cookie',
    'a=1',
    'set-cookie',
    'b=2',
    'x-request-id',
    'rid',
  ]);
});

test('the engine’s framing is never passed on: its length is reported, and contradictory framing is flagged', () => {
  const h = (...pairs: string[]) =>
    downstreamResponseHeaders(
      pairs.map((x) => Buffer.from(x, 'latin1')),
      'rid',
    );
  const plain = h('Content-Type', 'application/json', 'Content-Length', '42');
  assert.deepEqual(plain.headers, ['Content-Type', 'application/json', 'x-request-id', 'rid']);
  assert.deepEqual([plain.contentLength, plain.transferEncoding, plain.badFraming], [42, false, false]);
  const chunked = h('Transfer-Encoding', 'chunked');
  assert.deepEqual([chunked.contentLength, chunked.transferEncoding, chunked.badFraming], [-1, true, false]);
  for (const bad of [
    h('Content-Length', '4', 'Transfer-Encoding', 'chunked'),
    h('Content-Length', '4', 'Content-Length', '4'),
    h('Content-Length', '4, 4'),
    h('Content-Length', ' 4x'),
    h('Transfer-Encoding', 'gzip'),
    h('Transfer-Encoding', 'chunked', 'Transfer-Encoding', 'chunked'),
  ]) {
    assert.equal(bad.badFraming, true);
    assert.equal(bad.contentLength, -1);
    assert.ok(!bad.headers.some((x) => /^(content-length|transfer-encoding)$/i.test(x)));
  }
});
