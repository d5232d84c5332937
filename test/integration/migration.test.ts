// Issue 33: a stream survives its engine. Two simulators, one resetting its connection after 2 chunks
// (--fault reset-mid-stream), round robin: with --migration-limit 1 every chat stream of 40 tokens arrives with the
// content a healthy engine generates for the same request in one go, one finish_reason, one [DONE], no error event;
// with --migration-limit 0 the behaviour is today's (the cut streams end with the router's error event). Also: text
// completions, usage added over both parts, a stream that must not migrate (n = 2), and a P/D model (on the
// --migration-limit 1 router too, its own three engines), whose continuation goes through a prefill endpoint again.
// The engines run in the test process (startSimHere): their reset is the simulator's own fault, as in a process.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { stopAll } from '../support/process.js';
import { allReady, call, FAST_PROBES, metric, simStats, startRouter, type Running } from '../support/router.js';
import { type SimHere, startSimHere, stopSimsHere } from '../support/sim-here.js';
import { within } from '../support/within.js';

const MODEL = 'mig';
const SIM = ['--model', MODEL, '--ttft-ms', '5', '--itl-ms', '2', '--output-tokens', '64'];
/** the P/D model, served by the --migration-limit 1 router beside MODEL */
const PD_MODEL = 'mig-pd';
const PD_SIM = ['--model', PD_MODEL, '--pd-protocol', 'vllm-nixl', '--ttft-ms', '5', '--itl-ms', '2', '--output-tokens', '64'];

interface Chunk {
  id?: string;
  created?: number;
  model?: string;
  choices?: { index: number; delta?: { role?: string; content?: string }; text?: string; finish_reason: string | null }[];
  usage?: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
  error?: { code: string };
}

interface Stream {
  readonly engine: string | undefined;
  readonly chunks: Chunk[];
  readonly done: number;
  readonly errors: Chunk[];
  readonly content: string;
  readonly finishes: string[];
  readonly roles: number;
}

/** The events of a whole SSE answer (vLLM's framing: one `data:` line per event). */
function readStream(text: string, engine: string | undefined): Stream {
  const datas = text
    .split('\n\n')
    .filter((e) => e.startsWith('data: '))
    .map((e) => e.slice(6));
  const chunks = datas.filter((d) => d !== '[DONE]').map((d) => JSON.parse(d) as Chunk);
  const answers = chunks.filter((c) => c.error === undefined);
  const choices = answers.flatMap((c) => c.choices ?? []);
  return {
    engine,
    chunks: answers,
    done: datas.filter((d) => d === '[DONE]').length,
    errors: chunks.filter((c) => c.error !== undefined),
    content: choices.map((c) => c.delta?.content ?? c.text ?? '').join(''),
    finishes: choices.flatMap((c) => (c.finish_reason !== null ? [c.finish_reason] : [])),
    roles: choices.filter((c) => c.delta?.role !== undefined).length,
  };
}

async function stream(url: string, path: string, body: Record<string, unknown>): Promise<Stream> {
  const res = await call(`${url}${path}`, { body: JSON.stringify({ model: MODEL, stream: true, ...body }), timeoutMs: 15_000 });
  assert.equal(res.status, 200, res.text);
  const engine = res.headers['x-sim-engine'];
  return readStream(res.text, typeof engine === 'string' ? engine : undefined);
}

/** `count` streams at once through the router. */
function streams(router: Running, count: number, path: string, body: Record<string, unknown>): Promise<Stream[]> {
  return within(30_000, `${count} streams`, Promise.all(Array.from({ length: count }, () => stream(router.url, path, body))));
}

/** One stream: the one id, created and model of every chunk, one role chunk (chat), one finish_reason, one [DONE]. */
function assertWhole(s: Stream, expected: Stream, what: string): void {
  assert.deepEqual(s.errors, [], `${what}: no error event`);
  assert.equal(s.content, expected.content, `${what}: the content of one uninterrupted generation`);
  assert.deepEqual(s.finishes, expected.finishes, `${what}: one finish_reason`);
  assert.equal(s.done, 1, `${what}: one [DONE]`);
  assert.equal(s.roles, expected.roles, `${what}: no second role chunk`);
  const first = s.chunks[0] as Chunk;
  for (const c of s.chunks) {
    assert.equal(c.id, first.id, `${what}: one id`);
    assert.equal(c.created, first.created, `${what}: one created`);
    assert.equal(c.model, first.model, `${what}: one model`);
  }
}

describe('mid-stream migration (--migration-limit)', { timeout: 180_000 }, () => {
  let faulty: SimHere;
  let healthy: SimHere;
  /** the P/D model's engines: a prefill engine and two decode engines, one resetting its streams */
  let pdPrefill: SimHere;
  let pdFaulty: SimHere;
  let pdHealthy: SimHere;
  let migrating: Running;
  let today: Running;

  before(async () => {
    [faulty, healthy, pdPrefill, pdFaulty, pdHealthy] = await Promise.all([
      startSimHere([...SIM, '--id', 'faulty', '--fault', 'reset-mid-stream']),
      startSimHere([...SIM, '--id', 'healthy']),
      startSimHere([...PD_SIM, '--role', 'prefill', '--id', 'pd-prefill']),
      startSimHere([...PD_SIM, '--role', 'decode', '--id', 'pd-faulty', '--fault', 'reset-mid-stream']),
      startSimHere([...PD_SIM, '--role', 'decode', '--id', 'pd-healthy']),
    ]);
    const mig = ['--routing-logic', 'roundrobin', ...FAST_PROBES];
    [migrating, today] = await Promise.all([
      // MODEL on two engines, and the P/D model (a model with a prefill backend is served P/D)
      startRouter([
        '--static-backends',
        [faulty, healthy, pdPrefill, pdFaulty, pdHealthy].map((e) => e.url).join(','),
        '--static-models',
        `${MODEL},${MODEL},${PD_MODEL},${PD_MODEL},${PD_MODEL}`,
        '--static-backend-roles',
        'both,both,prefill,decode,decode',
        '--pd-protocol',
        'vllm-nixl',
        '--migration-limit',
        '1',
        ...mig,
      ]),
      startRouter([
        '--static-backends',
        `${faulty.url},${healthy.url}`,
        '--static-models',
        `${MODEL},${MODEL}`,
        '--migration-limit',
        '0',
        ...mig,
      ]),
    ]);
    await Promise.all([allReady(migrating.url, 5), allReady(today.url, 2)]);
  });
  after(() => Promise.all([stopAll(), stopSimsHere()]));

  test('10 of 10 chat streams of 40 tokens arrive whole with --migration-limit 1; with 0 the cut ones end with the error event', async () => {
    const body = { messages: [{ role: 'user', content: 'Hello there' }], max_tokens: 40 };
    const expected = await stream(healthy.url, '/v1/chat/completions', body);
    assert.equal(expected.finishes.length, 1);
    assert.equal(expected.content.split(' ').length, 40, 'the healthy engine generates 40 tokens');

    const got = await streams(migrating, 10, '/v1/chat/completions', body);
    const started = got.filter((s) => s.engine === 'faulty').length;
    assert.ok(started >= 1, `some streams began on the failing engine (${got.map((s) => s.engine).join(',')})`);
    assert.equal(got.length, 10);
    for (const [i, s] of got.entries()) assertWhole(s, expected, `stream ${i} (began on ${s.engine})`);
    assert.ok((await metric(migrating.url, 'llm_router_migrations_total', { model: MODEL, outcome: 'migrated' })) >= started);
    assert.ok((await metric(migrating.url, 'llm_router_migrations_total', { model: MODEL, outcome: 'completed' })) >= started);
    assert.match(migrating.proc.output(), /"migrations":1/, 'the access log marks a migrated request');

    // --migration-limit 0: today's behaviour, the streams cut on the failing engine end with the router's error event
    const cut = await streams(today, 10, '/v1/chat/completions', body);
    const onFaulty = cut.filter((s) => s.engine === 'faulty');
    assert.ok(onFaulty.length >= 1, `some streams began on the failing engine (${cut.map((s) => s.engine).join(',')})`);
    for (const s of cut) {
      if (s.engine === 'faulty') {
        assert.equal(s.errors[0]?.error?.code, 'upstream_stream_error');
        assert.equal(s.done, 0);
        assert.equal(s.content, 'The quick', 'the 2 chunks sent before the reset');
      } else assertWhole(s, expected, 'a stream on the healthy engine');
    }
    assert.ok(Number.isNaN(await metric(today.url, 'llm_router_migrations_total', { model: MODEL, outcome: 'migrated' })));
  });

  test('text completions continue from the prompt plus the text so far; usage adds both parts', async () => {
    const body = { prompt: 'Say something: ', max_tokens: 12, stream_options: { include_usage: true } };
    const expected = await stream(healthy.url, '/v1/completions', body);
    const got = await streams(migrating, 4, '/v1/completions', body);
    assert.ok(got.some((s) => s.engine === 'faulty'));
    for (const s of got) {
      assertWhole(s, expected, `completion (began on ${s.engine})`);
      const usage = s.chunks.at(-1)?.usage;
      assert.deepEqual(usage, expected.chunks.at(-1)?.usage, 'usage: the first prompt, the completion tokens of both parts');
    }
    // chat too: the continuation's prompt held the text so far, which the usage does not count twice
    const chat = { messages: [{ role: 'user', content: 'Hello there' }], max_tokens: 20, stream_options: { include_usage: true } };
    const reference = await stream(healthy.url, '/v1/chat/completions', chat);
    for (const s of await streams(migrating, 4, '/v1/chat/completions', chat)) {
      assertWhole(s, reference, `chat with usage (began on ${s.engine})`);
      assert.deepEqual(s.chunks.at(-1)?.usage, reference.chunks.at(-1)?.usage);
    }
  });

  test('a stream that must not migrate (n = 2) ends with the error event, counted and logged as refused', async () => {
    const before = await metric(migrating.url, 'llm_router_migrations_total', { model: MODEL, outcome: 'refused' });
    const got = await streams(migrating, 4, '/v1/chat/completions', { messages: [{ role: 'user', content: 'Hi' }], max_tokens: 10, n: 2 });
    const cut = got.filter((s) => s.engine === 'faulty');
    assert.ok(cut.length >= 1, `some streams began on the failing engine (${got.map((s) => s.engine).join(',')})`);
    for (const s of cut) {
      assert.equal(s.errors[0]?.error?.code, 'upstream_stream_error');
      assert.equal(s.done, 0);
    }
    const after = await metric(migrating.url, 'llm_router_migrations_total', { model: MODEL, outcome: 'refused' });
    assert.equal(after - (Number.isNaN(before) ? 0 : before), cut.length);
    assert.match(migrating.proc.output(), /"notMigrated":"n"/);
    const stats = await simStats(faulty.url);
    assert.equal(stats.running, 0, 'nothing left running on the failing engine');
  });

  test('a P/D model: the continuation goes through a prefill endpoint again, and the client gets one whole stream', async () => {
    const body = { model: PD_MODEL, messages: [{ role: 'user', content: 'Hello there' }], max_tokens: 30 };
    const expected = readStream(
      (await call(`${migrating.url}/v1/chat/completions`, { body: JSON.stringify({ stream: true, ...body }) })).text,
      undefined,
    );
    const prefills = (await simStats(pdPrefill.url)).received;
    const got = await streams(migrating, 4, '/v1/chat/completions', body);
    const migrated = got.filter((s) => s.engine === 'pd-faulty').length;
    assert.ok(migrated >= 1, `some streams began on the failing decode engine (${got.map((s) => s.engine).join(',')})`);
    for (const s of got) assertWhole(s, expected, `P/D stream (began on ${s.engine})`);
    // the reference request might have been cut too; whole either way. Every request's prefill, and one more per migration
    assert.equal((await simStats(pdPrefill.url)).received - prefills, got.length + migrated);
  });
});
