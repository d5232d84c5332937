import { test } from 'node:test';
import assert from 'node:assert/strict';
import { downstreamResponseHeaders, upstreamRequestHeaders } from '../../src/proxy/headers.js';

test('hop-by-hop, host, length and client credentials are not forwarded; the engine key is', () => {
  const raw = ['Host', 'router', 'Connection', 'keep-alive, X-Secret-Hop', 'X-Secret-Hop', '1', 'Authorization', 'Bearer client', 'Content-Length', '10', 'X-Request-Id', 'abc', 'Accept', 'text/event-stream', 'TE', 'trailers'];
  const out = upstreamRequestHeaders(raw, { requestId: 'rid', contentLength: 12, engineAuthorization: 'Bearer engine', forwardClientAuth: false });
  assert.deepEqual(out, ['Accept', 'text/event-stream', 'content-length', '12', 'x-request-id', 'rid', 'authorization', 'Bearer engine']);
  const passed = upstreamRequestHeaders(raw, { requestId: 'rid', contentLength: 12, engineAuthorization: undefined, forwardClientAuth: true });
  assert.ok(passed.includes('Bearer client'));
  const dropped = upstreamRequestHeaders(raw, { requestId: 'rid', contentLength: 12, engineAuthorization: undefined, forwardClientAuth: false });
  assert.ok(!dropped.some((h) => h.toLowerCase() === 'authorization'));
});

test('engine response headers pass except hop-by-hop; x-request-id is the router one', () => {
  const raw = ['content-type', 'text/event-stream', 'transfer-encoding', 'chunked', 'x-engine', 'v', 'x-request-id', 'other', 'set-cookie', 'a=1', 'set-cookie', 'b=2'].map((s) => Buffer.from(s));
  const head = downstreamResponseHeaders(raw, 'rid');
  assert.equal(head.contentType, 'text/event-stream');
  assert.deepEqual(head.headers, ['content-type', 'text/event-stream', 'x-engine', 'v', 'set-cookie', 'a=1', 'set-cookie', 'b=2', 'x-request-id', 'rid']);
});
