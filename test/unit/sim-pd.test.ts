// The simulator as one half of a P/D pair (issue 15, item 6): the protocol checks, and decode TTFT that depends on
// whether a prefill engine really computed the prompt.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'undici';
import { startSimEngine, type SimEngine } from '../../src/tools/sim/engine.js';
import {
  checkNixlPrefill,
  MalformedPd,
  NIXL_PREFILL_PARAMS,
  readBootstrap,
  readNixlParams,
  readPrefillerHeader,
} from '../../src/tools/sim/pd-checks.js';
import { PrefillLedger } from '../../src/tools/sim/pd-peer.js';

const engines: SimEngine[] = [];
after(async () => {
  await Promise.all(engines.map((e) => e.close()));
});

async function start(options: Parameters<typeof startSimEngine>[0]): Promise<SimEngine> {
  const engine = await startSimEngine({ port: 0, models: ['m'], ttftMs: 2, itlMs: 1, outputTokens: 2, ...options });
  engines.push(engine);
  return engine;
}

async function post(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; json: Record<string, unknown>; ms: number }> {
  const t0 = performance.now();
  const res = await request(`${url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const json = (await res.body.json()) as Record<string, unknown>;
  return { status: res.statusCode, json, ms: performance.now() - t0 };
}

const prefillBody = (prompt: string): object => ({
  model: 'm',
  prompt,
  max_tokens: 1,
  stream: false,
  kv_transfer_params: NIXL_PREFILL_PARAMS,
});

test('prefill requests are checked field by field', () => {
  const ok = prefillBody('x') as Record<string, unknown>;
  checkNixlPrefill(ok, '/v1/completions');
  for (const [what, body] of [
    ['no params', { ...ok, kv_transfer_params: undefined }],
    ['remote decode off', { ...ok, kv_transfer_params: { ...NIXL_PREFILL_PARAMS, do_remote_decode: false } }],
    ['streamed', { ...ok, stream: true }],
    ['stream_options kept', { ...ok, stream_options: {} }],
    ['two tokens', { ...ok, max_tokens: 2 }],
    ['min_tokens kept', { ...ok, min_tokens: 1 }],
    ['max_completion_tokens not 1', { ...ok, max_completion_tokens: 8 }],
  ] as const)
    assert.throws(() => checkNixlPrefill(body, '/v1/completions'), MalformedPd, what);
  checkNixlPrefill({ ...ok, max_tokens: undefined, max_output_tokens: 1 }, '/v1/responses');
});

test('decode fields: absent or incomplete is a local prefill, malformed is refused', () => {
  assert.equal(readNixlParams(undefined), undefined);
  assert.equal(readNixlParams({ do_remote_prefill: false }), undefined);
  assert.equal(readNixlParams({ do_remote_prefill: true, remote_host: 'h' }), undefined, 'a missing remote_* field: computed locally');
  const full = {
    do_remote_prefill: true,
    remote_engine_id: 'p',
    remote_request_id: 'r',
    remote_block_ids: [0, 1],
    remote_host: 'h',
    remote_port: 5600,
  };
  assert.deepEqual(readNixlParams(full), { engineId: 'p', requestId: 'r', blockIds: [0, 1], host: 'h', port: 5600 });
  assert.throws(() => readNixlParams('x'), MalformedPd);
  assert.throws(() => readNixlParams({ ...full, remote_port: '5600' }), MalformedPd);
  assert.throws(() => readNixlParams({ ...full, remote_block_ids: [-1] }), MalformedPd);

  const raw = '{"bootstrap_host":"10.0.0.1","bootstrap_port":8998,"bootstrap_room":9223372036854775807}';
  assert.deepEqual(readBootstrap(JSON.parse(raw), raw), { host: '10.0.0.1', port: 8998, room: '9223372036854775807' });
  assert.equal(readBootstrap({}, '{}'), undefined);
  for (const bad of [
    '{"bootstrap_host":"h","bootstrap_port":8998,"bootstrap_room":9223372036854775808}',
    '{"bootstrap_host":"h","bootstrap_port":8998,"bootstrap_room":-1}',
    '{"bootstrap_host":"h","bootstrap_port":8998,"bootstrap_room":1.5}',
    '{"bootstrap_host":"h","bootstrap_port":0,"bootstrap_room":1}',
    '{"bootstrap_host":"h","bootstrap_room":1}',
  ])
    assert.throws(() => readBootstrap(JSON.parse(bad), bad), MalformedPd, bad);

  assert.deepEqual(readPrefillerHeader('10.0.0.1:8000'), { host: '10.0.0.1', port: 8000 });
  assert.deepEqual(readPrefillerHeader('[fd00::1]:8000,10.0.0.2:8000'), { host: '[fd00::1]', port: 8000 });
  assert.equal(readPrefillerHeader(undefined), undefined);
  assert.throws(() => readPrefillerHeader('10.0.0.1'), MalformedPd);
});

test('a decode engine computes a prompt itself unless a prefill engine did: TTFT and counters show which', async () => {
  const slow = { prefillMsPerToken: 20 };
  const prefill = await start({ role: 'prefill', id: 'p', ...slow });
  const decode = await start({ role: 'decode', id: 'd', ...slow });
  const prompt = 'one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen';

  const local = await post(decode.url, { model: 'm', prompt, max_tokens: 2 });
  assert.equal(local.status, 200);
  assert.ok(local.ms >= 15 * 20, `local prefill took ${local.ms} ms`);

  const answered = await post(prefill.url, prefillBody(prompt));
  assert.equal(answered.status, 200);
  const params = answered.json.kv_transfer_params as Record<string, unknown>;
  assert.equal(params.remote_engine_id, 'p');
  assert.equal(params.remote_port, prefill.port);
  const remote = await post(decode.url, { model: 'm', prompt, max_tokens: 2, kv_transfer_params: params });
  assert.equal(remote.status, 200);
  assert.ok(remote.ms < local.ms / 2, `remote ${remote.ms} ms, local ${local.ms} ms`);

  // the same params again: the KV cache was pulled once and is gone, so the decode computes it
  await post(decode.url, { model: 'm', prompt, max_tokens: 2, kv_transfer_params: params });
  // params for another prompt: the prefill refuses the pull
  const other = await post(prefill.url, prefillBody('something else'));
  await post(decode.url, { model: 'm', prompt, max_tokens: 2, kv_transfer_params: other.json.kv_transfer_params });
  assert.deepEqual(decode.stats().pd, { prefilled: 0, transferred: 0, remote: 1, local: 3, malformed: 0, transferFailed: 2 });
  assert.deepEqual(prefill.stats().pd, { prefilled: 2, transferred: 1, remote: 0, local: 0, malformed: 0, transferFailed: 0 });

  assert.equal((await post(decode.url, { model: 'm', prompt, kv_transfer_params: [1] })).status, 400);
  assert.equal((await post(prefill.url, { model: 'm', prompt })).status, 400, 'a prefill engine refuses a request that is not a prefill');
  assert.equal(decode.stats().pd.malformed, 1);
  assert.equal(prefill.stats().pd.malformed, 1);
});

test('sglang: the two halves meet in a room; a room used twice is refused; a decode with no prefill partner fails', async () => {
  const prefill = await start({ role: 'prefill', pdProtocol: 'sglang', id: 'p' });
  const decode = await start({ role: 'decode', pdProtocol: 'sglang', id: 'd' });
  const body = (room: number): object => ({
    model: 'm',
    prompt: 'hi',
    bootstrap_host: '127.0.0.1',
    bootstrap_port: prefill.port,
    bootstrap_room: room,
  });
  const [p, d] = await Promise.all([post(prefill.url, body(7)), post(decode.url, body(7))]);
  assert.deepEqual([p.status, d.status], [200, 200]);
  assert.equal(decode.stats().pd.remote, 1);
  const [p2, p3] = await Promise.all([post(prefill.url, body(8)), post(prefill.url, body(8)), post(decode.url, body(8))]);
  assert.deepEqual([p2.status, p3.status].sort(), [200, 400]);
  const lonely = await post(decode.url, { ...body(9), bootstrap_port: decode.port });
  assert.equal(lonely.status, 500, 'the decode engine is not a bootstrap server');
  assert.equal(decode.stats().pd.transferFailed, 1);
  assert.equal((await post(decode.url, { model: 'm', prompt: 'hi' })).status, 200, 'no bootstrap fields: computed locally');
  assert.equal(decode.stats().pd.local, 1);
});

test('a prefill engine that stops ends its open rooms: the decode engine waiting in one hears the prefill is gone', async () => {
  // as the process of a stopped engine would be gone: a room's 10 s timer must not outlive an engine closed in a test process
  const ledger = new PrefillLedger();
  const waiting = ledger.room('r1');
  const other = ledger.room('r2');
  ledger.closeAll();
  assert.deepEqual(await Promise.all([waiting.done, other.done]), ['prefill-gone', 'prefill-gone']);
  assert.notEqual(ledger.room('r1'), waiting, 'the room is gone: the same id opens a new one');
  ledger.closeAll();
});
