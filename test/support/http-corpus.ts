// The differential corpus of issue 14: request bytes a client may send the router, and response bytes an engine may
// send it, each run against the router's own parser and the reference parser on the same bytes
// (test/integration/http-differential.test.ts). Plain data: what each case means is in its name.
import { INFERENCE_PATHS } from '../../src/router/server/pipeline.js';

export const MODEL = 'diff';
const BODY = JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] });

export interface InboundCase {
  readonly name: string;
  /** written one after another, with a pause between them, so that the router likely reads them apart */
  readonly pieces: readonly Buffer[];
}

function b(text: string): Buffer {
  return Buffer.from(text, 'latin1');
}

/** A request from its lines (request line and headers) and body; Content-Length is the caller's business. */
function raw(lines: readonly string[], body = '', eol = '\r\n'): Buffer {
  return b(`${lines.join(eol)}${eol}${eol}${body}`);
}

/** A valid inference request with `extra` header lines (Content-Length last, computed unless `length` is given). */
export function post(
  opts: {
    path?: string;
    extra?: readonly string[];
    body?: string;
    length?: string;
    host?: readonly string[];
    version?: string;
    id?: string;
  } = {},
): Buffer {
  const body = opts.body ?? BODY;
  const lines = [
    `POST ${opts.path ?? '/v1/chat/completions'} ${opts.version ?? 'HTTP/1.1'}`,
    ...(opts.host ?? ['Host: router']).map((h) => h),
    'Content-Type: application/json',
    ...(opts.id ? [`X-Request-Id: ${opts.id}`] : []),
    ...(opts.extra ?? []),
    `Content-Length: ${opts.length ?? String(Buffer.byteLength(body))}`,
  ];
  return raw(lines, body);
}

function chunkedPost(chunks: readonly string[], opts: { te?: string; extra?: readonly string[] } = {}): Buffer {
  const lines = [
    'POST /v1/chat/completions HTTP/1.1',
    'Host: router',
    'Content-Type: application/json',
    ...(opts.extra ?? []),
    `Transfer-Encoding: ${opts.te ?? 'chunked'}`,
  ];
  return raw(lines, chunks.join(''));
}

function chunksOf(body: string, size: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < body.length; i += size) {
    const part = body.slice(i, i + size);
    out.push(`${Buffer.byteLength(part).toString(16)}\r\n${part}\r\n`);
  }
  out.push('0\r\n\r\n');
  return out;
}

/** Every way to write `bytes` in two pieces. */
function everySplit(name: string, bytes: Buffer): InboundCase[] {
  const out: InboundCase[] = [];
  for (let i = 1; i < bytes.length; i++) out.push({ name: `${name}, split at ${i}`, pieces: [bytes.subarray(0, i), bytes.subarray(i)] });
  return out;
}

/** Request bytes a client may send; most are not valid HTTP/1.1, or are valid in ways the fast path does not take. */
export function inboundCases(): { handwritten: InboundCase[]; splits: InboundCase[] } {
  const one = (name: string, bytes: Buffer): InboundCase => ({ name, pieces: [bytes] });
  const cases: InboundCase[] = [
    one('a plain request', post()),
    one('a plain request with a request id', post({ id: 'client-id-1' })),
    one('a query string', post({ path: '/v1/chat/completions?x=1&y=%20' })),
    ...INFERENCE_PATHS.filter((p) => p !== '/v1/chat/completions').map((p) => one(`path ${p}`, post({ path: p }))),
    one('Connection: close', post({ extra: ['Connection: close'] })),
    one('Connection: keep-alive', post({ extra: ['Connection: keep-alive'] })),
    one('Connection: Keep-Alive, close', post({ extra: ['Connection: Keep-Alive, close'] })),
    one('Connection naming another header', post({ extra: ['Connection: x-hop', 'X-Hop: 1'] })),
    one('Connection: upgrade with Upgrade', post({ extra: ['Connection: upgrade', 'Upgrade: h2c'] })),
    one('Expect: 100-continue', post({ extra: ['Expect: 100-continue'] })),
    one('Expect: something else', post({ extra: ['Expect: something'] })),
    one('Authorization (dropped by default)', post({ extra: ['Authorization: Bearer client-secret'] })),
    one('x-api-key (dropped by default)', post({ extra: ['x-api-key: client-secret'] })),
    one('TE: trailers (hop-by-hop)', post({ extra: ['TE: trailers'] })),
    one('bytes above 0x7f in a value', post({ extra: ['X-Name: caf\xe9 \xff'] })),
    one('spaces around a value', post({ extra: ['X-Pad:    padded   '] })),
    one('an empty value', post({ extra: ['X-Empty:'] })),
    one('no space after the colon', post({ extra: ['X-Tight:tight'] })),
    one('odd but valid token characters in a name', post({ extra: ["X-!#$%&'*+.^_`|~: v"] })),
    one('a repeated header', post({ extra: ['Accept: a', 'accept: b'] })),
    one('a repeated x-request-id', post({ extra: ['X-Request-Id: one', 'X-Request-Id: two'] })),
    one('99 header lines', post({ extra: Array.from({ length: 95 }, (_, i) => `X-H${i}: ${i}`) })),
    one('120 header lines', post({ extra: Array.from({ length: 120 }, (_, i) => `X-H${i}: ${i}`) })),
    one('a head over 16 KiB', post({ extra: [`X-Big: ${'a'.repeat(17_000)}`] })),
    one('a head just under 16 KiB', post({ extra: [`X-Big: ${'a'.repeat(15_900)}`] })),
    // Content-Length
    one('Content-Length followed by a tab', post({ length: `${Buffer.byteLength(BODY)}\t` })),
    one('Content-Length preceded by a tab', post({ length: `\t${Buffer.byteLength(BODY)}` })),
    one('Content-Length with spaces around', post({ length: `  ${Buffer.byteLength(BODY)}  ` })),
    one('Content-Length with a plus sign', post({ length: `+${Buffer.byteLength(BODY)}` })),
    one('Content-Length with leading zeros', post({ length: `000${Buffer.byteLength(BODY)}` })),
    one('Content-Length as a list of the same value', post({ length: `${Buffer.byteLength(BODY)}, ${Buffer.byteLength(BODY)}` })),
    one('Content-Length in hex', post({ length: `0x${Buffer.byteLength(BODY).toString(16)}` })),
    one('Content-Length negative', post({ length: '-1' })),
    one('Content-Length empty', post({ length: '' })),
    one('Content-Length with letters', post({ length: `${Buffer.byteLength(BODY)}abc` })),
    one('Content-Length beyond the body limit', post({ length: '99999999' })),
    one('Content-Length 20 digits', post({ length: '99999999999999999999' })),
    one('two equal Content-Length headers', post({ extra: [`Content-Length: ${Buffer.byteLength(BODY)}`] })),
    one('two different Content-Length headers', post({ extra: ['Content-Length: 3'] })),
    one('Content-Length shorter than the body (the rest is a next request)', post({ length: String(Buffer.byteLength(BODY) - 5) })),
    one('Content-Length longer than the body (the next bytes are body)', post({ length: String(Buffer.byteLength(BODY) + 3) })),
    one('Content-Length 0', post({ body: '', length: '0' })),
    one('no Content-Length and no body', raw(['POST /v1/chat/completions HTTP/1.1', 'Host: router', 'Content-Type: application/json'])),
    // Transfer-Encoding
    one('chunked', chunkedPost(chunksOf(BODY, 16))),
    one('chunked in one chunk', chunkedPost(chunksOf(BODY, 1000))),
    one('chunked with a chunk extension', chunkedPost([`${Buffer.byteLength(BODY).toString(16)};ext=1\r\n${BODY}\r\n`, '0\r\n\r\n'])),
    one('chunked with a trailer', chunkedPost([`${Buffer.byteLength(BODY).toString(16)}\r\n${BODY}\r\n`, '0\r\nX-Trailer: t\r\n\r\n'])),
    one(
      'chunked with an upper-case size',
      chunkedPost([`${Buffer.byteLength(BODY).toString(16).toUpperCase()}\r\n${BODY}\r\n`, '0\r\n\r\n']),
    ),
    one('chunked with a bad size', chunkedPost(['zz\r\nabc\r\n0\r\n\r\n'])),
    one('chunked with LF line ends', chunkedPost([`${Buffer.byteLength(BODY).toString(16)}\n${BODY}\n`, '0\n\n'])),
    one('chunked with data longer than its size', chunkedPost([`2\r\n${BODY}\r\n`, '0\r\n\r\n'])),
    one('Transfer-Encoding: Chunked (case)', chunkedPost(chunksOf(BODY, 16), { te: 'Chunked' })),
    one('Transfer-Encoding: chunked with a trailing space', chunkedPost(chunksOf(BODY, 16), { te: 'chunked ' })),
    one('Transfer-Encoding: gzip, chunked', chunkedPost(chunksOf(BODY, 16), { te: 'gzip, chunked' })),
    one('Transfer-Encoding: chunked, gzip', chunkedPost(chunksOf(BODY, 16), { te: 'chunked, gzip' })),
    one('Transfer-Encoding: identity', chunkedPost([BODY], { te: 'identity' })),
    one('Transfer-Encoding twice', chunkedPost(chunksOf(BODY, 16), { extra: ['Transfer-Encoding: chunked'] })),
    one('Transfer-Encoding and Content-Length', chunkedPost(chunksOf(BODY, 16), { extra: ['Content-Length: 5'] })),
    one('Transfer-Encoding with a tab before the value', chunkedPost(chunksOf(BODY, 16), { te: '\tchunked' })),
    // Host
    one('no Host', post({ host: [] })),
    // found by the property test: the refusal closes the connection, so the stray byte is never read (one answer)
    one('no Host, then a stray byte after the body', Buffer.concat([post({ host: [] }), b('\x7f')])),
    one('two Hosts, then junk after the body', Buffer.concat([post({ host: ['Host: a', 'Host: b'] }), b('junk')])),
    one('two Hosts', post({ host: ['Host: a', 'Host: a'] })),
    one('two Hosts that differ', post({ host: ['Host: a', 'host: b'] })),
    one('an empty Host', post({ host: ['Host:'] })),
    one('Host with a port', post({ host: ['Host: router:8001'] })),
    one('Host with a tab', post({ host: ['Host:\trouter'] })),
    // versions and request lines
    one('HTTP/1.0 without Host', post({ version: 'HTTP/1.0', host: [] })),
    one('HTTP/1.0 with Connection: keep-alive', post({ version: 'HTTP/1.0', extra: ['Connection: keep-alive'] })),
    one('HTTP/2.0', post({ version: 'HTTP/2.0' })),
    one('HTTP/0.9', post({ version: 'HTTP/0.9' })),
    one('HTTP/1.2', post({ version: 'HTTP/1.2' })),
    one('HTTP/3.0', post({ version: 'HTTP/3.0' })),
    one('http/1.1 in lower case', post({ version: 'http/1.1' })),
    one('HTTP/1.1 with a trailing space', post({ version: 'HTTP/1.1 ' })),
    one('no version', raw(['POST /v1/chat/completions', 'Host: router', `Content-Length: ${Buffer.byteLength(BODY)}`], BODY)),
    one(
      'two spaces after the method',
      raw(['POST  /v1/chat/completions HTTP/1.1', 'Host: router', `Content-Length: ${Buffer.byteLength(BODY)}`], BODY),
    ),
    one(
      'a tab after the method',
      raw(['POST\t/v1/chat/completions HTTP/1.1', 'Host: router', `Content-Length: ${Buffer.byteLength(BODY)}`], BODY),
    ),
    one(
      'a lower-case method',
      raw(['post /v1/chat/completions HTTP/1.1', 'Host: router', `Content-Length: ${Buffer.byteLength(BODY)}`], BODY),
    ),
    one('absolute-form target', post({ path: 'http://router/v1/chat/completions' })),
    one('a target with odd characters', post({ path: '/v1/chat/completions?q="{}|\\^`<>' })),
    one('a target with a fragment', post({ path: '/v1/chat/completions#frag' })),
    one('a target with bytes above 0x7f', post({ path: '/v1/chat/completions?\xe9' })),
    one('a target of *', post({ path: '*' })),
    one('a target with no slash', post({ path: 'v1/chat/completions' })),
    one('a double slash', post({ path: '//v1/chat/completions' })),
    one('an empty line first', Buffer.concat([b('\r\n'), post()])),
    one('two empty lines first', Buffer.concat([b('\r\n\r\n'), post()])),
    one('an empty line after the body', Buffer.concat([post(), b('\r\n')])),
    // header syntax
    one('obs-fold', post({ extra: ['X-Fold: a', ' folded'] })),
    one('a space before the colon', post({ extra: ['X-Space : v'] })),
    one('a line without a colon', post({ extra: ['garbage'] })),
    one('an empty header name', post({ extra: [': v'] })),
    one('a name with @', post({ extra: ['X@A: v'] })),
    one('a name with bytes above 0x7f', post({ extra: ['X-\xe9: v'] })),
    one('NUL in a value', post({ extra: ['X-Nul: a\x00b'] })),
    one('DEL in a value', post({ extra: ['X-Del: a\x7fb'] })),
    one('a tab inside a value', post({ extra: ['X-Tab: a\tb'] })),
    one('a tab after a value', post({ extra: ['X-Tab: ab\t'] })),
    one('a bare CR inside a value', post({ extra: ['X-CR: a\rb'] })),
    one(
      'a bare LF between headers',
      b(`POST /v1/chat/completions HTTP/1.1\r\nHost: router\nX-A: b\r\nContent-Length: ${Buffer.byteLength(BODY)}\r\n\r\n${BODY}`),
    ),
    one(
      'LF line ends throughout',
      raw(['POST /v1/chat/completions HTTP/1.1', 'Host: router', `Content-Length: ${Buffer.byteLength(BODY)}`], BODY, '\n'),
    ),
    one('a head that never ends (then the sentinel completes it)', b('POST /v1/chat/completions HTTP/1.1\r\nHost: router\r\nX-Open: ')),
    // bodies and routes
    one('a body that is not JSON', post({ body: '{not json' })),
    one('a body with no model', post({ body: '{"messages":[]}' })),
    one('a model nobody serves', post({ body: '{"model":"other"}' })),
    one('a body over the limit', post({ body: JSON.stringify({ model: MODEL, pad: 'x'.repeat(5000) }) })),
    one('GET /v1/models', raw(['GET /v1/models HTTP/1.1', 'Host: router'])),
    one('GET /health', raw(['GET /health HTTP/1.1', 'Host: router'])),
    one('HEAD /health', raw(['HEAD /health HTTP/1.1', 'Host: router'])),
    one('GET on an inference path', raw(['GET /v1/chat/completions HTTP/1.1', 'Host: router'])),
    one('OPTIONS *', raw(['OPTIONS * HTTP/1.1', 'Host: router'])),
    one('an unknown path', post({ path: '/v1/other' })),
    // pipelining
    one('two requests in one write', Buffer.concat([post({ id: 'p1' }), post({ id: 'p2' })])),
    one('a request, then junk', Buffer.concat([post({ id: 'p1' }), b('JUNK\r\n\r\n')])),
    one('a request, then a bad one', Buffer.concat([post({ id: 'p1' }), post({ length: '5\t' })])),
    one('a request, then a chunked one', Buffer.concat([post({ id: 'p1' }), chunkedPost(chunksOf(BODY, 16))])),
    one('a request, then GET /health', Buffer.concat([post({ id: 'p1' }), raw(['GET /health HTTP/1.1', 'Host: router'])])),
    one('a request line with no headers, then junk', b('POST /v1/chat/completions HTTP/1.1\r\n\r\nJUNK\r\n\r\n')),
    { name: 'a request in three pieces', pieces: [post().subarray(0, 17), post().subarray(17, 60), post().subarray(60)] },
    {
      name: 'a request a byte at a time (head)',
      pieces: [...[...post().subarray(0, 40)].map((c): Buffer => Buffer.from([c])), post().subarray(40)],
    },
  ];
  const splits = [
    ...everySplit('a plain request', post({ id: 'split' })),
    ...everySplit('a chunked request', chunkedPost(chunksOf(BODY, 24))),
    ...everySplit(
      'two pipelined requests',
      Buffer.concat([post({ id: 'pipe-1', body: '{"model":"diff"}' }), post({ id: 'pipe-2', body: '{"model":"diff"}' })]),
    ),
  ];
  return { handwritten: cases, splits };
}

// ---- engine side ----

export interface EngineCase {
  readonly name: string;
  /** what the engine writes, piece by piece with a pause between */
  readonly pieces: readonly Buffer[];
}

const SSE_EVENTS = [
  'data: {"choices":[{"delta":{"content":"Hel"}}]}\n\n',
  'data: {"choices":[{"delta":{"content":"lo"}}]}\n\n',
  'data: [DONE]\n\n',
];
const JSON_ANSWER = '{"id":"x","object":"chat.completion","choices":[]}';

function chunked(parts: readonly string[]): string {
  return parts.map((p) => `${Buffer.byteLength(p).toString(16)}\r\n${p}\r\n`).join('') + '0\r\n\r\n';
}

/** A chunked event stream, as vLLM sends one. */
export const SSE_RESPONSE = b(
  `HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n${chunked(SSE_EVENTS)}`,
);
/** A JSON answer with a length. */
export const JSON_RESPONSE = b(
  `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${JSON_ANSWER.length}\r\n\r\n${JSON_ANSWER}`,
);

/** Response bytes an engine may send; many break HTTP/1.1's framing rules. */
export function engineCases(): { handwritten: EngineCase[]; splits: EngineCase[] } {
  const one = (name: string, text: string): EngineCase => ({ name, pieces: [b(text)] });
  const head = 'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n';
  const J = JSON_ANSWER;
  const cases: EngineCase[] = [
    { name: 'a JSON answer with a length', pieces: [JSON_RESPONSE] },
    { name: 'a chunked event stream', pieces: [SSE_RESPONSE] },
    one('a chunked JSON answer', `${head}transfer-encoding: chunked\r\n\r\n${chunked([J.slice(0, 10), J.slice(10)])}`),
    one('chunked with leading zeros in a size', `${head}transfer-encoding: chunked\r\n\r\n00${J.length.toString(16)}\r\n${J}\r\n0\r\n\r\n`),
    one(
      'chunked with an upper-case size',
      `${head}transfer-encoding: chunked\r\n\r\n${J.length.toString(16).toUpperCase()}\r\n${J}\r\n0\r\n\r\n`,
    ),
    one('chunked with a trailer', `${head}transfer-encoding: chunked\r\n\r\n${J.length.toString(16)}\r\n${J}\r\n0\r\nX-Trailer: t\r\n\r\n`),
    one('chunked with an extension', `${head}transfer-encoding: chunked\r\n\r\n${J.length.toString(16)};ext=1\r\n${J}\r\n0\r\n\r\n`),
    one('chunked with a space after the size', `${head}transfer-encoding: chunked\r\n\r\n${J.length.toString(16)} \r\n${J}\r\n0\r\n\r\n`),
    one('chunked with a bad size', `${head}transfer-encoding: chunked\r\n\r\nzz\r\n${J}\r\n0\r\n\r\n`),
    one('chunked with data longer than its size', `${head}transfer-encoding: chunked\r\n\r\n2\r\n${J}\r\n0\r\n\r\n`),
    one('chunked with LF after the data', `${head}transfer-encoding: chunked\r\n\r\n${J.length.toString(16)}\r\n${J}\n0\r\n\r\n`),
    one(
      'chunked with a trailer without a colon',
      `${head}transfer-encoding: chunked\r\n\r\n${J.length.toString(16)}\r\n${J}\r\n0\r\nbad trailer\r\n\r\n`,
    ),
    one(
      'chunked, never terminated (then the engine closes)',
      `${head}transfer-encoding: chunked\r\n\r\n${J.length.toString(16)}\r\n${J}\r\n`,
    ),
    one('Transfer-Encoding: Chunked (case)', `${head}transfer-encoding: Chunked\r\n\r\n${chunked([J])}`),
    one('Transfer-Encoding: gzip', `${head}transfer-encoding: gzip\r\n\r\nzzzz`),
    one('Transfer-Encoding: chunked, gzip', `${head}transfer-encoding: chunked, gzip\r\n\r\nzzzz`),
    one('Transfer-Encoding: gzip, chunked', `${head}transfer-encoding: gzip, chunked\r\n\r\n${chunked([J])}`),
    one('Transfer-Encoding twice', `${head}transfer-encoding: chunked\r\ntransfer-encoding: chunked\r\n\r\n${chunked([J])}`),
    one('Content-Length and chunked', `${head}content-length: 5\r\ntransfer-encoding: chunked\r\n\r\n${chunked([J])}`),
    one('chunked and Content-Length', `${head}transfer-encoding: chunked\r\ncontent-length: ${J.length}\r\n\r\n${chunked([J])}`),
    one('two equal Content-Length headers', `${head}content-length: ${J.length}\r\ncontent-length: ${J.length}\r\n\r\n${J}`),
    one('two different Content-Length headers', `${head}content-length: ${J.length}\r\ncontent-length: 2\r\n\r\n${J}`),
    one('Content-Length as a list', `${head}content-length: ${J.length}, ${J.length}\r\n\r\n${J}`),
    one('Content-Length with a plus sign', `${head}content-length: +${J.length}\r\n\r\n${J}`),
    one('Content-Length with spaces around', `${head}content-length:   ${J.length}  \r\n\r\n${J}`),
    one('Content-Length followed by a tab', `${head}content-length: ${J.length}\t\r\n\r\n${J}`),
    one('Content-Length in hex', `${head}content-length: 0x${J.length.toString(16)}\r\n\r\n${J}`),
    one('Content-Length negative', `${head}content-length: -1\r\n\r\n${J}`),
    one('Content-Length empty', `${head}content-length:\r\n\r\n${J}`),
    one('Content-Length 20 digits', `${head}content-length: 99999999999999999999\r\n\r\n${J}`),
    one(
      'bytes beyond the length in the same write',
      `${head}content-length: ${J.length}\r\n\r\n${J}HTTP/1.1 200 OK\r\ncontent-length: 8\r\n\r\nsmuggled`,
    ),
    {
      name: 'bytes beyond the length in a later write',
      pieces: [b(`${head}content-length: ${J.length}\r\n\r\n${J}`), b('HTTP/1.1 200 OK\r\ncontent-length: 8\r\n\r\nsmuggled')],
    },
    one('a length longer than the body (then the engine closes)', `${head}content-length: ${J.length + 10}\r\n\r\n${J}`),
    one('no length, no coding: the body runs until the engine closes', `${head}\r\n${J}`),
    one('Connection: close with a length', `${head}connection: close\r\ncontent-length: ${J.length}\r\n\r\n${J}`),
    one('HTTP/1.0 with a length', `HTTP/1.0 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${J.length}\r\n\r\n${J}`),
    one('HTTP/1.0 until close', `HTTP/1.0 200 OK\r\ncontent-type: application/json\r\n\r\n${J}`),
    one('Keep-Alive: timeout=1', `${head}keep-alive: timeout=1\r\ncontent-length: ${J.length}\r\n\r\n${J}`),
    one(
      'an event stream with a length',
      `HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: ${SSE_EVENTS.join('').length}\r\n\r\n${SSE_EVENTS.join('')}`,
    ),
    one(
      'an event stream with a length, cut short',
      `HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: 1000\r\n\r\n${SSE_EVENTS[0]}`,
    ),
    one('an event stream until close', `HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n${SSE_EVENTS.join('')}`),
    // statuses without a body
    one('204', 'HTTP/1.1 204 No Content\r\n\r\n'),
    one('204 with Content-Length: 0', 'HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n'),
    one('204 with a length', 'HTTP/1.1 204 No Content\r\ncontent-length: 5\r\n\r\n'),
    one('204 with a length and bytes', 'HTTP/1.1 204 No Content\r\ncontent-length: 5\r\n\r\nhello'),
    one('204 chunked', `HTTP/1.1 204 No Content\r\ntransfer-encoding: chunked\r\n\r\n${chunked(['hi'])}`),
    one('204 followed by bytes in the same write', 'HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 8\r\n\r\nsmuggled'),
    {
      name: '204 followed by bytes in a later write',
      pieces: [b('HTTP/1.1 204 No Content\r\n\r\n'), b('HTTP/1.1 200 OK\r\ncontent-length: 8\r\n\r\nsmuggled')],
    },
    one('304', 'HTTP/1.1 304 Not Modified\r\n\r\n'),
    one('304 with a length', 'HTTP/1.1 304 Not Modified\r\ncontent-length: 5\r\n\r\n'),
    // informational heads
    one('100 Continue, then the answer', `HTTP/1.1 100 Continue\r\n\r\n${JSON_RESPONSE.toString('latin1')}`),
    one('103 Early Hints, then the answer', `HTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\n${JSON_RESPONSE.toString('latin1')}`),
    one('100 with a length', `HTTP/1.1 100 Continue\r\ncontent-length: 0\r\n\r\n${JSON_RESPONSE.toString('latin1')}`),
    one('101 Switching Protocols', 'HTTP/1.1 101 Switching Protocols\r\nupgrade: h2c\r\nconnection: upgrade\r\n\r\n'),
    // status lines
    one('no reason phrase', `HTTP/1.1 200\r\ncontent-length: ${J.length}\r\n\r\n${J}`),
    one('an empty reason phrase', `HTTP/1.1 200 \r\ncontent-length: ${J.length}\r\n\r\n${J}`),
    one('HTTP/1.2', `HTTP/1.2 200 OK\r\ncontent-length: ${J.length}\r\n\r\n${J}`),
    one('HTTP/2', `HTTP/2 200 OK\r\ncontent-length: ${J.length}\r\n\r\n${J}`),
    one('ICY', `ICY 200 OK\r\ncontent-length: ${J.length}\r\n\r\n${J}`),
    one('status 099', `HTTP/1.1 099 Low\r\ncontent-length: ${J.length}\r\n\r\n${J}`),
    one('status 600', `HTTP/1.1 600 High\r\ncontent-length: ${J.length}\r\n\r\n${J}`),
    one('status 20', `HTTP/1.1 20 OK\r\ncontent-length: ${J.length}\r\n\r\n${J}`),
    one(
      'a 500 with a body',
      `HTTP/1.1 500 Internal Server Error\r\ncontent-type: application/json\r\ncontent-length: ${J.length}\r\n\r\n${J}`,
    ),
    one('a 404 with a body', `HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: ${J.length}\r\n\r\n${J}`),
    // header syntax
    one('LF line ends', `HTTP/1.1 200 OK\ncontent-type: application/json\ncontent-length: ${J.length}\n\n${J}`),
    one('a bare CR in a value', `${head}x-cr: a\rb\r\ncontent-length: ${J.length}\r\n\r\n${J}`),
    one('NUL in a value', `${head}x-nul: a\x00b\r\ncontent-length: ${J.length}\r\n\r\n${J}`),
    one('obs-fold', `${head}x-fold: a\r\n folded\r\ncontent-length: ${J.length}\r\n\r\n${J}`),
    one('a space before the colon', `${head}x-space : a\r\ncontent-length: ${J.length}\r\n\r\n${J}`),
    one('a line without a colon', `${head}garbage\r\ncontent-length: ${J.length}\r\n\r\n${J}`),
    one('bytes above 0x7f in a value', `${head}x-name: caf\xe9\r\ncontent-length: ${J.length}\r\n\r\n${J}`),
    one('a head over 16 KiB', `${head}x-big: ${'a'.repeat(17_000)}\r\ncontent-length: ${J.length}\r\n\r\n${J}`),
    one(
      'headers the router drops (hop-by-hop) and keeps',
      `${head}connection: keep-alive, x-hop\r\nx-hop: 1\r\nkeep-alive: timeout=5\r\nx-kept: 1\r\nset-cookie: a=1\r\nset-cookie: b=2\r\ncontent-length: ${J.length}\r\n\r\n${J}`,
    ),
    // nothing usable at all
    one('garbage', 'hello\r\n\r\n'),
    one('nothing (the engine closes)', ''),
  ];
  const splits: EngineCase[] = [];
  for (let i = 1; i < SSE_RESPONSE.length; i++)
    splits.push({ name: `the event stream, split at ${i}`, pieces: [SSE_RESPONSE.subarray(0, i), SSE_RESPONSE.subarray(i)] });
  return { handwritten: cases, splits };
}
