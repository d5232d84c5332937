// Issue 2 checks against real processes: consistent 404/503 across router processes, streaming pass-through,
// abort propagation, bad input, aliases, admin endpoints.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { request } from 'undici';
import { INFERENCE_PATHS } from '../../src/router/server/pipeline.js';
import { startCli, stopAll } from '../support/process.js';
import { call, chat, engines, simStats, startRouter, waitModelStatus, type Running } from '../support/router.js';
import { startLocalSim, stopLocalSims, type LocalSim } from '../support/sim-here.js';
import { eventually, until } from '../support/within.js';

describe('router in front of a simulated engine', { timeout: 60_000 }, () => {
  let sim: LocalSim;
  let routerA: Running;
  const routerArgs = (simUrl: string): string[] => [
    '--static-backends',
    simUrl,
    '--static-models',
    'chat-model',
    '--known-models',
    'sleeper',
    '--static-aliases',
    'gpt-4o:chat-model',
    '--max-body-bytes',
    '4096',
  ];

  before(async () => {
    sim = await startLocalSim(['--model', 'chat-model', '--ttft-ms', '10', '--itl-ms', '5', '--output-tokens', '8', '--id', 'e1']);
    routerA = await startRouter(routerArgs(sim.url));
    await waitModelStatus(routerA.url, 'chat-model', 'ready');
  });
  after(async () => {
    await stopAll();
    await stopLocalSims();
  });

  test('two router processes started at different times answer byte-identically for ready, scaled-to-zero and unknown models', async () => {
    // router A has run since before(), through its first probes: B starts later whatever the machine's pace
    const routerB = await startRouter(routerArgs(sim.url));
    try {
      await waitModelStatus(routerB.url, 'chat-model', 'ready');
      for (const model of ['chat-model', 'sleeper', 'never-declared', 'gpt-4o']) {
        const [a, b] = await Promise.all([routerA, routerB].map((r) => call(`${r.url}/v1/chat/completions`, { body: chat(model) })));
        const shape = (x: Awaited<ReturnType<typeof call>>): string =>
          JSON.stringify([
            x.status,
            x.status === 200 ? null : x.json<{ error: { code: string } }>().error.code,
            x.headers['x-llm-router-model-state'] ?? null,
          ]);
        assert.equal(shape(a!), shape(b!), model);
      }
      const zero = await call(`${routerB.url}/v1/chat/completions`, { body: chat('sleeper') });
      assert.equal(zero.status, 503);
      assert.equal(zero.headers['x-llm-router-model-state'], 'scaled-to-zero');
      assert.ok(Number(zero.headers['retry-after']) >= 1);
      assert.equal(zero.json<{ error: { code: string; type: string } }>().error.code, 'model_unavailable');
      const unknown = await call(`${routerB.url}/v1/chat/completions`, { body: chat('never-declared') });
      assert.equal(unknown.status, 404);
      assert.equal(unknown.headers['x-llm-router-model-state'], undefined);
      assert.deepEqual(unknown.json<{ error: { code: string; type: string } }>().error.code, 'model_not_found');
      assert.equal(unknown.json<{ error: { type: string } }>().error.type, 'invalid_request_error');
      const ok = await call(`${routerB.url}/v1/chat/completions`, { body: chat('chat-model') });
      assert.equal(ok.status, 200);
      assert.equal(ok.headers['x-llm-router-model-state'], undefined);
    } finally {
      await routerB.stop();
    }
  });

  test('a streamed completion arrives chunk by chunk, and closing the client aborts the engine request', async () => {
    // tokens 100 ms apart: at the engine's usual 5 ms, a client that a busy machine holds up for a few ms reads
    // several chunks at once, and "chunk by chunk" could not be told from "buffered"
    await call(`${sim.url}/_sim/fault`, { body: JSON.stringify({ mode: 'slow-chunks', delayMs: 100 }) });
    const arrivals: number[] = [];
    let text = '';
    try {
      const res = await request(`${routerA.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: chat('chat-model', { stream: true, max_tokens: 8 }),
      });
      assert.equal(res.statusCode, 200);
      assert.match(String(res.headers['content-type']), /text\/event-stream/);
      for await (const chunk of res.body) {
        arrivals.push(performance.now());
        text += String(chunk);
      }
    } finally {
      await call(`${sim.url}/_sim/fault`, { body: JSON.stringify({ mode: 'none' }) });
    }
    assert.match(text, /data: \[DONE\]/);
    assert.ok(arrivals.length >= 4, `expected several chunks, got ${arrivals.length}`);
    // 7 gaps of 100 ms between the 8 tokens: a router that buffered the stream would deliver it in one piece
    assert.ok(
      arrivals.at(-1)! - arrivals[0]! >= 300,
      `the first chunk came well before the last (${Math.round(arrivals.at(-1)! - arrivals[0]!)} ms)`,
    );

    // a slow stream, abandoned after its first chunk
    await call(`${sim.url}/_sim/fault`, { body: JSON.stringify({ mode: 'slow-chunks', delayMs: 300 }) });
    try {
      const before = await simStats(sim.url);
      const controller = new AbortController();
      const slow = await request(`${routerA.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: chat('chat-model', { stream: true, max_tokens: 50 }),
        signal: controller.signal,
      });
      for await (const _ of slow.body) break;
      controller.abort();
      const stats = await eventually(
        'the engine to see the abort',
        () => simStats(sim.url),
        (s) => s.aborted > before.aborted,
        5_000,
      );
      assert.equal(stats.aborted, before.aborted + 1, 'the engine saw the abort');
      assert.equal(stats.running, 0, 'the engine freed the slot');
    } finally {
      await call(`${sim.url}/_sim/fault`, { body: JSON.stringify({ mode: 'none' }) });
    }
    await until('nothing in flight', async () => (await engines(routerA.url))[0]!.inFlight === 0, 10_000);
  });

  test('bad input gets its status and stable code, and the router keeps serving', async () => {
    const cases: { name: string; body: string | Buffer; status: number; code: string; path?: string }[] = [
      { name: 'not JSON', body: '{"model": "chat-model",', status: 400, code: 'invalid_json' },
      { name: 'empty body', body: '', status: 400, code: 'invalid_json' },
      { name: 'JSON array', body: '[1,2]', status: 400, code: 'invalid_json' },
      { name: 'JSON string', body: '"chat-model"', status: 400, code: 'invalid_json' },
      { name: 'invalid UTF-8 bytes', body: Buffer.from([0x7b, 0xff, 0xfe, 0x7d]), status: 400, code: 'invalid_json' },
      { name: 'no model', body: '{"messages":[]}', status: 400, code: 'model_required' },
      { name: 'model is a number', body: '{"model":42}', status: 400, code: 'model_required' },
      { name: 'model is empty', body: '{"model":""}', status: 400, code: 'model_required' },
      {
        name: 'body too large',
        body: JSON.stringify({ model: 'chat-model', prompt: 'x'.repeat(5000) }),
        status: 413,
        code: 'body_too_large',
      },
      { name: 'unknown model', body: chat('nope'), status: 404, code: 'model_not_found' },
      { name: 'unknown path', body: chat('chat-model'), status: 404, code: 'not_found', path: '/v1/nothing-here' },
    ];
    for (const c of cases) {
      const res = await call(`${routerA.url}${c.path ?? '/v1/completions'}`, { body: c.body });
      assert.equal(res.status, c.status, c.name);
      const err = res.json<{ error: { code: string; message: string; type: string; param: unknown } }>().error;
      assert.equal(err.code, c.code, c.name);
      assert.equal(typeof err.message, 'string');
      assert.ok('param' in err && 'type' in err, `${c.name}: OpenAI error shape`);
    }
    const wrongMethod = await call(`${routerA.url}/v1/chat/completions`, { method: 'GET' });
    assert.equal(wrongMethod.status, 405);
    assert.equal((await call(`${routerA.url}/v1/chat/completions`, { body: chat('chat-model') })).status, 200);
  });

  test('a body larger than the limit sent in chunks without a length is refused without buffering it', async () => {
    const socket = net.connect(routerA.port, '127.0.0.1');
    await new Promise((r) => socket.once('connect', r));
    let answer = '';
    socket.on('data', (d) => (answer += String(d)));
    socket.write('POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n');
    for (let i = 0; i < 5; i++) socket.write(`3e8\r\n${'x'.repeat(1000)}\r\n`);
    await until('the 413', () => answer.includes('body_too_large'), 5_000, 20);
    socket.destroy();
    assert.match(answer, /^HTTP\/1.1 413/);
    assert.equal(
      (await call(`${routerA.url}/v1/completions`, { body: JSON.stringify({ model: 'chat-model', prompt: 'hi' }) })).status,
      200,
    );
  });

  test('an alias is forwarded under its target name with the rest of the body untouched', async () => {
    const res = await call(`${routerA.url}/v1/chat/completions`, { body: chat('gpt-4o') });
    assert.equal(res.status, 200);
    assert.equal(res.json<{ model: string }>().model, 'chat-model');
  });

  test('x-request-id is kept or generated and returned; engine headers pass through', async () => {
    const kept = await call(`${routerA.url}/v1/completions`, {
      body: JSON.stringify({ model: 'chat-model', prompt: 'hi' }),
      headers: { 'x-request-id': 'my-id-1' },
    });
    assert.equal(kept.headers['x-request-id'], 'my-id-1');
    assert.equal(kept.headers['x-sim-engine'], 'e1');
    const made = await call(`${routerA.url}/v1/completions`, { body: JSON.stringify({ model: 'chat-model', prompt: 'hi' }) });
    assert.match(String(made.headers['x-request-id']), /^[0-9a-f-]{36}$/);
  });

  test('every OpenAI path is routed by model, and engine errors pass through unchanged', async () => {
    // chat and text completions have their own tests above
    for (const path of INFERENCE_PATHS.filter((p) => p !== '/v1/chat/completions' && p !== '/v1/completions')) {
      const res = await call(`${routerA.url}${path}`, {
        body: JSON.stringify({
          model: 'chat-model',
          input: 'x',
          prompt: 'x',
          query: 'q',
          documents: ['d'],
          text_1: 'a',
          text_2: 'b',
          tokens: [1],
        }),
      });
      assert.equal(res.status, 200, path);
    }
    await call(`${sim.url}/_sim/fault`, { body: JSON.stringify({ mode: 'error500' }) });
    try {
      const res = await call(`${routerA.url}/v1/completions`, { body: JSON.stringify({ model: 'chat-model', prompt: 'x' }) });
      const direct = await call(`${sim.url}/v1/completions`, { body: JSON.stringify({ model: 'chat-model', prompt: 'x' }) });
      assert.equal(res.status, 500);
      assert.equal(res.text, direct.text);
    } finally {
      await call(`${sim.url}/_sim/fault`, { body: JSON.stringify({ mode: 'none' }) });
    }
  });

  test('admin endpoints: /health, /ready, /v1/models with status, /engines, /metrics with demand for a model at zero', async () => {
    assert.equal((await call(`${routerA.url}/health`)).status, 200);
    assert.equal((await call(`${routerA.url}/ready`)).status, 200);
    const models = (await call(`${routerA.url}/v1/models`)).json<{
      object: string;
      data: { id: string; object: string; status: string }[];
    }>();
    assert.equal(models.object, 'list');
    assert.deepEqual(
      models.data.map((m) => [m.id, m.status]),
      [
        ['chat-model', 'ready'],
        ['gpt-4o', 'ready'],
        ['sleeper', 'scaled-to-zero'],
      ],
    );
    const list = await engines(routerA.url);
    assert.equal(list.length, 1);
    assert.equal(list[0]!.state, 'ready');
    await call(`${routerA.url}/v1/chat/completions`, { body: chat('sleeper') });
    const metrics = (await call(`${routerA.url}/metrics`)).text;
    assert.match(metrics, /llm_router_model_demand_total\{model="sleeper"\} [1-9]/);
    assert.match(metrics, /llm_router_requests_total\{model="sleeper",status="503"\} [1-9]/);
    assert.match(metrics, /llm_router_requests_total\{model="chat-model",status="200"\} [1-9]/);
    assert.match(metrics, /llm_router_request_duration_seconds_bucket\{le="[^"]+",model="chat-model"\}/);
    assert.match(metrics, /llm_router_endpoint_in_flight\{endpoint="http:\/\/127\.0\.0\.1:\d+"\} 0/);
    assert.match(metrics, /llm_router_requests_total\{model="__unknown__",status="404"\}/);
  });
});

// the two tests at once: the four refused starts are short and light beside the workers' ramp
describe('command line', { timeout: 30_000, concurrency: true }, () => {
  after(async () => {
    await stopAll();
    await stopLocalSims();
  });
  test('unknown flags exit 2 with a usage hint; unsupported vllm_router flags name the flag', async () => {
    // the four processes at once, each checked on its own
    const refusals = [
      [['serve', '--bogus'], /unknown flag --bogus/],
      [['serve', '--enable-batch-api'], /--enable-batch-api is not supported by llm-router/],
      [['serve', '--k8s-service-discovery-type', 'service-name'], /only pod-ip/],
      [['--port', '0', '--lmcache-controller-port', '9000'], /--lmcache-controller-port is not supported/],
    ] as const;
    await Promise.all(
      refusals.map(async ([args, pattern]) => {
        const p = startCli(args);
        const code = await new Promise<number | null>((resolve) => p.child.once('exit', (c) => resolve(c)));
        assert.equal(code, 2, args.join(' '));
        assert.match(p.output(), pattern);
      }),
    );
  });

  test('--workers 2: two processes share the port and both serve; /metrics counts both on every scrape; SIGTERM stops them all with exit 0', async () => {
    const sim = await startLocalSim(['--model', 'w']);
    // port 0: the primary binds it once and every worker listens on that same port (node:cluster)
    const router = await startRouter(['--workers', '2', '--static-backends', sim.url, '--static-models', 'w', '--probe-interval', '0.2']);
    const p = router.proc;
    await p.waitForOutput(/llm-router listening[\s\S]*llm-router listening/, 20_000);
    const workerPids = [...p.output().matchAll(/"pid":(\d+)[^\n]*"msg":"llm-router listening"/g)].map((m) => Number(m[1]));
    assert.equal(new Set(workerPids).size, 2, 'two worker processes listen');
    const url = router.url;
    assert.equal(new Set([...p.output().matchAll(/"url":"([^"]+)"/g)].map((m) => m[1])).size, 1, 'both workers on one port');
    // each request on a fresh connection, which the primary hands to the workers in turn
    const once = async (path: string, body?: string): Promise<{ status: number; text: string }> => {
      const res = await request(`${url}${path}`, {
        method: body ? 'POST' : 'GET',
        body,
        headers: { 'content-type': 'application/json' },
        reset: true,
      });
      return { status: res.statusCode, text: await res.body.text() };
    };
    const deadline = Date.now() + 15_000;
    let ready = 0;
    // every 200 answered, counted from the first: while one worker is not ready yet, the other keeps answering 200
    // (a busy machine makes that ramp longer), and those count in its metrics too
    let answered = 0;
    while (ready < 6 && Date.now() < deadline) {
      const ok = (await once('/v1/chat/completions', chat('w'))).status === 200;
      if (ok) answered++;
      ready = ok ? ready + 1 : 0;
    }
    assert.equal(ready, 6, 'both workers route once their own prober found the engine ready');
    for (let i = 0; i < 20; i++) assert.equal((await once('/v1/chat/completions', chat('w'))).status, 200);
    answered += 20;
    // both workers answered requests: each access-log line names its worker
    const servedBy = new Set([...p.output().matchAll(/"worker":(\d+)[^\n]*"status":200[^\n]*"msg":"request"/g)].map((m) => Number(m[1])));
    assert.equal(servedBy.size, 2, `both workers served: ${[...servedBy]}`);
    // each worker holds its own keep-alive connection to the engine: the instance's are their sum
    const pool = (await once('/metrics')).text;
    assert.match(pool, new RegExp(`^llm_router_engine_connections_open\\{endpoint="${sim.url}"\\} 2$`, 'm'), 'one per worker, summed');
    assert.match(pool, new RegExp(`^llm_router_engine_connections_busy\\{endpoint="${sim.url}"\\} 0$`, 'm'));
    // and every scrape, whichever worker takes it, counts every worker's requests (the primary combines them)
    for (let i = 0; i < 10; i++) {
      const m = /llm_router_requests_total\{model="w",status="200"\} (\d+)/.exec((await once('/metrics')).text);
      assert.equal(Number(m?.[1]), answered, 'each scrape shows all the 200s');
    }
    const code = await p.stop('SIGTERM');
    assert.equal(code, 0);
    for (const pid of workerPids) assert.throws(() => process.kill(pid, 0), `worker ${pid} stopped`);
  });
});
