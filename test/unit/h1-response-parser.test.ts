import { test } from 'node:test';
import assert from 'node:assert/strict';
import { H1ParseError, ResponseParser, type ResponseEvents } from '../../src/router/proxy/h1/response-parser.js';

interface Head {
  readonly status: number;
  readonly headers: string[];
}

/** Records what a parser reports; `pauseOnBody` makes onBody return false (the caller feeds the rest again). */
class Recorder implements ResponseEvents {
  heads: Head[] = [];
  bodies: Buffer[] = [];
  completions = 0;
  pauseOnBody = false;
  pauseOnHead = false;
  onHead(statusCode: number, rawHeaders: Buffer[]): boolean {
    this.heads.push({ status: statusCode, headers: rawHeaders.map((b) => b.toString('latin1')) });
    return !this.pauseOnHead;
  }
  onBody(chunk: Buffer): boolean {
    assert.ok(chunk.length > 0, 'no empty body slices');
    this.bodies.push(chunk);
    return !this.pauseOnBody;
  }
  onComplete(): void {
    this.completions++;
  }
  get body(): string {
    return Buffer.concat(this.bodies).toString('latin1');
  }
  summary(): { heads: Head[]; body: string; completions: number } {
    return { heads: this.heads, body: this.body, completions: this.completions };
  }
}

/** Feeds the pieces in order, feeding any unconsumed rest again (a paused sink) until the response is done. */
function feed(pieces: readonly Buffer[], opts: { head?: boolean; pauseOnBody?: boolean; eof?: boolean } = {}) {
  const rec = new Recorder();
  rec.pauseOnBody = opts.pauseOnBody ?? false;
  const parser = new ResponseParser(rec);
  parser.start(opts.head ?? false);
  let leftover = 0;
  for (const piece of pieces) {
    let rest = piece;
    for (;;) {
      const n = parser.execute(rest);
      assert.ok(n >= 0 && n <= rest.length);
      if (n === rest.length) break;
      if (parser.done) {
        leftover += rest.length - n;
        break;
      }
      assert.ok(n > 0 || rec.pauseOnBody, 'progress');
      rest = rest.subarray(n);
    }
  }
  if (opts.eof) parser.finish();
  return { rec, parser, leftover };
}

function splits(raw: Buffer): Buffer[][] {
  const out: Buffer[][] = [[raw]];
  // every single split point
  for (let i = 1; i < raw.length; i++) out.push([raw.subarray(0, i), raw.subarray(i)]);
  // byte by byte
  out.push([...raw].map((b) => Buffer.from([b])));
  return out;
}

/** Every way of splitting `raw` gives the same events as feeding it whole. */
function sameEverySplit(raw: string, opts: { head?: boolean; eof?: boolean } = {}) {
  const buf = Buffer.from(raw, 'latin1');
  const whole = feed([buf], opts);
  for (const pieces of splits(buf)) {
    const got = feed(pieces, opts);
    assert.deepEqual(got.rec.summary(), whole.rec.summary(), `split into ${pieces.map((p) => p.length).join('+')}`);
    assert.equal(got.leftover, whole.leftover);
    assert.equal(got.parser.keepAlive, whole.parser.keepAlive);
    // and with a sink that pauses after every body slice
    const paused = feed(pieces, { ...opts, pauseOnBody: true });
    assert.deepEqual(paused.rec.summary(), whole.rec.summary(), `paused, split into ${pieces.map((p) => p.length).join('+')}`);
  }
  return whole;
}

function parseError(raw: string | Buffer, opts: { head?: boolean } = {}): H1ParseError {
  const buf = typeof raw === 'string' ? Buffer.from(raw, 'latin1') : raw;
  for (const pieces of [[buf], [...buf].map((b) => Buffer.from([b]))]) {
    const parser = new ResponseParser(new Recorder());
    parser.start(opts.head ?? false);
    let caught: unknown;
    try {
      for (const p of pieces) parser.execute(p);
    } catch (err) {
      caught = err;
    }
    assert.ok(caught instanceof H1ParseError, `expected a parse error for ${JSON.stringify(buf.toString('latin1').slice(0, 80))}`);
    assert.equal(caught.code, 'LLM_ROUTER_H1_PARSE');
    if (pieces.length === 1) return caught;
  }
  throw new Error('unreachable');
}

test('content-length response: every split gives the same events; one read gives one head and one body slice', () => {
  const raw = 'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 13\r\nX-Odd:   spaced value \t\r\n\r\n{"ok": true }';
  const { rec, parser, leftover } = sameEverySplit(raw);
  assert.deepEqual(rec.heads, [
    { status: 200, headers: ['Content-Type', 'application/json', 'Content-Length', '13', 'X-Odd', 'spaced value'] },
  ]);
  assert.equal(rec.bodies.length, 1);
  assert.equal(rec.body, '{"ok": true }');
  assert.equal(rec.completions, 1);
  assert.equal(leftover, 0);
  assert.equal(parser.keepAlive, true);
  assert.equal(parser.statusCode, 200);
});

test('header and body slices point into the buffer that was read: no copies', () => {
  const buf = Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello', 'latin1');
  let headers: Buffer[] = [];
  let body: Buffer | undefined;
  const parser = new ResponseParser({
    onHead: (_s, raw) => {
      headers = raw;
      return true;
    },
    onBody: (chunk) => {
      body = chunk;
      return true;
    },
    onComplete: () => undefined,
  });
  parser.start(false);
  assert.equal(parser.execute(buf), buf.length);
  for (const h of headers) assert.equal(h.buffer, buf.buffer);
  assert.equal(body?.buffer, buf.buffer);
  assert.equal(body?.toString(), 'hello');
});

test('chunked with trailers, every split', () => {
  const raw =
    'HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n' +
    '7\r\ndata: 1\r\n' +
    'A\r\n\n\ndata: 2\n\r\n' +
    '01b\r\n' +
    'x'.repeat(27) +
    '\r\n' +
    '0\r\nX-Trailer: t\r\nOther:u v\r\n\r\n';
  const { rec, parser, leftover } = sameEverySplit(raw);
  assert.equal(rec.heads.length, 1);
  assert.equal(rec.body, 'data: 1\n\ndata: 2\n' + 'x'.repeat(27));
  assert.equal(rec.completions, 1);
  assert.equal(leftover, 0);
  assert.equal(parser.keepAlive, true);
});

test('chunked: several small chunks in one read come as one slice each, then completion', () => {
  const raw = Buffer.from('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n', 'latin1');
  const { rec } = feed([raw]);
  assert.deepEqual(
    rec.bodies.map((b) => b.toString()),
    ['abc', 'de'],
  );
  assert.equal(rec.completions, 1);
});

test('1xx heads are reported, then the final one; a tab after another header is white space', () => {
  const raw =
    'HTTP/1.1 102 Processing\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\t\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok';
  const { rec } = sameEverySplit(raw);
  assert.deepEqual(rec.heads, [
    { status: 102, headers: [] },
    { status: 103, headers: ['Link', '</a>'] },
    { status: 200, headers: ['Content-Length', '2'] },
  ]);
  assert.equal(rec.body, 'ok');
  assert.equal(rec.completions, 1);
});

test('204, 304 and responses to HEAD have no body; a 204 or 304 that declares one is an error', () => {
  for (const [raw, head] of [
    ['HTTP/1.1 204 No Content\r\n\r\n', false],
    ['HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n', false],
    ['HTTP/1.1 304 Not Modified\r\n\r\n', false],
    ['HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n', true],
    ['HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n', true],
    ['HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n', false],
  ] as const) {
    const { rec, parser, leftover } = sameEverySplit(raw, { head });
    assert.equal(rec.heads.length, 1, raw);
    assert.equal(rec.bodies.length, 0, raw);
    assert.equal(rec.completions, 1, raw);
    assert.equal(leftover, 0);
    assert.equal(parser.keepAlive, true);
  }
  parseError('HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n');
  parseError('HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n');
  parseError('HTTP/1.1 103 Early Hints\r\nContent-Length: 0\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n');
  // the router never asks for a 100 Continue
  parseError('HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n');
  parseError('HTTP/1.1 200 OK\r\nContent-Length: 2\t\r\n\r\nok');
  parseError('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\t\r\n\r\n0\r\n\r\n');
});

test('no length and not chunked: the body runs until the connection ends; the connection is not reused', () => {
  const raw = 'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nall of this, until the end';
  const { rec, parser } = sameEverySplit(raw, { eof: true });
  assert.equal(rec.body, 'all of this, until the end');
  assert.equal(rec.completions, 1);
  assert.equal(parser.keepAlive, false);
  // finish() does not complete an incomplete fixed-length body
  const cut = feed([Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc', 'latin1')]);
  assert.equal(cut.parser.finish(), false);
  assert.equal(cut.rec.completions, 0);
});

test('keep-alive: Connection close, HTTP/1.0, Keep-Alive timeout hint', () => {
  const close = feed([Buffer.from('HTTP/1.1 200 OK\r\nConnection: Close\r\nContent-Length: 0\r\n\r\n', 'latin1')]);
  assert.equal(close.parser.keepAlive, false);
  const listed = feed([Buffer.from('HTTP/1.1 200 OK\r\nConnection: x-thing, close\r\nContent-Length: 0\r\n\r\n', 'latin1')]);
  assert.equal(listed.parser.keepAlive, false);
  const ka = feed([
    Buffer.from('HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5, max=100\r\nContent-Length: 0\r\n\r\n', 'latin1'),
  ]);
  assert.equal(ka.parser.keepAlive, true);
  assert.equal(ka.parser.keepAliveHintMs, 5000);
  const old = feed([Buffer.from('HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok', 'latin1')]);
  assert.equal(old.parser.keepAlive, false);
  assert.equal(old.rec.body, 'ok');
});

test('bytes after the end of a response in the same read are an error, reported before the event that would end it', () => {
  for (const raw of [
    'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n',
    'HTTP/1.1 204 No Content\r\n\r\nx',
    'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n\r\n',
  ]) {
    const rec = new Recorder();
    const parser = new ResponseParser(rec);
    parser.start(false);
    assert.throws(() => parser.execute(Buffer.from(raw, 'latin1')), H1ParseError, raw);
    assert.equal(rec.completions, 0, raw);
    // the last body byte is not handed on either: a caller that wrote nothing yet can still answer with an error
    assert.ok(!rec.body.endsWith('ok') || raw.includes('chunked'), raw);
  }
  // the same bytes in a later read: the response completed; what follows is the connection's business
  const rec = new Recorder();
  const parser = new ResponseParser(rec);
  parser.start(false);
  const first = Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok', 'latin1');
  assert.equal(parser.execute(first), first.length);
  assert.equal(parser.done, true);
  assert.equal(parser.execute(Buffer.from('junk')), 0);
  assert.equal(rec.completions, 1);
});

test('a sink that returns false stops the parser right after that event', () => {
  const raw = Buffer.from('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n', 'latin1');
  const rec = new Recorder();
  rec.pauseOnHead = true;
  rec.pauseOnBody = true;
  const parser = new ResponseParser(rec);
  parser.start(false);
  const afterHead = parser.execute(raw);
  assert.equal(afterHead, raw.indexOf('3\r\nabc'));
  assert.equal(rec.heads.length, 1);
  assert.equal(rec.bodies.length, 0);
  const afterFirst = afterHead + parser.execute(raw.subarray(afterHead));
  assert.equal(rec.bodies.length, 1);
  assert.equal(afterFirst, raw.indexOf('\r\n2\r\nde'));
  const rest = raw.subarray(afterFirst);
  const afterSecond = parser.execute(rest);
  assert.equal(rec.bodies.length, 2);
  assert.equal(parser.execute(rest.subarray(afterSecond)), rest.length - afterSecond);
  assert.equal(rec.completions, 1);
  // a paused head of a response without body still completes: nothing is left to read
  const noBody = new Recorder();
  noBody.pauseOnHead = true;
  const p2 = new ResponseParser(noBody);
  p2.start(false);
  const b = Buffer.from('HTTP/1.1 204 No Content\r\n\r\n', 'latin1');
  assert.equal(p2.execute(b), b.length);
  assert.equal(noBody.completions, 1);
});

test('start() makes the parser ready for the next response on the same connection', () => {
  const rec = new Recorder();
  const parser = new ResponseParser(rec);
  for (let i = 0; i < 3; i++) {
    parser.start(false);
    const b = Buffer.from(`HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n${i}`, 'latin1');
    assert.equal(parser.execute(b), b.length);
  }
  assert.equal(rec.body, '012');
  assert.equal(rec.completions, 3);
});

test('protocol errors', () => {
  parseError('HTTP/2 200 OK\r\n\r\n');
  parseError('HTTP/1.1 20 OK\r\n\r\n');
  parseError('HTTP/1.1 2000 OK\r\n\r\n');
  parseError('HTTP/1.1 abc OK\r\n\r\n');
  parseError('HTTP/1.1 099 Low\r\n\r\n');
  parseError('ICY 200 OK\r\n\r\n');
  parseError('HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n');
  parseError('HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n');
  parseError('HTTP/1.1 200 OK\r\n: empty name\r\n\r\n');
  parseError('HTTP/1.1 200 OK\r\nNo-Colon\r\n\r\n');
  parseError('HTTP/1.1 200 OK\r\nX: a\rb\r\n\r\n');
  parseError('HTTP/1.1 200 OK\r\nX: a\nb\r\n\r\n');
  parseError('HTTP/1.1 200 OK\r\nX: a\0b\r\n\r\n');
  parseError('HTTP/1.1 200 OK\r\nX: a\r\n folded\r\n\r\n');
  parseError('HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nx');
  parseError('HTTP/1.1 200 OK\r\nContent-Length: 1, 2\r\n\r\nx');
  parseError('HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n');
  parseError('HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n');
  parseError('HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\n');
  parseError('HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n');
  parseError('HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok');
  parseError('HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nok');
  parseError('HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nok');
  parseError('HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n');
  parseError('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n2\r\nok\r\n0\r\n\r\n');
  parseError('HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nzz');
  parseError('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\nzz');
  parseError('HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n');
  parseError('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n');
  parseError('HTTP/1.2 200 OK\r\nContent-Length: 0\r\n\r\n');
  parseError('HTTP/2.0 200 OK\r\nContent-Length: 0\r\n\r\n');
  const chunked = 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n';
  parseError(chunked + 'zz\r\n');
  parseError(chunked + '\r\n');
  parseError(chunked + ';ext\r\n');
  parseError(chunked + '3\nabc\r\n');
  parseError(chunked + '3\r\nabcd\r\n');
  parseError(chunked + '1234567890abc\r\n');
  parseError(chunked + '3 x\r\nabc\r\n');
  parseError(chunked + '3 \r\nabc\r\n');
  parseError(chunked + '3;ext=1\r\nabc\r\n');
  parseError(chunked + '0\r\nno colon\r\n\r\n');
  parseError(chunked + '0\r\nbad name: x\r\n\r\n');
  parseError(chunked + '0\r\nbad trailer\x01\r\n\r\n');
  parseError(chunked + '0\r\n\r\r');
});

test('a head over the limit is an error, whether it arrives whole or a byte at a time', () => {
  const big = 'HTTP/1.1 200 OK\r\n' + `X-Big: ${'a'.repeat(17_000)}\r\n` + '\r\n';
  const err = parseError(big);
  assert.match(err.message, /too large/);
  // without its end yet, too
  const parser = new ResponseParser(new Recorder());
  parser.start(false);
  const part = Buffer.from('HTTP/1.1 200 OK\r\nX-Big: ' + 'a'.repeat(1000), 'latin1');
  assert.throws(() => {
    for (let i = 0; i < 20; i++) parser.execute(part);
  }, H1ParseError);
  // a head just under the limit is fine
  const ok = feed([Buffer.from('HTTP/1.1 200 OK\r\n' + `X-Big: ${'a'.repeat(16_000)}\r\n` + 'Content-Length: 0\r\n\r\n', 'latin1')]);
  assert.equal(ok.rec.completions, 1);
});
