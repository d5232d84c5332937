// The simulator run in-process through its programmatic API (startSimEngine).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { Agent, request } from 'undici';
import { startSimEngine, type SimEngine } from '../../src/tools/sim/engine.js';
import { probe } from '../../src/router/health/rules.js';
import { until } from '../support/within.js';

const engines: SimEngine[] = [];
after(async () => {
  await Promise.all(engines.map((e) => e.close()));
});

async function start(options: Parameters<typeof startSimEngine>[0] = {}): Promise<SimEngine> {
  const engine = await startSimEngine({ port: 0, ttftMs: 5, itlMs: 1, outputTokens: 4, ...options });
  engines.push(engine);
  return engine;
}

async function call(
  url: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Record<string, unknown>; text: string }> {
  const res = await request(url, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    headersTimeout: 5_000,
    bodyTimeout: 5_000,
  });
  return { status: res.statusCode, headers: res.headers, text: await res.body.text() };
}

test('every response names the engine and echoes x-request-id', async () => {
  const engine = await start({ id: 'engine-a' });
  for (const [path, body] of [
    ['/health'],
    ['/v1/models'],
    ['/_sim/stats'],
    ['/nope'],
    ['/v1/chat/completions', { messages: [] }],
  ] as const) {
    const res = await call(engine.url + path, body, { 'x-request-id': 'req-1' });
    assert.equal(res.headers['x-sim-engine'], 'engine-a', path);
    assert.equal(res.headers['x-request-id'], 'req-1', path);
  }
  const anonymous = await start();
  assert.equal((await call(anonymous.url + '/health')).headers['x-sim-engine'], `sim-${anonymous.port}`);
});

test('ready vLLM endpoints have vLLM shapes; a request without a model goes to the first served name', async () => {
  const engine = await start({ models: ['m1', 'm2'], maxModelLen: 2048 });
  const health = await call(engine.url + '/health');
  assert.equal(health.status, 200);
  assert.equal(health.text, '');
  const models = JSON.parse((await call(engine.url + '/v1/models')).text);
  assert.equal(models.object, 'list');
  assert.deepEqual(
    models.data.map((m: Record<string, unknown>) => [m.id, m.object, m.owned_by, m.root, m.parent, m.max_model_len]),
    [
      ['m1', 'model', 'vllm', 'm1', null, 2048],
      ['m2', 'model', 'vllm', 'm2', null, 2048],
    ],
  );
  const chat = await call(engine.url + '/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 });
  assert.equal(chat.status, 200);
  const parsed = JSON.parse(chat.text);
  assert.equal(parsed.model, 'm1');
  assert.equal(parsed.choices[0].message.content, 'The quick');
  assert.deepEqual(parsed.usage, { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 });
  const second = JSON.parse((await call(engine.url + '/v1/completions', { model: 'm2', prompt: 'x' })).text);
  assert.equal(second.model, 'm2');
  assert.equal(second.choices[0].text, 'The quick brown fox');
  assert.deepEqual(engine.stats().byModel, { m1: 1, m2: 1 });
});

test("--model-root: vLLM's /v1/models root, SGLang's model_path and tokenizer_path; the router's probe reads them", async () => {
  const dispatcher = new Agent();
  try {
    const vllm = await start({ models: ['qwen3'], modelRoot: 'Qwen/Qwen3-8B' });
    const cards = JSON.parse((await call(vllm.url + '/v1/models')).text).data as Record<string, unknown>[];
    assert.deepEqual(
      cards.map((m) => [m.id, m.root]),
      [['qwen3', 'Qwen/Qwen3-8B']],
    );
    const opts = { timeoutMs: 2_000, apiKey: undefined, dispatcher };
    const seen = await probe({ url: vllm.url, models: ['qwen3'] }, { ...opts, kind: 'vllm' });
    assert.equal(seen.verdict, 'ready');
    assert.deepEqual([...(seen.roots ?? [])], [['qwen3', 'Qwen/Qwen3-8B']]);

    const sglang = await start({ kind: 'sglang', models: ['qwen3'], modelRoot: '/models/qwen3' });
    const info = JSON.parse((await call(sglang.url + '/get_model_info')).text);
    assert.deepEqual([info.model_path, info.tokenizer_path], ['/models/qwen3', '/models/qwen3']);
    const sg = await probe({ url: sglang.url, models: ['qwen3'] }, { ...opts, kind: 'sglang' });
    assert.equal(sg.verdict, 'ready', sg.detail);
    assert.deepEqual([...(sg.roots ?? [])], [['qwen3', '/models/qwen3']]);

    // no root given: each model's own name, as before
    const plain = await start({ models: ['m1'] });
    const p = await probe({ url: plain.url, models: ['m1'] }, { ...opts, kind: 'vllm' });
    assert.deepEqual([...(p.roots ?? [])], [['m1', 'm1']]);
  } finally {
    await dispatcher.close();
  }
});

test('other forwarded OpenAI paths answer 200 with the model and the path they arrived on', async () => {
  const engine = await start();
  for (const path of ['/v1/responses', '/v1/rerank', '/rerank', '/v1/score', '/score', '/tokenize', '/detokenize', '/v1/messages']) {
    const res = await call(engine.url + path, {
      model: 'sim-model',
      input: 'x',
      query: 'q',
      documents: ['a'],
      text_1: 'a',
      text_2: 'b',
      prompt: 'p',
      tokens: [1],
      messages: [],
    });
    assert.equal(res.status, 200, path);
    const body = JSON.parse(res.text);
    assert.equal(body.model, 'sim-model', path);
    assert.equal(body.path, path);
  }
  const stats = engine.stats();
  assert.equal(stats.received, 8);
  assert.equal(stats.completed, 8);
  assert.equal(stats.byPath['/v1/score'], 1);
  const embeddings = JSON.parse((await call(engine.url + '/v1/embeddings', { model: 'sim-model', input: ['a', 'b', 'c'] })).text);
  assert.deepEqual(
    embeddings.data.map((d: { index: number; embedding: number[] }) => [d.index, d.embedding.length]),
    [
      [0, 8],
      [1, 8],
      [2, 8],
    ],
  );
});

test('wrong method, unknown path, invalid JSON and unknown model get error answers', async () => {
  const engine = await start();
  assert.equal((await call(engine.url + '/v1/chat/completions')).status, 405);
  assert.equal((await call(engine.url + '/v2/whatever')).status, 404);
  const bad = await call(engine.url + '/v1/chat/completions', '{not json');
  assert.equal(bad.status, 400);
  assert.equal(JSON.parse(bad.text).error.code, 400);
  const unknown = await call(engine.url + '/v1/embeddings', { model: 'other', input: 'x' });
  assert.equal(unknown.status, 404);
  assert.deepEqual(JSON.parse(unknown.text), {
    error: { message: 'The model `other` does not exist.', type: 'NotFoundError', param: 'model', code: 404 },
  });
  assert.equal(engine.stats().failed, 2, 'the 405 never reached inference');
});

test('the loading fault shows each engine kind its own not-ready signature, and ends after its seconds', async () => {
  const vllm = await start({ kind: 'vllm', fault: { mode: 'loading' } });
  assert.equal((await call(vllm.url + '/health')).status, 200);
  assert.equal((await call(vllm.url + '/v1/models')).status, 503);
  assert.equal((await call(vllm.url + '/v1/completions', { prompt: 'x' })).status, 503);

  const sglang = await start({ kind: 'sglang', fault: { mode: 'loading' } });
  assert.equal((await call(sglang.url + '/health')).status, 503);
  assert.equal((await call(sglang.url + '/get_model_info')).status, 503);
  await sglang.setFault('none');
  assert.equal((await call(sglang.url + '/health')).status, 200);
  assert.deepEqual(JSON.parse((await call(sglang.url + '/get_model_info')).text), {
    model_path: 'sim-model',
    tokenizer_path: 'sim-model',
    is_generation: true,
  });
  assert.match(await (await call(sglang.url + '/metrics')).text, /^sglang:num_queue_reqs\{model_name="sim-model"\} 0\.0$/m);

  // long enough that a busy machine still asks /health while the engine loads
  const tgi = await start({ kind: 'tgi', fault: { mode: 'loading', seconds: 2 } });
  const unhealthy = await call(tgi.url + '/health');
  assert.equal(unhealthy.status, 503);
  assert.deepEqual(JSON.parse(unhealthy.text), { error: 'unhealthy', error_type: 'healthcheck' });
  assert.equal(tgi.phase(), 'loading');
  await until('the engine loaded', () => tgi.phase() === 'ready', 10_000);
  assert.equal((await call(tgi.url + '/health')).status, 200);
  const info = JSON.parse((await call(tgi.url + '/info')).text);
  assert.equal(info.model_id, 'sim-model');
  assert.equal(info.max_total_tokens, 4096);
  assert.equal(info.model_dtype, 'float16');
  assert.equal((await call(tgi.url + '/v1/chat/completions', { model: 'sim-model', messages: [] })).status, 200);
});

test('refuse closes the port and any other mode listens again on the same port', async () => {
  const engine = await start();
  const port = engine.port;
  await engine.setFault('refuse');
  assert.equal(engine.phase(), 'refusing');
  await assert.rejects(call(engine.url + '/health'), (err: Error & { code?: string }) => err.code === 'ECONNREFUSED');
  await engine.setFault('none');
  assert.equal(engine.port, port);
  assert.equal((await call(engine.url + '/health')).status, 200);
});

test('reset-stats zeroes the counters; close() ends hanging requests', async () => {
  const engine = await start({ fault: { mode: 'hang' } });
  const hanging = call(engine.url + '/v1/completions', { prompt: 'x' }).catch((err: Error) => err);
  await until('the request at the engine', () => engine.stats().received > 0, 5_000);
  assert.equal(engine.stats().received, 1);
  assert.equal((await call(engine.url + '/health')).status, 200, 'hang only affects inference paths by default');
  const reset = await call(engine.url + '/_sim/reset-stats', {});
  assert.equal(JSON.parse(reset.text).received, 0);
  await engine.close();
  assert.ok((await hanging) instanceof Error);
});
