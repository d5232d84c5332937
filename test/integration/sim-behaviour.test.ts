// `llm-router sim` as a real process: streaming over time, client aborts, queueing, every fault mode.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'undici';
import { stopAll } from '../support/process.js';
import { setFault, simStats, startSim } from '../support/router.js';
import { eventually } from '../support/within.js';

let fast: string; // ttft 50 ms, itl 100 ms, 5 tokens: for streaming and faults
let slow: string; // one slot, 1000 tokens at 50 ms: requests that run until aborted

before(async () => {
  const [a, b] = await Promise.all([
    startSim(['--id', 'fast', '--ttft-ms', '50', '--itl-ms', '100', '--output-tokens', '5']),
    startSim(['--id', 'slow', '--ttft-ms', '10', '--itl-ms', '50', '--output-tokens', '1000', '--max-num-seqs', '1']),
  ]);
  fast = a.url;
  slow = b.url;
});
after(stopAll);

/** GET a path and return the status, discarding the body so the connection is reused. */
async function statusOf(url: string, opts: { signal?: AbortSignal } = {}): Promise<number> {
  const res = await request(url, opts);
  await res.body.dump();
  return res.statusCode;
}

function chat(base: string, body: Record<string, unknown>, signal?: AbortSignal) {
  return request(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'sim-model', messages: [{ role: 'user', content: 'hello' }], ...body }),
    signal,
    headersTimeout: 10_000,
    bodyTimeout: 10_000,
  });
}

/** Reads an SSE body, noting when each event arrived. */
async function readEvents(body: AsyncIterable<Buffer>): Promise<Array<{ at: number; data: string }>> {
  const events: Array<{ at: number; data: string }> = [];
  let pending = '';
  for await (const chunk of body) {
    pending += chunk.toString('utf8');
    for (let end = pending.indexOf('\n\n'); end >= 0; end = pending.indexOf('\n\n')) {
      const frame = pending.slice(0, end);
      pending = pending.slice(end + 2);
      assert.ok(frame.startsWith('data: '), frame);
      events.push({ at: Date.now(), data: frame.slice(6) });
    }
  }
  assert.equal(pending, '', 'no partial event at the end');
  return events;
}

function contentOf(data: string): string | undefined {
  if (data === '[DONE]') return undefined;
  return (JSON.parse(data) as { choices: Array<{ delta?: { content?: string } }> }).choices[0]?.delta?.content || undefined;
}

test('a stream sends one chunk per token spaced by the inter-token latency, then usage and [DONE]', async () => {
  const started = Date.now();
  const res = await chat(fast, { stream: true, stream_options: { include_usage: true } });
  assert.equal(res.statusCode, 200);
  assert.match(String(res.headers['content-type']), /^text\/event-stream/);
  assert.equal(res.headers['x-sim-engine'], 'fast');
  const events = await readEvents(res.body);
  const tokens = events.filter((e) => contentOf(e.data) !== undefined);
  assert.deepEqual(
    tokens.map((e) => contentOf(e.data)),
    ['The', ' quick', ' brown', ' fox', ' jumps'],
  );
  // 4 gaps of 100 ms: allow a wide margin below, none needed above
  assert.ok(tokens[4]!.at - tokens[0]!.at >= 250, `tokens spread over ${tokens[4]!.at - tokens[0]!.at} ms`);
  assert.ok(tokens[0]!.at - started >= 40, 'first token after the TTFT');
  const usage = JSON.parse(events[events.length - 2]!.data) as { choices: unknown[]; usage: { completion_tokens: number } };
  assert.deepEqual(usage.choices, []);
  assert.equal(usage.usage.completion_tokens, 5);
  assert.equal(events[events.length - 1]!.data, '[DONE]');
  const last = JSON.parse(tokens[4]!.data) as { choices: Array<{ finish_reason: string }> };
  assert.equal(last.choices[0]!.finish_reason, 'stop');
});

test('--prefill-stalls-decode: a long prompt pauses a running stream and queues behind another prompt; without it neither', async () => {
  // prefill of a ~300-token prompt at 1 ms per token: about 300 ms of the engine's one compute lane
  const engine = [
    '--ttft-ms',
    '0',
    '--itl-ms',
    '10',
    '--output-tokens',
    '150',
    '--prefill-ms-per-token',
    '1',
    '--prefix-cache-blocks',
    '0',
  ];
  const [lane, free] = await Promise.all([
    startSim(['--id', 'lane', '--prefill-stalls-decode', ...engine]),
    startSim(['--id', 'free', ...engine]),
  ]);
  const longPrompt = (i: number) => ({ messages: [{ role: 'user', content: `prompt ${i} ${'word '.repeat(300)}` }], max_tokens: 1 });
  for (const sim of [lane, free]) {
    const res = await chat(sim.url, { stream: true, messages: [{ role: 'user', content: 'hi' }] });
    const events = readEvents(res.body);
    // two long prompts while the stream runs (it lasts at least 1.5 s)
    const sent = Date.now();
    const answers = await Promise.all([1, 2].map(async (i) => (await chat(sim.url, longPrompt(i))).body.json()));
    const both = Date.now() - sent;
    const at = (await events).map((e) => e.at);
    const longestGap = Math.max(...at.slice(1).map((t, i) => t - (at[i] as number)));
    const stats = await simStats(sim.url);
    if (sim === lane) {
      assert.equal(answers.length, 2);
      // bounds from below only: a busy machine makes everything later, never earlier
      assert.ok(both >= 500, `the second prompt waited for the first's prefill (${both} ms for both)`);
      assert.ok(longestGap >= 200, `the stream paused while a prompt was prefilled (longest gap ${longestGap} ms)`);
      assert.ok((stats.decodeStalls?.count ?? 0) >= 1, JSON.stringify(stats.decodeStalls));
      assert.ok((stats.decodeStalls?.ms ?? 0) >= 200, JSON.stringify(stats.decodeStalls));
    } else {
      assert.equal(stats.decodeStalls, undefined, 'no lane, no stalls counted');
    }
  }
  await Promise.all([lane.stop(), free.stop()]);
});

test('the unknown-model error is exactly vLLM’s 404', async () => {
  const res = await chat(fast, { model: 'no-such-model' });
  assert.equal(res.statusCode, 404);
  assert.deepEqual(await res.body.json(), {
    error: { message: 'The model `no-such-model` does not exist.', type: 'NotFoundError', param: 'model', code: 404 },
  });
});

test('requests beyond max-num-seqs wait; a client abort frees the slot or the queue position at once', async () => {
  await request(`${slow}/_sim/reset-stats`, { method: 'POST' });
  const first = new AbortController();
  const firstRes = await chat(slow, { stream: true }, first.signal);
  await eventually(
    'first running',
    () => simStats(slow),
    (s) => s.running === 1,
  );

  const second = new AbortController();
  const secondRes = chat(slow, {}, second.signal).catch((err: Error) => err);
  const third = new AbortController();
  const thirdRes = chat(slow, {}, third.signal).catch((err: Error) => err);
  await eventually(
    'two waiting',
    () => simStats(slow),
    (s) => s.waiting === 2,
  );
  const metrics = await (await request(`${slow}/metrics`)).body.text();
  assert.match(metrics, /^vllm:num_requests_waiting\{model_name="sim-model"\} 2\.0$/m);
  assert.match(metrics, /^vllm:num_requests_running\{model_name="sim-model"\} 1\.0$/m);
  // KV usage is the blocks the running stream holds (its prompt and tokens so far) of the pool's 4,096: a little
  const usage = Number(/^vllm:kv_cache_usage_perc\{model_name="sim-model"\} (\S+)$/m.exec(metrics)?.[1]);
  assert.ok(usage > 0 && usage < 0.01, `kv usage ${usage}`);

  // the last in the queue leaves: the queue shrinks, nothing else moves
  third.abort();
  await thirdRes;
  let s = await eventually(
    'third aborted',
    () => simStats(slow),
    (x) => x.aborted === 1,
  );
  assert.equal(s.waiting, 1);
  assert.equal(s.running, 1);

  // the running stream's client goes away mid-stream: its slot goes to the next in line
  const reader = firstRes.body[Symbol.asyncIterator]();
  assert.ok(!(await reader.next()).done, 'stream had started');
  first.abort();
  s = await eventually(
    'first aborted, second running',
    () => simStats(slow),
    (x) => x.aborted === 2 && x.running === 1 && x.waiting === 0,
  );

  second.abort();
  await secondRes;
  s = await eventually(
    'all freed',
    () => simStats(slow),
    (x) => x.aborted === 3 && x.running === 0 && x.waiting === 0,
  );
  assert.equal(s.received, 3);
  assert.equal(s.completed, 0);
  assert.match(await (await request(`${slow}/metrics`)).body.text(), /^vllm:num_requests_running\{model_name="sim-model"\} 0\.0$/m);
});

test('fault error500: inference answers 500, health and models stay fine', async () => {
  await setFault(fast, { mode: 'error500' });
  try {
    const res = await chat(fast, {});
    assert.equal(res.statusCode, 500);
    assert.equal(((await res.body.json()) as { error: { type: string; code: number } }).error.code, 500);
    assert.equal(await statusOf(`${fast}/health`), 200);
    assert.equal(await statusOf(`${fast}/v1/models`), 200);
  } finally {
    await setFault(fast, { mode: 'none' });
  }
  const after = await chat(fast, { max_tokens: 1 });
  await after.body.dump();
  assert.equal(after.statusCode, 200);
});

test('fault overloaded: inference answers 503 with an OpenAI-shaped error and Retry-After', async () => {
  await setFault(fast, { mode: 'overloaded' });
  try {
    const res = await chat(fast, { stream: true });
    assert.equal(res.statusCode, 503);
    assert.equal(res.headers['retry-after'], '1');
    assert.equal(((await res.body.json()) as { error: { code: number } }).error.code, 503);
  } finally {
    await setFault(fast, { mode: 'none' });
  }
});

test('fault hang: inference never answers until the client gives up (counted as aborted); control paths still work', async () => {
  await request(`${fast}/_sim/reset-stats`, { method: 'POST' });
  await setFault(fast, { mode: 'hang' });
  try {
    await assert.rejects(request(`${fast}/v1/completions`, { method: 'POST', body: '{"prompt":"x"}', signal: AbortSignal.timeout(400) }), {
      name: 'TimeoutError',
    });
    assert.equal(await statusOf(`${fast}/health`), 200);
    await eventually(
      'hung request aborted',
      () => simStats(fast),
      (s) => s.aborted === 1,
    );
    await setFault(fast, { mode: 'hang', scope: 'all' });
    await assert.rejects(statusOf(`${fast}/health`, { signal: AbortSignal.timeout(300) }), { name: 'TimeoutError' });
    const current = (await (await request(`${fast}/_sim/fault`)).body.json()) as { mode: string; scope: string };
    assert.deepEqual([current.mode, current.scope], ['hang', 'all']);
  } finally {
    await setFault(fast, { mode: 'none' });
  }
});

test('fault reset-mid-stream: streams break after a few chunks; non-streaming requests lose the socket before headers', async () => {
  await request(`${fast}/_sim/reset-stats`, { method: 'POST' });
  await setFault(fast, { mode: 'reset-mid-stream', afterChunks: 2 });
  try {
    const res = await chat(fast, { stream: true });
    assert.equal(res.statusCode, 200);
    const received: string[] = [];
    await assert.rejects(async () => {
      for await (const chunk of res.body) received.push(chunk.toString('utf8'));
    });
    const text = received.join('');
    assert.match(text, /"content":" quick"/);
    assert.doesNotMatch(text, /\[DONE\]/);
    await assert.rejects(chat(fast, {}), (e: Error & { code?: string }) => e.code === 'UND_ERR_SOCKET' || e.code === 'ECONNRESET');
    const s = await eventually(
      'two failed',
      () => simStats(fast),
      (x) => x.failed === 2,
    );
    assert.equal(s.aborted, 0, 'a reset by the engine is not a client abort');
  } finally {
    await setFault(fast, { mode: 'none' });
  }
});

test('fault slow-chunks: SSE chunks arrive delayMs apart', async () => {
  await setFault(fast, { mode: 'slow-chunks', delayMs: 300 });
  try {
    const res = await chat(fast, { stream: true, max_tokens: 3 });
    const tokens = (await readEvents(res.body)).filter((e) => contentOf(e.data) !== undefined);
    assert.equal(tokens.length, 3);
    assert.ok(tokens[2]!.at - tokens[0]!.at >= 500, `2 gaps of 300 ms took ${tokens[2]!.at - tokens[0]!.at} ms`);
  } finally {
    await setFault(fast, { mode: 'none' });
  }
});

test('fault loading: back to the loading signature of the kind, then ready again', async () => {
  await setFault(fast, { mode: 'loading' });
  try {
    assert.equal(await statusOf(`${fast}/health`), 200);
    assert.equal(await statusOf(`${fast}/v1/models`), 503);
    const inference = await chat(fast, {});
    await inference.body.dump();
    assert.equal(inference.statusCode, 503);
    const current = (await (await request(`${fast}/_sim/fault`)).body.json()) as { mode: string; phase: string; loadedAt: number };
    assert.deepEqual({ mode: current.mode, phase: current.phase }, { mode: 'loading', phase: 'loading' });
    assert.ok(current.loadedAt <= Date.now(), 'its startup load is over; the fault is what makes it load');
  } finally {
    await setFault(fast, { mode: 'none' });
  }
  assert.equal(await statusOf(`${fast}/v1/models`), 200);
});

test('fault refuse: the port refuses connections, then listens again on the same port after its seconds', async () => {
  await setFault(fast, { mode: 'refuse', seconds: 3 });
  // the pool may first try a connection the engine just destroyed; a fresh one must be refused (while the 3 s last)
  await eventually(
    'connection refused',
    () =>
      request(`${fast}/health`, { reset: true }).then(
        async (r) => {
          await r.body.dump();
          return `status ${r.statusCode}`;
        },
        (e: Error & { code?: string }) => e.code ?? e.message,
      ),
    (outcome) => outcome === 'ECONNREFUSED',
    2_500,
  );
  await eventually(
    'listening again',
    () => statusOf(`${fast}/health`).catch(() => 0),
    (status) => status === 200,
    10_000,
  );
  assert.equal(((await (await request(`${fast}/_sim/fault`)).body.json()) as { mode: string }).mode, 'none');
});

test('an invalid fault body is refused with 400', async () => {
  const res = await request(`${fast}/_sim/fault`, { method: 'POST', body: '{"mode":"meltdown"}' });
  assert.equal(res.statusCode, 400);
  assert.match(((await res.body.json()) as { error: { message: string } }).error.message, /"mode" must be one of/);
});
