// The audio routes (issue 25): POST /v1/audio/transcriptions and /v1/audio/translations are routed by the `model`
// field of their multipart/form-data body, and the body reaches the engine byte for byte (checked by the SHA-256 of
// what the simulator received), with its content-type and boundary.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { stopAll } from '../support/process.js';
import {
  call,
  FAST_PROBES,
  metric,
  type Running,
  simRequests,
  simStats,
  startRouter,
  startSim,
  waitModelStatus,
} from '../support/router.js';

const sha256 = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

/** A multipart/form-data body: the fields in order, then the file part (as OpenAI's clients send it). */
function form(
  fields: readonly (readonly [string, string])[],
  file: Buffer | undefined,
  boundary = `----llm-router-${randomBytes(6).toString('hex')}`,
) {
  const parts: Buffer[] = [];
  for (const [name, value] of fields)
    parts.push(Buffer.from(`--${boundary}\r\ncontent-disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`));
  if (file)
    parts.push(
      Buffer.from(`--${boundary}\r\ncontent-disposition: form-data; name="file"; filename="clip.wav"\r\ncontent-type: audio/wav\r\n\r\n`),
      file,
      Buffer.from('\r\n'),
    );
  parts.push(Buffer.from(`--${boundary}--\r\n`));
  return { body: Buffer.concat(parts), contentType: `multipart/form-data; boundary=${boundary}` };
}

const clip = randomBytes(64 * 1024);
const TRANSCRIBE = '/v1/audio/transcriptions';
const TRANSLATE = '/v1/audio/translations';

describe('audio routes: multipart/form-data, routed by its model field', { timeout: 120_000 }, () => {
  let sim: Running;
  let router: Running;
  const post = (path: string, f: { body: Buffer; contentType: string }) =>
    call(`${router.url}${path}`, { body: f.body, headers: { 'content-type': f.contentType } });

  before(async () => {
    sim = await startSim(['--model', 'whisper', '--ttft-ms', '5']);
    router = await startRouter([
      '--static-backends',
      sim.url,
      '--static-models',
      'whisper',
      '--static-aliases',
      'whisper-1:whisper',
      '--known-models',
      'sleeper',
      '--max-body-bytes',
      String(64 * 1024 * 1024),
      ...FAST_PROBES,
    ]);
    await waitModelStatus(router.url, 'whisper', 'ready');
  });
  after(stopAll);

  test('a transcription and a translation reach the engine byte for byte, with their content-type and boundary', async () => {
    for (const [path, task] of [
      [TRANSCRIBE, 'transcribe'],
      [TRANSLATE, 'translate'],
    ] as const) {
      const f = form(
        [
          ['model', 'whisper'],
          ['response_format', 'verbose_json'],
          ['language', 'en'],
        ],
        clip,
      );
      const res = await post(path, f);
      assert.equal(res.status, 200, res.text);
      const answer = res.json<{ task: string; text: string; segments: unknown[] }>();
      assert.equal(answer.task, task);
      assert.ok(answer.text.length > 0 && answer.segments.length === 1);
      const seen = (await simRequests(sim.url)).at(-1);
      assert.equal(seen?.path, path);
      assert.equal(seen?.bodySha256, sha256(f.body));
      assert.equal(seen?.bodyBytes, f.body.length);
      assert.equal(seen?.headers['content-type'], f.contentType);
    }
    // the simulator answers as vLLM does: {"text"} by default, text/plain for text, an SSE stream for stream=true
    assert.deepEqual(Object.keys((await post(TRANSCRIBE, form([['model', 'whisper']], clip))).json<object>()), ['text']);
    const text = await post(
      TRANSLATE,
      form(
        [
          ['model', 'whisper'],
          ['response_format', 'text'],
        ],
        clip,
      ),
    );
    assert.match(String(text.headers['content-type']), /^text\/plain/);
    assert.ok(!text.text.startsWith('{'));
    const stream = await post(
      TRANSCRIBE,
      form(
        [
          ['model', 'whisper'],
          ['stream', 'true'],
        ],
        clip,
      ),
    );
    assert.match(String(stream.headers['content-type']), /^text\/event-stream/);
    assert.match(stream.text, /"object":"transcription\.chunk"/);
    assert.match(stream.text, /data: \[DONE\]\n\n$/);
    // counted like other requests
    assert.ok((await metric(router.url, 'llm_router_requests_total', { model: 'whisper', status: '200' })) >= 5);
  });

  test('an alias: only the model field is rewritten, every other byte as sent', async () => {
    const boundary = '----alias-boundary-0123';
    const sent = form(
      [
        ['model', 'whisper-1'],
        ['temperature', '0'],
      ],
      clip,
      boundary,
    );
    const expected = form(
      [
        ['model', 'whisper'],
        ['temperature', '0'],
      ],
      clip,
      boundary,
    );
    const res = await post(TRANSCRIBE, sent);
    assert.equal(res.status, 200, res.text);
    const seen = (await simRequests(sim.url)).at(-1);
    assert.equal(seen?.bodySha256, sha256(expected.body));
    assert.equal(Number(seen?.headers['content-length']), expected.body.length);
  });

  test('404 for an unknown model (with the hint), 503 for a model at zero, 400 without model or with a malformed body', async () => {
    const nf = await post(TRANSCRIBE, form([['model', 'whispr']], clip));
    assert.equal(nf.status, 404);
    assert.match(nf.text, /"code":"model_not_found"/);
    assert.match(nf.text, /Did you mean \\"whisper\\"/);
    const zero = await post(TRANSLATE, form([['model', 'sleeper']], clip));
    assert.equal(zero.status, 503);
    assert.equal(zero.headers['x-llm-router-model-state'], 'scaled-to-zero');
    const none = await post(TRANSCRIBE, form([['language', 'en']], clip));
    assert.equal(none.status, 400);
    assert.equal(none.json<{ error: { code: string } }>().error.code, 'model_required');
    const cut = form([['model', 'whisper']], clip);
    const malformed = await post(TRANSCRIBE, { body: cut.body.subarray(0, cut.body.length - 40), contentType: cut.contentType });
    assert.equal(malformed.status, 400);
    const error = malformed.json<{ error: { code: string; message: string } }>().error;
    assert.equal(error.code, 'invalid_multipart');
    assert.match(error.message, /not valid multipart\/form-data: Unexpected end of form/);
    const json = await call(`${router.url}${TRANSCRIBE}`, { body: JSON.stringify({ model: 'whisper' }) });
    assert.equal(json.status, 400);
    assert.equal(json.json<{ error: { code: string } }>().error.code, 'invalid_multipart');
  });

  test('a 50 MB upload is streamed through within a memory budget: the body is held once, never twice', async (t) => {
    const status = (): Record<string, number> =>
      Object.fromEntries(
        readFileSync(`/proc/${router.proc.child.pid}/status`, 'utf8')
          .split('\n')
          .filter((l) => l.startsWith('Vm'))
          .map((l) => [l.split(':')[0] as string, Number.parseInt(l.split(':')[1] as string, 10) * 1024]),
      );
    const big = form([['model', 'whisper']], randomBytes(50 * 1024 * 1024));
    const peakBefore = status().VmHWM as number;
    const res = await post(TRANSCRIBE, big);
    assert.equal(res.status, 200, res.text);
    const seen = (await simRequests(sim.url)).at(-1);
    assert.equal(seen?.bodySha256, sha256(big.body));
    const grew = (status().VmHWM as number) - peakBefore;
    // once is 50 MB; twice (chunks and their concatenation) would be 100 MB at its peak
    t.diagnostic(`the router's peak RSS grew by ${Math.round(grew / 1024 / 1024)} MB for a 50 MB body`);
    assert.ok(grew < 90 * 1024 * 1024, `the router's peak RSS grew by ${Math.round(grew / 1024 / 1024)} MB for a 50 MB body`);
  });

  test('a client that leaves mid-upload: nothing reaches the engine, the router serves the next request', async () => {
    const received = (await simStats(sim.url)).received;
    const f = form([['model', 'whisper']], randomBytes(8 * 1024 * 1024));
    await new Promise<void>((resolve) => {
      const socket = net.connect(router.port, '127.0.0.1', () => {
        socket.write(
          `POST ${TRANSCRIBE} HTTP/1.1\r\nhost: x\r\ncontent-type: ${f.contentType}\r\ncontent-length: ${f.body.length}\r\n\r\n`,
        );
        socket.write(f.body.subarray(0, 1024 * 1024), () => setTimeout(() => socket.destroy(), 100));
      });
      socket.on('close', () => resolve());
      socket.on('error', () => undefined);
    });
    // (the fast path reads the body before the handler runs: a client that leaves mid-body is dropped there, uncounted)
    await new Promise((r) => setTimeout(r, 300));
    const demand = (await call(`${router.url}/demand`)).json<{ models: Record<string, { inFlight: number }> }>();
    assert.equal(demand.models.whisper?.inFlight, 0);
    assert.equal((await simStats(sim.url)).received, received, 'the engine got nothing of it');
    assert.equal((await post(TRANSCRIBE, form([['model', 'whisper']], clip))).status, 200);
  });
});
