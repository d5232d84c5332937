// Issue 15 checks: prefill/decode disaggregation through a prefill and a decode simulator per protocol. The simulators
// check each protocol strictly (src/tools/sim/pd.ts) and record the exact bytes they received.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'undici';
import { stopAll } from '../support/process.js';
import { promtoolCheckMetrics } from '../support/prometheus.js';
import {
  allReady,
  call,
  endpointState,
  FAST_PROBES,
  metric,
  setFault,
  simRequests,
  simStats,
  startRouter,
  waitModelStatus,
  type Answer,
  type Running,
} from '../support/router.js';
import { startSimHere, stopSimsHere, type SimHere } from '../support/sim-here.js';
import { until } from '../support/within.js';
import type { PdProtocol } from '../../src/router/core/pd.js';
import { withTool } from '../support/tools.js';

const MODEL = 'pd-model';
/** odd spacing, unicode, and every field the prefill call changes */
const STREAM_BODY =
  '{ "model" : "pd-model",\n "messages":[{"role":"user","content":"Grüße, 世界 — tell me a story"}], "stream_options":{"include_usage":true},"max_tokens":5 , "min_tokens":1, "stream":true}';
const JSON_BODY = '{"model":"pd-model","messages":[{"role":"user","content":"héllo"}],"max_completion_tokens":4,"temperature":0}';

interface Pair {
  readonly prefill: SimHere;
  readonly decode: SimHere;
  readonly router: Running;
}

async function startPair(protocol: PdProtocol, routerArgs: string[] = [], prefillArgs: string[] = []): Promise<Pair> {
  const pdArgs = ['--model', MODEL, '--pd-protocol', protocol, '--ttft-ms', '1', '--itl-ms', '1'];
  const [prefill, decode] = await Promise.all([
    startSimHere([...pdArgs, '--role', 'prefill', '--id', 'prefill-sim', ...prefillArgs]),
    startSimHere([...pdArgs, '--role', 'decode', '--id', 'decode-sim']),
  ]);
  const router = await startRouter([
    '--static-backends',
    `${prefill.url},${decode.url}`,
    '--static-models',
    `${MODEL},${MODEL}`,
    '--static-backend-roles',
    'prefill,decode',
    '--pd-protocol',
    protocol,
    '--sglang-bootstrap-port',
    String(prefill.port),
    ...FAST_PROBES,
    ...routerArgs,
  ]);
  await allReady(router.url, 2);
  return { prefill, decode, router };
}

async function post(router: string, body: string, headers: Record<string, string> = {}) {
  return call(`${router}/v1/chat/completions`, { body, headers });
}

/** the decode answer reached the client, and nothing of the prefill's */
function assertDecodeAnswer(res: Awaited<ReturnType<typeof post>>, stream: boolean): void {
  assert.equal(res.status, 200, res.text);
  assert.equal(res.headers['x-sim-engine'], 'decode-sim');
  assert.doesNotMatch(res.text, /kv_transfer_params|bootstrap/);
  if (stream) {
    assert.match(res.text, /^data: .*chat\.completion\.chunk/);
    assert.match(res.text, /data: \[DONE\]\n\n$/);
  } else {
    assert.equal(res.json<{ object: string }>().object, 'chat.completion');
  }
}

/** A streaming and a JSON request through the pair, both answered by the decode engine; what each engine received. */
async function streamAndJson(
  p: Pair,
): Promise<{ prefilled: Awaited<ReturnType<typeof simRequests>>; decoded: Awaited<ReturnType<typeof simRequests>> }> {
  assertDecodeAnswer(await post(p.router.url, STREAM_BODY), true);
  assertDecodeAnswer(await post(p.router.url, JSON_BODY), false);
  const [prefilled, decoded] = await Promise.all([simRequests(p.prefill.url), simRequests(p.decode.url)]);
  return { prefilled, decoded };
}

/** Sends a stream and leaves (aborts the request) once `arrived` says the engines have it. */
async function leaveOnce(router: string, arrived: () => Promise<boolean>): Promise<void> {
  const controller = new AbortController();
  const pending = request(`${router}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: STREAM_BODY,
    signal: controller.signal,
  }).catch(() => undefined);
  await until('the request arrived', arrived);
  controller.abort();
  await pending;
}

describe('P/D: vllm-nixl', { timeout: 60_000 }, () => {
  let p: Pair;
  before(async () => {
    p = await startPair('vllm-nixl');
  });
  after(stopEverything);

  test('stream and JSON: the prefill sees exactly the modified body, the decode the prefill kv_transfer_params, the client only decode', async (t) => {
    const { prefilled, decoded } = await streamAndJson(p);
    assert.equal(prefilled.length, 2);
    assert.equal(decoded.length, 2);
    const kv =
      '"kv_transfer_params":{"do_remote_decode":true,"do_remote_prefill":false,"remote_engine_id":null,"remote_block_ids":null,"remote_host":null,"remote_port":null}';
    assert.equal(
      prefilled[0]?.body.toString(),
      `{ "model" : "pd-model",\n "messages":[{"role":"user","content":"Grüße, 世界 — tell me a story"}],"max_tokens":1, "stream":false,${kv}}`,
    );
    assert.equal(
      prefilled[1]?.body.toString(),
      `{"model":"pd-model","messages":[{"role":"user","content":"héllo"}],"max_completion_tokens":1,"temperature":0,${kv},"stream":false,"max_tokens":1}`,
    );
    // the decode got the client's bytes plus the prefill's params, which point at the prefill engine
    for (const [i, client] of [STREAM_BODY, JSON_BODY].entries()) {
      const body = decoded[i]?.body.toString() ?? '';
      assert.ok(body.startsWith(`${client.slice(0, -1)},"kv_transfer_params":{`), body);
      const params = (JSON.parse(body) as { kv_transfer_params: Record<string, unknown> }).kv_transfer_params;
      assert.equal(params.remote_engine_id, 'prefill-sim');
      assert.equal(params.remote_port, p.prefill.port);
      assert.equal(params.do_remote_prefill, true);
      assert.equal(decoded[i]?.headers['x-request-id'], prefilled[i]?.headers['x-request-id']);
    }
    // the decode pulled both prompts' KV caches from the prefill: neither was computed twice
    assert.deepEqual((await simStats(p.decode.url)).pd, {
      prefilled: 0,
      transferred: 0,
      remote: 2,
      local: 0,
      malformed: 0,
      transferFailed: 0,
    });
    assert.deepEqual((await simStats(p.prefill.url)).pd, {
      prefilled: 2,
      transferred: 2,
      remote: 0,
      local: 0,
      malformed: 0,
      transferFailed: 0,
    });
    assert.equal(await metric(p.router.url, 'llm_router_pd_requests_total', { model: MODEL, role: 'prefill' }), 2);
    assert.equal(await metric(p.router.url, 'llm_router_pd_requests_total', { model: MODEL, role: 'decode' }), 2);
    assert.equal(await metric(p.router.url, 'llm_router_model_role_ready_endpoints', { model: MODEL, role: 'prefill' }), 1);
    const exposition = (await call(`${p.router.url}/metrics`)).text;
    await withTool(t, 'promtool', 'promtool check metrics finds nothing', async () => {
      assert.deepEqual(await promtoolCheckMetrics(exposition), { code: 0, output: '' });
    });
  });

  test('the client x-request-id is the one on both calls', async () => {
    const res = await post(p.router.url, JSON_BODY, { 'x-request-id': 'trace-me-1' });
    assert.equal(res.status, 200);
    assert.equal(res.headers['x-request-id'], 'trace-me-1');
    assert.equal((await simRequests(p.prefill.url)).at(-1)?.headers['x-request-id'], 'trace-me-1');
    assert.equal((await simRequests(p.decode.url)).at(-1)?.headers['x-request-id'], 'trace-me-1');
  });

  test('a prefill that answers 400: the client gets that 400, the decode is never called', async () => {
    const before = (await simStats(p.decode.url)).received;
    const res = await post(p.router.url, JSON_BODY, { 'x-sim-status': '400' });
    assert.equal(res.status, 400);
    assert.equal(res.headers['x-sim-engine'], 'prefill-sim');
    assert.match(res.json<{ error: { message: string } }>().error.message, /x-sim-status 400/);
    assert.equal((await simStats(p.decode.url)).received, before);
    assert.equal(await metric(p.router.url, 'llm_router_pd_prefill_failures_total', { model: MODEL, kind: 'engine-4xx' }), 1);
  });

  test('a client that leaves during the prefill: the prefill call is aborted and no decode call is made', async () => {
    await setFault(p.prefill.url, { mode: 'hang' });
    const before = { prefill: await simStats(p.prefill.url), decode: await simStats(p.decode.url) };
    await leaveOnce(p.router.url, async () => (await simStats(p.prefill.url)).received === before.prefill.received + 1);
    await until('the prefill saw the abort', async () => (await simStats(p.prefill.url)).aborted === before.prefill.aborted + 1, 5_000);
    assert.equal((await simStats(p.decode.url)).received, before.decode.received);
    await setFault(p.prefill.url, { mode: 'none' });
  });

  test('a decode failure before the first byte: another decode endpoint, with the same prefill result', async () => {
    const second = await startSimHere(['--model', MODEL, '--role', 'decode', '--id', 'decode-sim-2', '--ttft-ms', '1', '--itl-ms', '1']);
    const r = await startRouter([
      '--static-backends',
      `${p.prefill.url},${p.decode.url},${second.url}`,
      '--static-models',
      `${MODEL},${MODEL},${MODEL}`,
      '--static-backend-roles',
      'prefill,decode,decode',
      ...FAST_PROBES,
    ]);
    await allReady(r.url, 3);
    const prefilledBefore = (await simStats(p.prefill.url)).pd.prefilled;
    await setFault(p.decode.url, { mode: 'overloaded' });
    // round robin starts some of them on the overloaded decode engine: each is retried on the other
    for (let i = 0; i < 4; i++) assert.equal((await post(r.url, JSON_BODY)).headers['x-sim-engine'], 'decode-sim-2');
    assert.equal((await simStats(p.prefill.url)).pd.prefilled, prefilledBefore + 4, 'one prefill per request, none repeated');
    assert.equal((await simStats(second.url)).pd.remote, 4);
    assert.ok((await simStats(p.decode.url)).failed >= 1);
    await setFault(p.decode.url, { mode: 'none' });
    await r.stop();
    await second.stop();
  });

  test('prefill down: served decode-only, counted; /v1/models says prefill is missing', async () => {
    await setFault(p.prefill.url, { mode: 'refuse' });
    const res = await post(p.router.url, JSON_BODY);
    assertDecodeAnswer(res, false);
    type Models = { data: { id: string; status: string; pd?: { missing_roles: string[] } }[] };
    await until('the prefill seen failed, the model still ready', async () => {
      const m = (await call(`${p.router.url}/v1/models`)).json<Models>().data.find((x) => x.id === MODEL);
      return m?.status === 'ready' && m.pd?.missing_roles.includes('prefill') === true;
    });
    // a client's own kv_transfer_params never reach the decode engine: the KV transfer is the router's to name
    const forged = `${JSON_BODY.slice(0, -1)},"kv_transfer_params":{"do_remote_prefill":true,"remote_engine_id":"x","remote_request_id":"x","remote_block_ids":[0],"remote_host":"10.9.9.9","remote_port":5600}}`;
    const again = await post(p.router.url, forged);
    assertDecodeAnswer(again, false);
    assert.equal((await simRequests(p.decode.url)).at(-1)?.body.toString(), JSON_BODY);
    // the first request may find the prefill refusing (prefill-failed) or already failed (no-prefill); either is decode-only
    const decodeOnly = async (reason: string): Promise<number> =>
      (await metric(p.router.url, 'llm_router_pd_decode_only_total', { model: MODEL, reason })) || 0;
    assert.equal((await decodeOnly('prefill-failed')) + (await decodeOnly('no-prefill')), 2);
    assert.equal((await simStats(p.decode.url)).pd.local, 2);
  });
});

describe('P/D: llm-d-sidecar', { timeout: 60_000 }, () => {
  let p: Pair;
  before(async () => {
    p = await startPair('llm-d-sidecar');
  });
  after(stopEverything);

  test('stream and JSON: one call to the decode sidecar naming the prefill; the sidecar runs the prefill', async () => {
    // a client's own header is dropped: only the router names the prefill
    const forged = await post(p.router.url, JSON_BODY, { 'x-prefiller-host-port': '10.9.9.9:1' });
    assertDecodeAnswer(forged, false);
    assert.equal((await simRequests(p.decode.url)).at(-1)?.headers['x-prefiller-host-port'], `127.0.0.1:${p.prefill.port}`);
    await Promise.all([p.prefill.url, p.decode.url].map((u) => call(`${u}/_sim/reset-stats`, { method: 'POST' })));
    const { prefilled, decoded } = await streamAndJson(p);
    assert.deepEqual(
      decoded.map((r) => r.body.toString()),
      [STREAM_BODY, JSON_BODY],
    );
    assert.deepEqual(
      decoded.map((r) => r.headers['x-prefiller-host-port']),
      [`127.0.0.1:${p.prefill.port}`, `127.0.0.1:${p.prefill.port}`],
    );
    assert.deepEqual(
      prefilled.map((r) => r.headers['x-request-id']),
      decoded.map((r) => r.headers['x-request-id']),
    );
    assert.equal((await simStats(p.decode.url)).pd.remote, 2);
    assert.equal(await metric(p.router.url, 'llm_router_pd_requests_total', { model: MODEL, role: 'decode' }), 3);
  });

  test('a prompt shorter than --pd-min-prompt-chars and a path with no prefill half go to the decode without the header', async () => {
    const r = await startRouter([
      '--static-backends',
      `${p.prefill.url},${p.decode.url}`,
      '--static-models',
      `${MODEL},${MODEL}`,
      '--static-backend-roles',
      'prefill,decode',
      '--pd-protocol',
      'llm-d-sidecar',
      '--pd-min-prompt-chars',
      '20',
      ...FAST_PROBES,
    ]);
    await allReady(r.url, 2);
    assert.equal((await post(r.url, JSON_BODY)).status, 200);
    assert.equal((await simRequests(p.decode.url)).at(-1)?.headers['x-prefiller-host-port'], undefined);
    assert.equal(
      (await call(`${r.url}/v1/embeddings`, { body: '{"model":"pd-model","input":"x"}' })).headers['x-sim-engine'],
      'decode-sim',
    );
    assert.equal(await metric(r.url, 'llm_router_pd_decode_only_total', { model: MODEL, reason: 'short-prompt' }), 1);
    await r.stop();
  });
});

describe('P/D: sglang', { timeout: 60_000 }, () => {
  let p: Pair;
  before(async () => {
    p = await startPair('sglang');
  });
  after(stopEverything);

  test('stream and JSON: the same body with bootstrap fields to both at once; the client gets the decode answer', async () => {
    const { prefilled, decoded } = await streamAndJson(p);
    const rooms = new Set<string>();
    for (const [i, client] of [STREAM_BODY, JSON_BODY].entries()) {
      const body = prefilled[i]?.body.toString() ?? '';
      assert.equal(decoded[i]?.body.toString(), body, 'prefill and decode get the same bytes');
      const m = new RegExp(
        `^${literal(client.slice(0, -1))},"bootstrap_host":"127\\.0\\.0\\.1","bootstrap_port":${p.prefill.port},"bootstrap_room":(\\d+)}$`,
      ).exec(body);
      assert.ok(m, body);
      assert.ok(BigInt(m[1] as string) < 1n << 63n);
      rooms.add(m[1] as string);
      assert.equal(decoded[i]?.headers['x-request-id'], prefilled[i]?.headers['x-request-id']);
    }
    assert.equal(rooms.size, 2, 'one room per request');
    assert.equal((await simStats(p.decode.url)).pd.remote, 2);
    assert.equal((await simStats(p.prefill.url)).pd.transferred, 2);
  });

  test('a prefill that answers 400: the decode call is cancelled and the client gets the 400', async () => {
    const res = await post(p.router.url, JSON_BODY, { 'x-sim-status': '400' });
    assert.equal(res.status, 400);
    assert.equal(res.headers['x-sim-engine'], 'prefill-sim');
  });

  test('a prefill that fails with a 5xx: the decode call is cancelled, 502 (sglang cannot serve decode-only)', async () => {
    await setFault(p.prefill.url, { mode: 'error500' });
    const before = await simStats(p.decode.url);
    const res = await post(p.router.url, JSON_BODY);
    assert.equal(res.status, 502);
    assert.equal(res.json<{ error: { code: string } }>().error.code, 'upstream_unavailable');
    // the decode call may be cut before it was even sent: either way it never runs on
    await until('the decode call cancelled', async () => {
      const now = await simStats(p.decode.url);
      return now.running === 0 && now.received - before.received === now.aborted - before.aborted;
    });
    assert.equal((await simStats(p.decode.url)).completed, before.completed);
    await setFault(p.prefill.url, { mode: 'none' });
  });

  test('a client that leaves during the prefill: neither call continues', async () => {
    await setFault(p.prefill.url, { mode: 'hang' });
    const before = { prefill: await simStats(p.prefill.url), decode: await simStats(p.decode.url) };
    await leaveOnce(p.router.url, async () => {
      const [a, b] = await Promise.all([simStats(p.prefill.url), simStats(p.decode.url)]);
      return a.received === before.prefill.received + 1 && b.received === before.decode.received + 1;
    });
    await until('both saw the abort', async () => {
      const [a, b] = await Promise.all([simStats(p.prefill.url), simStats(p.decode.url)]);
      return a.aborted === before.prefill.aborted + 1 && b.aborted === before.decode.aborted + 1;
    });
    await setFault(p.prefill.url, { mode: 'none' });
  });

  test('a decode endpoint that cannot be reached: the prefill call is given up, the client gets an error, not silence', async () => {
    const before = await simStats(p.prefill.url);
    // refused until the router has seen it fail (not for a fixed time: its probes of a failed endpoint back off, and
    // one that fell in the refusal would put off its return); the engine is in this process, so it is told directly
    await setFault(p.decode.url, { mode: 'refuse' });
    const res = await post(p.router.url, JSON_BODY);
    assert.ok(res.status === 502 || res.status === 503, `${res.status} ${res.text}`);
    await until('the prefill call given up', async () => {
      const now = await simStats(p.prefill.url);
      return now.running === 0 && now.received - before.received === now.aborted - before.aborted;
    });
    // the refused connection failed the decode endpoint; it is back once the simulator listens again
    await endpointState(p.router.url, p.decode.url, 'failed');
    await p.decode.engine.setFault('none');
    await endpointState(p.router.url, p.decode.url, 'ready');
  });

  test('prefill down: 503 model_unavailable naming the missing role; /engines and /v1/models say so', async () => {
    await setFault(p.prefill.url, { mode: 'refuse' });
    await waitModelStatus(p.router.url, MODEL, 'unavailable');
    const res = await post(p.router.url, JSON_BODY);
    assert.equal(res.status, 503);
    assert.equal(res.json<{ error: { code: string } }>().error.code, 'model_unavailable');
    assert.match(res.json<{ error: { message: string } }>().error.message, /no ready prefill engine/);
    assert.equal(res.headers['x-llm-router-model-state'], 'unavailable');
    const engines = (await call(`${p.router.url}/engines`)).json<{
      endpoints: { role: string }[];
      models: { id: string; pd: { missing: string[] } }[];
    }>();
    assert.deepEqual(engines.endpoints.map((e) => e.role).sort(), ['decode', 'prefill']);
    assert.deepEqual(engines.models.find((m) => m.id === MODEL)?.pd.missing, ['prefill']);
  });
});

describe('P/D: sglang, two prefill endpoints', { timeout: 90_000, concurrency: true }, () => {
  after(stopEverything);

  /**
   * Two prefill engines (A, B) and a decode engine, as the given flavour. Only B's bootstrap port is the router's, so a
   * request whose pair is A can only be served by failing over to B. Ready engines are probed every 30 s: the router
   * learns what it is told only from the requests.
   */
  async function twoPrefills(simArgs: string[], routerArgs: string[]) {
    const pdArgs = ['--model', 'pbase', '--pd-protocol', 'sglang', '--ttft-ms', '1', '--itl-ms', '1', ...simArgs];
    const [a, b, decode] = await Promise.all([
      startSimHere([...pdArgs, '--role', 'prefill', '--id', 'prefill-a']),
      startSimHere([...pdArgs, '--role', 'prefill', '--id', 'prefill-b']),
      startSimHere([...pdArgs, '--role', 'decode', '--id', 'decode-sim']),
    ]);
    const router = await startRouter([
      '--static-backends',
      `${a.url},${b.url},${decode.url}`,
      '--static-models',
      'pbase,pbase,pbase',
      '--static-backend-roles',
      'prefill,prefill,decode',
      '--pd-protocol',
      'sglang',
      '--sglang-bootstrap-port',
      String(b.port),
      ...FAST_PROBES,
      '--probe-ready-interval',
      '30',
      ...routerArgs,
    ]);
    await allReady(router.url, 3);
    return { a, b, decode, router };
  }

  /** Requests for `model` until prefill A has been tried (the prefill policy picks at random among equals); every answer. */
  async function untilATried(router: string, model: string, triedA: () => Promise<boolean>): Promise<Answer[]> {
    const answers: Answer[] = [];
    for (let i = 0; i < 12; i++) {
      answers.push(await post(router, JSON.stringify({ model, messages: [{ role: 'user', content: `hi ${i}` }], max_tokens: 2 })));
      if (answers.at(-1)?.status !== 200 || (await triedA())) return answers;
    }
    assert.fail('prefill A was never picked in 12 requests');
  }

  test('a prefill whose connection is refused: the pair is made again with the other prefill endpoint, not a 502', async () => {
    const { a, b, decode, router } = await twoPrefills([], []);
    await setFault(a.url, { mode: 'refuse' });
    const failovers = () => metric(router.url, 'llm_router_failovers_total', { model: 'pbase' });
    const answers = await untilATried(router.url, 'pbase', async () => (await failovers()) >= 1);
    assert.deepEqual(
      answers.map((r) => `${r.status} ${r.status === 200 ? '' : r.text}`.trim()),
      answers.map(() => '200'),
    );
    assert.equal(answers.at(-1)?.headers['x-sim-engine'], 'decode-sim');
    assert.ok((await metric(router.url, 'llm_router_pd_prefill_failures_total', { model: 'pbase', kind: 'connect' })) >= 1);
    await Promise.all([a, b, decode, router].map((p) => p.stop()));
  });

  test('SGLang with LoRA: a prefill that answers 400 "not loaded" is learned and the other prefill endpoint serves it', async () => {
    const lora = ['--engine-kind', 'sglang', '--enable-lora', '--max-loras', '4', '--lora-modules', 'pa=/adapters/pa'];
    const { a, b, decode, router } = await twoPrefills(lora, ['--engine-kind', 'sglang', '--lora-adapters', 'pa@pbase=/adapters/pa']);
    const holders = async (): Promise<number | undefined> =>
      (await call(`${router.url}/v1/models`)).json<{ data: { id: string; loaded_endpoints?: number }[] }>().data.find((m) => m.id === 'pa')
        ?.loaded_endpoints;
    assert.equal(await holders(), 3, 'both prefill engines and the decode engine hold it');
    // another replica unloads it from A behind this router's back
    const unload = await call(`${a.url}/unload_lora_adapter`, { body: JSON.stringify({ lora_name: 'pa' }) });
    assert.equal(unload.status, 200, unload.text);
    const received = async (): Promise<number> => (await simStats(a.url)).received;
    const before = await received();
    const answers = await untilATried(router.url, 'pa', async () => (await received()) > before);
    assert.deepEqual(
      answers.map((r) => `${r.status} ${r.status === 200 ? '' : r.text}`.trim()),
      answers.map(() => '200'),
      'the 400 meant for the router never reached the client',
    );
    assert.equal(await holders(), 2, 'the router learned that A no longer holds it');
    assert.ok((await metric(router.url, 'llm_router_pd_prefill_failures_total', { model: 'pa', kind: 'model-missing' })) >= 1);
    const served = (await simRequests(b.url)).filter((r) => r.path === '/v1/chat/completions').at(-1);
    assert.equal(JSON.parse(served?.body.toString() ?? '{}').model, 'pbase:pa', 'B prefilled it, by its SGLang name');
    await Promise.all([a, b, decode, router].map((p) => p.stop()));
  });
});

/** The routers (processes) and the simulators (in this process) a suite started. */
async function stopEverything(): Promise<void> {
  await Promise.all([stopAll(), stopSimsHere()]);
}

function literal(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
