// Issue 9, item 6: bad input. Properties (fast-check) over the real router process, talking raw HTTP/1.1 on
// loopback so that nothing in a client library tidies the bytes: whatever a client sends, the router answers
// with a 4xx carrying an OpenAI-shaped error ({"error":{"message","type","param","code"}}) or forwards the
// request (the answer then comes from the engine: it has the simulator's x-sim-engine header); it never
// answers a 5xx of its own, never hangs, never crashes, and still serves a normal request afterwards.
// A few in-process properties cover the pure parts (body parsing, the alias rewrite) at higher counts.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import fc from 'fast-check';
import { INFERENCE_PATHS, parseInference } from '../../src/router/server/pipeline.js';
import { rewriteModel } from '../../src/router/proxy/rewrite-model.js';
import { stopAll } from '../support/process.js';
import { call, chat, engines, simStats, startRouter, startSim, waitModelStatus, type Running } from '../support/router.js';
import { exchange, type ExchangeOptions, type RawAnswer } from '../support/raw-http.js';
import { describeSockets, orphanedInbound, socketCensus } from '../support/sockets.js';
import { eventually } from '../support/within.js';

const MAX_BODY = 1_000_000;
const ADMIN_GETS = new Set(['/v1/models', '/health', '/ready', '/metrics', '/engines']);
/** served by the simulator; `fzalias` is a router alias of it */
const MODEL = 'fz';
const ALIAS = 'fzalias';

// ---- a raw HTTP/1.1 exchange (test/support/raw-http.ts) ----

function request(method: string, path: string, body: Buffer | string | undefined, headers: readonly string[] = []): Buffer {
  const b = body === undefined ? undefined : Buffer.isBuffer(body) ? body : Buffer.from(body, 'utf8');
  const head = [`${method} ${path} HTTP/1.1`, 'Host: 127.0.0.1', ...headers];
  if (b) head.push('Content-Type: application/json', `Content-Length: ${b.length}`);
  return Buffer.concat([Buffer.from(head.join('\r\n') + '\r\n\r\n', 'latin1'), b ?? Buffer.alloc(0)]);
}

function chunked(path: string, pieces: readonly Buffer[], terminate: boolean): Buffer {
  const out: Buffer[] = [
    Buffer.from(`POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`),
  ];
  for (const p of pieces) if (p.length) out.push(Buffer.from(`${p.length.toString(16)}\r\n`), p, Buffer.from('\r\n'));
  if (terminate) out.push(Buffer.from('0\r\n\r\n'));
  return Buffer.concat(out);
}

// ---- what an answer may be ----

function assertOpenAIError(a: RawAnswer, what: string): { message: string; type: string; param: string | null; code: string } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(a.body.toString('utf8'));
  } catch {
    assert.fail(`${what}: ${a.status} without a JSON body: ${JSON.stringify(a.body.toString('latin1').slice(0, 200))}`);
  }
  const error = (parsed as { error?: Record<string, unknown> }).error;
  assert.ok(error && typeof error === 'object', `${what}: no "error" object`);
  assert.deepEqual(Object.keys(parsed as object), ['error'], `${what}: only "error" at the top`);
  assert.deepEqual(Object.keys(error).sort(), ['code', 'message', 'param', 'type'], `${what}: error keys`);
  assert.ok(typeof error.message === 'string' && error.message.length > 0, `${what}: message`);
  assert.ok(typeof error.type === 'string' && error.type.length > 0, `${what}: type`);
  assert.ok(error.param === null || typeof error.param === 'string', `${what}: param`);
  assert.ok(typeof error.code === 'string' && error.code.length > 0, `${what}: code`);
  return error as never;
}

type Verdict =
  | { kind: 'forwarded'; status: number; body: Buffer }
  | { kind: 'refused'; status: number; code: string | undefined }
  | { kind: 'served'; status: number };

/** The rule of this file: a 4xx with an OpenAI-shaped error, the engine's answer, or (admin GETs) the router's own 2xx. */
function judge(a: RawAnswer, what: string, opts: { head?: boolean; adminGet?: boolean } = {}): Verdict {
  assert.ok(a.status > 0, `${what}: the connection closed without an answer`);
  if (a.headers['x-sim-engine'] !== undefined) return { kind: 'forwarded', status: a.status, body: a.body };
  if (opts.adminGet && a.status >= 200 && a.status < 300) return { kind: 'served', status: a.status };
  assert.ok(
    a.status >= 400 && a.status < 500,
    `${what}: the router answered ${a.status} on its own: ${a.body.toString('utf8').slice(0, 300)}`,
  );
  if (opts.head) return { kind: 'refused', status: a.status, code: undefined };
  return { kind: 'refused', status: a.status, code: assertOpenAIError(a, what).code };
}

/** What the router must answer for a body whose (last) top-level model is `model`. */
function expectedForModel(model: unknown): { status: number; code?: string } {
  if (model === MODEL || model === ALIAS) return { status: 200 };
  if (typeof model === 'string' && model.length > 0) return { status: 404, code: 'model_not_found' };
  return { status: 400, code: 'model_required' };
}

function assertModelAnswer(a: RawAnswer, model: unknown, what: string): void {
  const v = judge(a, what);
  const want = expectedForModel(model);
  if (want.status === 200) {
    assert.equal(v.kind, 'forwarded', `${what}: forwarded`);
    assert.equal(v.status, 200, `${what}: ${a.body.toString('utf8').slice(0, 200)}`);
    // an alias is rewritten to its target (the last top-level "model", as JSON.parse reads it)
    assert.equal((JSON.parse(a.body.toString('utf8')) as { model?: string }).model, MODEL, `${what}: the engine saw the target model`);
  } else {
    assert.deepEqual([v.status, v.kind === 'refused' ? v.code : 'forwarded'], [want.status, want.code], what);
  }
}

// ---- generators ----

const inferencePath = fc.constantFrom(...INFERENCE_PATHS);
/** `model` values of every JSON type, and strings that are almost a served name */
const anyModel = fc.oneof(
  fc.constantFrom<unknown>(MODEL, ALIAS, '', ' fz', 'FZ', 'fz\u0000', null, true, false, 0, -1, 1e308, [], {}, [MODEL], { id: MODEL }),
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 20 }),
  fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 3 }),
  fc.dictionary(fc.string({ maxLength: 5 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 }),
);
/** other fields of a request, never named "model" */
const otherFields = fc.dictionary(
  fc.string({ maxLength: 12 }).filter((k) => k !== 'model'),
  fc.jsonValue({ maxDepth: 3 }),
  { maxKeys: 4 },
);
/** spellings of the key that JSON.parse reads as "model" */
const modelKey = fc.constantFrom('"model"', '"mod\\u0065l"', '"\\u006dodel"');
const ws = fc.constantFrom('', ' ', '\n', '\t ', '\r\n  ');

describe('bad input against the router process', { timeout: 120_000 }, () => {
  let sim: Running;
  let router: Running;
  before(async () => {
    sim = await startSim([
      '--model',
      MODEL,
      '--id',
      'fuzz-sim',
      '--ttft-ms',
      '0',
      '--itl-ms',
      '0',
      '--output-tokens',
      '2',
      '--max-num-seqs',
      '1024',
    ]);
    router = await startRouter([
      '--static-backends',
      sim.url,
      '--static-models',
      MODEL,
      '--static-aliases',
      `${ALIAS}:${MODEL}`,
      '--max-body-bytes',
      String(MAX_BODY),
      '--allow-routing-header',
      '--client-timeout',
      '3',
      '--probe-interval',
      '0.2',
      '--probe-ready-interval',
      '1',
    ]);
    await waitModelStatus(router.url, MODEL, 'ready');
  });
  after(stopAll);

  const send = (data: Buffer | string, opts?: ExchangeOptions): Promise<RawAnswer> => exchange(router.port, data, opts);

  test('random bytes as the body of every inference path', async () => {
    await fc.assert(
      fc.asyncProperty(inferencePath, fc.uint8Array({ maxLength: 2048 }), async (path, bytes) => {
        judge(await send(request('POST', path, Buffer.from(bytes))), `POST ${path} with ${bytes.length} random bytes`);
      }),
      { numRuns: 80 },
    );
  });

  test('any JSON value as the body', async () => {
    await fc.assert(
      fc.asyncProperty(inferencePath, fc.jsonValue({ maxDepth: 5 }), async (path, value) => {
        const a = await send(request('POST', path, JSON.stringify(value) ?? 'null'));
        const isObject = value !== null && typeof value === 'object' && !Array.isArray(value);
        if (!isObject)
          assert.deepEqual([a.status, judge(a, 'non-object') && assertOpenAIError(a, 'non-object').code], [400, 'invalid_json']);
        else assertModelAnswer(a, (value as Record<string, unknown>).model, `object body ${JSON.stringify(value).slice(0, 200)}`);
      }),
      { numRuns: 80 },
    );
  });

  test('"model" of every type: 400 model_required unless a non-empty string; unknown names 404; served names forwarded', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('/v1/chat/completions', '/v1/completions', '/v1/embeddings'),
        anyModel,
        otherFields,
        async (path, model, rest) => {
          const body = JSON.stringify({ ...rest, model });
          assertModelAnswer(await send(request('POST', path, body)), model, `model ${JSON.stringify(model)}`);
        },
      ),
      { numRuns: 120 },
    );
  });

  test('duplicate keys (and escaped spellings of "model"): the last one decides, for the router and for the engine', async () => {
    const entry = fc.oneof(
      fc.tuple(modelKey, anyModel).map(([k, v]) => ({ key: k, model: true, value: v })),
      fc
        .tuple(
          fc.string({ maxLength: 6 }).filter((k) => k !== 'model'),
          fc.jsonValue({ maxDepth: 2 }),
        )
        .map(([k, v]) => ({ key: JSON.stringify(k), model: false, value: v })),
      // a nested "model" must never be taken for the top-level one
      fc.constant({ key: '"nested"', model: false, value: { model: 'nope', x: [{ model: ALIAS }] } as unknown }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(entry, { minLength: 1, maxLength: 6 }), ws, async (entries, space) => {
        const text = `{${space}${entries.map((e) => `${e.key}${space}:${space}${JSON.stringify(e.value)}`).join(`${space},${space}`)}${space}}`;
        const lastModel = entries.filter((e) => e.model).at(-1);
        assertModelAnswer(
          await send(request('POST', '/v1/chat/completions', text)),
          lastModel ? lastModel.value : undefined,
          `body ${text.slice(0, 300)}`,
        );
      }),
      { numRuns: 100 },
    );
  });

  test('invalid UTF-8 inside the body: parsed with replacement characters, never a crash', async () => {
    const field = fc.constantFrom('model', 'content', 'user', 'key');
    await fc.assert(
      fc.asyncProperty(field, fc.constantFrom(MODEL, ALIAS), fc.uint8Array({ minLength: 1, maxLength: 64 }), async (where, model, junk) => {
        // bytes that would end the JSON string or be control characters are lifted into the 0x80-0xff range
        const bytes = Buffer.from(junk.map((b) => (b < 0x20 || b === 0x22 || b === 0x5c ? b | 0x80 : b)));
        const parts: Buffer[] = [];
        if (where === 'model') parts.push(Buffer.from(`{"model":"${model}`), bytes, Buffer.from('"}'));
        else if (where === 'key') parts.push(Buffer.from('{"'), bytes, Buffer.from(`":1,"model":"${model}"}`));
        else parts.push(Buffer.from(`{"model":"${model}","messages":[{"role":"user","${where}":"`), bytes, Buffer.from('"}]}'));
        const body = Buffer.concat(parts);
        const a = await send(request('POST', '/v1/chat/completions', body));
        const decoded = (JSON.parse(body.toString('utf8')) as { model: string }).model;
        assertModelAnswer(a, decoded, `invalid UTF-8 in ${where}: ${body.toString('hex').slice(0, 200)}`);
      }),
      { numRuns: 80 },
    );
  });

  test('deeply nested JSON (1,000 to 100,000 levels, past the bound of 128): 400 invalid_json before parsing, whatever its shape; never a router 5xx', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1_000, max: 100_000 }),
        fc.constantFrom('array', 'object', 'object-with-model', 'messages', 'prompt', 'extra'),
        async (depth, shape) => {
          const arr = '['.repeat(depth) + ']'.repeat(depth);
          const obj = '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);
          const body = {
            array: arr,
            object: obj,
            'object-with-model': `{"model":"${MODEL}","x":${obj}}`,
            messages: `{"model":"${MODEL}","messages":${arr}}`,
            prompt: `{"model":"${ALIAS}","prompt":${arr}}`,
            extra: `{"model":"${ALIAS}","tools":${obj}}`,
          }[shape];
          const a = await send(request('POST', shape === 'prompt' ? '/v1/completions' : '/v1/chat/completions', body));
          const v = judge(a, `${shape} nested ${depth} deep`);
          assert.deepEqual([v.status, v.kind === 'refused' && v.code], [400, 'invalid_json'], shape);
        },
      ),
      { numRuns: 10 },
    );
  });

  test('huge strings within and beyond --max-body-bytes, with Content-Length or chunked', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 50_000, max: 1_600_000 }),
        fc.constantFrom('model', 'content'),
        fc.boolean(),
        async (size, where, useChunked) => {
          const big = 'x'.repeat(size);
          const body = Buffer.from(
            where === 'model' ? JSON.stringify({ model: big }) : chat(MODEL, { messages: [{ role: 'user', content: big }] }),
          );
          const pieces = Array.from({ length: Math.ceil(body.length / 65_536) }, (_, i) => body.subarray(i * 65_536, (i + 1) * 65_536));
          const before = (await simStats(sim.url)).received;
          const a = await send(useChunked ? chunked('/v1/chat/completions', pieces, true) : request('POST', '/v1/chat/completions', body));
          const what = `${body.length} bytes, ${where}, ${useChunked ? 'chunked' : 'Content-Length'}`;
          if (body.length > MAX_BODY) {
            assert.ok(a.status !== 0, `${what}: the 413 reached the client`);
            assert.deepEqual(
              [a.status, judge(a, what).kind === 'refused' && assertOpenAIError(a, what).code],
              [413, 'body_too_large'],
              what,
            );
            assert.equal((await simStats(sim.url)).received, before, `${what}: never forwarded`);
          } else if (where === 'model') {
            assert.deepEqual([a.status, assertOpenAIError(a, what).code], [404, 'model_not_found'], what);
          } else {
            assert.deepEqual([judge(a, what).kind, a.status], ['forwarded', 200], what);
          }
        },
      ),
      { numRuns: 10 },
    );
  });

  test('chunked bodies cut short: nothing reaches the engine; a half-closed request gets a 400, a cut one nothing', async () => {
    const body = Buffer.from(chat(MODEL));
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.integer({ min: 1, max: 40 }), { minLength: 1, maxLength: 8 }),
        fc.double({ min: 0, max: 0.999, noNaN: true }),
        fc.constantFrom('half-close', 'destroy') as fc.Arbitrary<'half-close' | 'destroy'>,
        async (sizes, cutAt, then) => {
          const pieces: Buffer[] = [];
          for (let at = 0, i = 0; at < body.length; i++) {
            const n = sizes[i % sizes.length] as number;
            pieces.push(body.subarray(at, at + n));
            at += n;
          }
          const whole = chunked('/v1/chat/completions', pieces, true);
          const headEnd = whole.indexOf('\r\n\r\n') + 4;
          // cut anywhere after the head and before the final "0\r\n\r\n"
          const cut = whole.subarray(0, headEnd + Math.floor(cutAt * (whole.length - 5 - headEnd)));
          const before = (await simStats(sim.url)).received;
          const a = await send(cut, { then });
          if (then === 'half-close') {
            const v = judge(a, `chunked body cut at ${cut.length} of ${whole.length}, then FIN`);
            assert.equal(v.kind, 'refused');
            assert.equal(v.status, 400);
          }
          assert.equal((await simStats(sim.url)).received, before, 'an incomplete body is never forwarded');
        },
      ),
      { numRuns: 40 },
    );
    // the same request, whole, is forwarded
    const whole = await send(chunked('/v1/chat/completions', [body.subarray(0, 10), body.subarray(10)], true));
    assert.deepEqual([judge(whole, 'whole chunked').kind, whole.status], ['forwarded', 200]);
  });

  test('random header names and values on a valid request', async () => {
    // framing headers (Content-Length, Transfer-Encoding) are the chunked test's business; Expect other than
    // 100-continue and a missing or repeated Host have their own tests below
    const special = fc.constantFrom(
      'connection',
      'keep-alive',
      'te',
      'trailer',
      'upgrade',
      'proxy-connection',
      'proxy-authorization',
      'authorization',
      'x-api-key',
      'x-request-id',
      'content-type',
      'content-encoding',
      'accept',
      'accept-encoding',
      'x-llm-router-routing',
      'cookie',
      'x-forwarded-for',
      'forwarded',
      'via',
      'x-session-id',
      'user-agent',
      'x-forwarded-host',
      'expect',
    );
    const token = fc
      .stringMatching(/^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,24}$/)
      .filter((n) => !['content-length', 'transfer-encoding', 'host'].includes(n.toLowerCase()));
    const valueByte = fc.oneof(fc.integer({ min: 0x20, max: 0x7e }), fc.integer({ min: 0x80, max: 0xff }), fc.constant(0x09));
    const value = fc.oneof(
      fc.array(valueByte, { maxLength: 80 }).map((b) => Buffer.from(b).toString('latin1').trim()),
      fc.constantFrom(
        'close',
        'keep-alive',
        'upgrade',
        'Upgrade, HTTP2-Settings',
        'x-request-id',
        'authorization',
        'prefixaware',
        'session',
        'least-load',
        'roundrobin',
        'trailers',
        'gzip',
        'websocket',
        'h2c',
        '100-continue',
        '',
      ),
      fc.string({ maxLength: 30 }).filter((s) => /^[\x20-\x7e]*$/.test(s)),
    );
    const header = fc
      .tuple(fc.oneof(special, token), value)
      .map(([n, v]) => (n.toLowerCase() === 'expect' ? ['expect', '100-continue'] : [n, v]) as [string, string]);
    await fc.assert(
      fc.asyncProperty(fc.array(header, { maxLength: 6 }), async (headers) => {
        const lines = headers.map(([n, v]) => `${n}: ${v}`);
        const a = await send(request('POST', '/v1/chat/completions', chat(MODEL), lines));
        const v = judge(a, `headers ${JSON.stringify(lines)}`);
        // well-formed headers, whatever they say, do not stop a valid request
        assert.equal(v.kind, 'forwarded', `refused ${JSON.stringify(lines)}: ${a.status} ${a.body.toString('utf8')}`);
      }),
      { numRuns: 120 },
    );
  });

  test('random methods and paths', async () => {
    const method = fc.oneof(
      fc.constantFrom('GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'HEAD', 'OPTIONS', 'TRACE', 'PROPFIND', 'MKCOL', 'PURGE', 'SEARCH'),
      fc.stringMatching(/^[A-Z]{1,10}$/).filter((m) => m !== 'CONNECT'), // CONNECT has its own test below
    );
    const known = fc.constantFrom(
      ...INFERENCE_PATHS,
      ...ADMIN_GETS,
      '/',
      '/v1',
      '/v1/',
      '/v1/models/fz',
      '//v1/chat/completions',
      '/v1/chat/completions/',
      '/V1/CHAT/COMPLETIONS',
      '/v1/../health',
    );
    const randomPath = fc.stringMatching(/^\/[A-Za-z0-9._~!$&'()*+,;=:@%/-]{0,40}$/);
    const query = fc.option(fc.stringMatching(/^[A-Za-z0-9=&%._-]{0,20}$/), { nil: undefined });
    await fc.assert(
      fc.asyncProperty(method, fc.oneof(known, randomPath), query, async (m, p, q) => {
        const target = q === undefined ? p : `${p}?${q}`;
        const withBody = m === 'POST' || m === 'PUT' || m === 'PATCH';
        const a = await send(request(m, target, withBody ? chat(MODEL) : undefined), { head: m === 'HEAD' });
        const what = `${m} ${target}`;
        // HEAD is answered like GET (without a body)
        const v = judge(a, what, { head: m === 'HEAD', adminGet: (m === 'GET' || m === 'HEAD') && ADMIN_GETS.has(p) });
        if (m === 'POST' && INFERENCE_PATHS.includes(p)) assert.equal(v.kind, 'forwarded', what);
        else assert.notEqual(v.kind, 'forwarded', `${what} must not reach an engine`);
      }),
      { numRuns: 150 },
    );
  });

  test('afterwards: the router is alive, serves a normal request, and holds nothing in flight or open', async () => {
    assert.equal(router.proc.child.exitCode, null, 'the router process is alive');
    assert.doesNotMatch(router.proc.output(), /unexpected error while serving a request/, 'no request hit the internal-error path');
    const ok = await call(`${router.url}/v1/chat/completions`, { body: chat(MODEL) });
    assert.equal(ok.status, 200);
    assert.deepEqual(
      (await engines(router.url)).map((e) => [e.state, e.inFlight]),
      [['ready', 0]],
    );
    assert.equal((await simStats(sim.url)).running, 0);
    // every raw connection above is closed: the router must not hold one whose client is gone
    const pid = router.proc.child.pid as number;
    await eventually(
      'no connection left open after its client went away',
      () => {
        const census = socketCensus(pid, router.port);
        return describeSockets([...orphanedInbound(census, router.port), ...census.closeWait]);
      },
      (orphans) => orphans === 'none',
      5_000,
      100,
    );
  });

  // ---- findings: protocol-level answers that are not OpenAI-shaped, and bad input that hurts other clients ----

  test('Expect with anything but 100-continue gets an OpenAI-shaped 417', async () => {
    const a = await send(request('POST', '/v1/chat/completions', chat(MODEL), ['Expect: something-else']));
    assert.equal(a.status, 417);
    assertOpenAIError(a, 'Expect: something-else');
  });

  test('an HTTP/1.1 request without Host, or with two, gets 400 invalid_request (RFC 9112); HTTP/1.0 needs none; other versions get 505', async () => {
    const body = chat(MODEL);
    const tail = `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
    for (const [what, raw] of [
      ['no Host', `POST /v1/chat/completions HTTP/1.1\r\n${tail}`],
      ['two Hosts', `POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\nhost: a\r\n${tail}`],
      ['GET without Host', 'GET /health HTTP/1.1\r\n\r\n'],
    ] as const) {
      const a = await send(raw);
      assert.equal(a.status, 400, what);
      assert.equal(assertOpenAIError(a, what).code, 'invalid_request', what);
    }
    judge(await send(`POST /v1/chat/completions HTTP/1.0\r\n${tail}`), 'HTTP/1.0 without Host');
    for (const version of ['HTTP/2.0', 'HTTP/0.9', 'HTTP/1.2', 'HTTP/3.0']) {
      const a = await send(`POST /v1/chat/completions ${version}\r\nHost: a\r\n${tail}`);
      assert.equal(a.status, 505, version);
      assert.equal(assertOpenAIError(a, version).code, 'http_version_not_supported', version);
    }
  });

  test('CONNECT gets an OpenAI-shaped 405 instead of a closed connection', async () => {
    const a = await send('CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n');
    judge(a, 'CONNECT');
  });

  test('an oversized upload always gets its 413, not a reset connection', async () => {
    // a client that writes its whole body before it reads, as most HTTP/1.1 clients do
    const upload = (): Promise<string> =>
      new Promise((resolve) => {
        const socket = net.connect({ port: router.port, host: '127.0.0.1' });
        let got = '';
        const timer = setTimeout(() => socket.destroy(), 5_000);
        socket.pause();
        socket.on('data', (b: Buffer) => {
          got += b.toString('latin1');
          // the status line got through the paused read: the answer was not lost to a reset (no need to wait for close)
          if (/^HTTP\/1\.1 \d{3} /.test(got)) socket.destroy();
        });
        socket.on('error', (err: NodeJS.ErrnoException) => {
          got ||= `(${err.code ?? 'error'})`;
        });
        socket.on('close', () => {
          clearTimeout(timer);
          resolve(/^HTTP\/1\.1 (\d{3})/.exec(got)?.[1] ?? got.slice(0, 40));
        });
        socket.on('connect', () => {
          socket.write(
            `POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${MAX_BODY * 5}\r\n\r\n`,
          );
          socket.write(Buffer.alloc(MAX_BODY * 4, 0x20));
          setTimeout(() => socket.resume(), 300);
        });
      });
    const outcomes: string[] = [];
    for (let i = 0; i < 5; i++) outcomes.push(await upload());
    assert.deepEqual(outcomes, Array(5).fill('413'));
  });

  test('a deeply nested prompt is answered by the simulator without a 500', async () => {
    const a = await send(request('POST', '/v1/completions', `{"model":"${MODEL}","prompt":${'['.repeat(20_000)}${']'.repeat(20_000)}}`));
    assert.ok(a.status < 500, `the engine answered ${a.status}: ${a.body.toString('utf8').slice(0, 200)}`);
  });
});

describe('bad input that makes an engine fail must not take it away from everyone', { timeout: 60_000 }, () => {
  after(stopAll);

  test('three requests the engine answers with a 500 do not make the model unavailable for other clients', async () => {
    const sim = await startSim(['--model', MODEL, '--ttft-ms', '0', '--itl-ms', '0', '--output-tokens', '2']);
    const router = await startRouter(['--static-backends', sim.url, '--static-models', MODEL]);
    await waitModelStatus(router.url, MODEL, 'ready');
    // requests the engine answers with a 500 (as an engine bug triggered by one client's input would)
    for (let i = 0; i < 3; i++) {
      const poisoned = await call(`${router.url}/v1/completions`, {
        body: JSON.stringify({ model: MODEL, prompt: 'x' }),
        headers: { 'x-sim-status': '500' },
      });
      assert.equal(poisoned.status, 500, 'the engine answer passes through');
    }
    const other = await call(`${router.url}/v1/chat/completions`, { body: chat(MODEL) });
    assert.equal(other.status, 200, `another client's request: ${other.status} ${other.text.slice(0, 200)}`);
    await router.stop();
    await sim.stop();
  });
});

describe('bad input, in process', () => {
  test('parseInference: any bytes give a model string or a 400 OpenAI error, never an exception', () => {
    const bytes = fc.oneof(
      fc.uint8Array({ maxLength: 512 }).map((b) => Buffer.from(b)),
      fc.jsonValue({ maxDepth: 4 }).map((v) => Buffer.from(JSON.stringify(v) ?? '')),
      fc.tuple(otherFields, anyModel).map(([rest, model]) => Buffer.from(JSON.stringify({ ...rest, model }))),
    );
    fc.assert(
      fc.property(bytes, (raw) => {
        const r = parseInference(raw);
        if (r.ok) {
          assert.equal(typeof r.model, 'string');
          assert.ok(r.model.length > 0);
          assert.equal(r.model, (JSON.parse(raw.toString('utf8')) as { model: string }).model);
        } else {
          assert.equal(r.error.status, 400);
          assert.ok(['invalid_json', 'model_required'].includes(r.error.code), r.error.code);
          assert.ok(r.error.message.length > 0);
        }
      }),
      { numRuns: 2_000 },
    );
  });

  test('rewriteModel keeps every byte outside the model value, even bytes that are not UTF-8', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 1, maxLength: 32 }), (junk) => {
        const bytes = Buffer.from(junk.map((b) => (b < 0x20 || b === 0x22 || b === 0x5c ? b | 0x80 : b)));
        const head = Buffer.from('{"model":"alias","x":"');
        const tail = Buffer.from('"}');
        const out = rewriteModel(Buffer.concat([head, bytes, tail]), 'target');
        assert.equal(out.toString('hex'), Buffer.concat([Buffer.from('{"model":"target","x":"'), bytes, tail]).toString('hex'));
      }),
      { numRuns: 200 },
    );
  });
});
