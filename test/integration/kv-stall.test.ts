// No request stalls the router (issue 30, part 4). A kvaware router tokenizing in process with a real Qwen3 tokenizer,
// and a round-robin router, over the same simulators: while a pathological request is handled (a chat carrying its own
// template that loops for minutes, with --trust-request-chat-template; prompts of spaces, over and under the character
// cap; a 4 MB body of nested arrays), small requests to another model are sent one after another, and their worst
// latency through the kvaware router is compared with round robin's for the same requests. Also: bodies nested deeper
// than 128 levels are 400 invalid_json on both inbound paths, and the JSON routes' body limit is their own.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { stopAll } from '../support/process.js';
import { firstHead } from '../support/raw-http.js';
import { type Answer, allReady, call, chat, FAST_PROBES, metric, type Running, startRouter, startSim } from '../support/router.js';
import { publishedTokenizer } from '../support/tokenizers.js';
import { eventually } from '../support/within.js';

const expectHead = (path: string, length: number): string =>
  `POST ${path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${length}\r\nexpect: 100-continue\r\n\r\n`;

/** A JSON body nested `depth` levels deep (the body object itself is the first). */
function nestedBody(depth: number): string {
  return `{"model": "m", "messages": [{"role": "user", "content": "hi"}], "x": ${'['.repeat(depth - 1)}${']'.repeat(depth - 1)}}`;
}

describe('request bodies: nesting and the JSON body limit', { timeout: 60_000 }, () => {
  /** the routers of the tests below, started at once: with small limits (fast path on, node:http only), and defaults */
  const routers = new Map<string, Running>();

  before(async () => {
    const limits = ['--known-models', 'm', '--max-json-body-bytes', '1000', '--max-body-bytes', '4000'];
    const [fast, node, defaults] = await Promise.all([
      startRouter(limits),
      startRouter([...limits, '--no-fast-path']),
      startRouter(['--known-models', 'm']),
    ]);
    routers.set('fast', fast).set('node', node).set('defaults', defaults);
  });
  after(stopAll);

  const routerOf = (name: string): Running => {
    const router = routers.get(name);
    assert.ok(router, `the ${name} router started`);
    return router;
  };

  for (const fastPath of [true, false]) {
    test(`nesting past 128 levels is 400 invalid_json; the JSON routes' limit is their own (${fastPath ? 'fast path on' : 'node:http only'})`, async () => {
      const router = routerOf(fastPath ? 'fast' : 'node');
      const deep = await call(`${router.url}/v1/chat/completions`, { body: nestedBody(129) });
      assert.equal(deep.status, 400, deep.text);
      assert.equal(deep.json<{ error: { code: string } }>().error.code, 'invalid_json');
      assert.match(deep.text, /deeper than 128 levels/);
      // 128 levels parse: the request goes on (no engine for m here: 503)
      assert.equal((await call(`${router.url}/v1/chat/completions`, { body: nestedBody(128) })).status, 503);
      // over --max-json-body-bytes: 413 saying that limit
      const big = chat('m', { padding: 'x'.repeat(1500) });
      const refused = await call(`${router.url}/v1/chat/completions`, { body: big });
      assert.equal(refused.status, 413, refused.text);
      assert.match(refused.text, /limit of 1000 bytes/);
      // an audio route takes up to --max-body-bytes: its multipart body is read (and found malformed here), not refused
      const audio = await call(`${router.url}/v1/audio/transcriptions`, {
        body: `--b\r\n${'x'.repeat(1500)}`,
        headers: { 'content-type': 'multipart/form-data; boundary=b' },
      });
      assert.equal(audio.status, 400, audio.text);
      assert.match(audio.text, /invalid_multipart/);
      const over = await call(`${router.url}/v1/audio/transcriptions`, {
        body: `--b\r\n${'x'.repeat(4500)}`,
        headers: { 'content-type': 'multipart/form-data; boundary=b' },
      });
      assert.equal(over.status, 413);
      await router.stop();
    });
  }

  test('the defaults: a JSON body announced over 2 MiB is refused before it is sent; an audio one up to 32 MiB goes on', async () => {
    const router = routerOf('defaults');
    assert.match(await firstHead(router.port, expectHead('/v1/chat/completions', 2 * 1024 * 1024 + 1)), /^HTTP\/1\.1 413 /);
    assert.match(await firstHead(router.port, expectHead('/v1/chat/completions', 2 * 1024 * 1024)), /^HTTP\/1\.1 100 Continue/);
    assert.match(await firstHead(router.port, expectHead('/v1/audio/transcriptions', 3 * 1024 * 1024)), /^HTTP\/1\.1 100 Continue/);
    await router.stop();
  });
});

interface Worst {
  readonly worst: number;
  readonly count: number;
  readonly bad: readonly Answer[];
}

/**
 * Small requests to `small`, one after another for `windowMs` (at most 400), while `bad` runs: their worst latency.
 * Every small request must be answered 200.
 */
async function worstWhile(router: string, bad: () => Promise<Answer[]>, windowMs: number): Promise<Worst> {
  const badDone = bad();
  const latencies: number[] = [];
  const end = performance.now() + windowMs;
  while (performance.now() < end && latencies.length < 400) {
    const started = performance.now();
    const res = await call(`${router}/v1/chat/completions`, { body: chat('small', { max_tokens: 1 }), timeoutMs: 30_000 });
    assert.equal(res.status, 200, res.text);
    latencies.push(performance.now() - started);
  }
  return { worst: Math.max(...latencies), count: latencies.length, bad: await badDone };
}

const post = (router: string, body: string): Promise<Answer> => call(`${router}/v1/chat/completions`, { body, timeoutMs: 60_000 });
const postPrompt = (router: string, body: string): Promise<Answer> => call(`${router}/v1/completions`, { body, timeoutMs: 60_000 });

describe('no request stalls the router: a small request keeps its latency while a pathological one is handled', {
  timeout: 180_000,
}, () => {
  let kv: Running;
  let rr: Running;

  before(async () => {
    const sims = await Promise.all(
      ['big', 'big', 'small', 'small'].map((model) => startSim(['--model', model, '--ttft-ms', '5', '--itl-ms', '1'])),
    );
    const backends = ['--static-backends', sims.map((s) => s.url).join(','), '--static-models', 'big,big,small,small'];
    const common = [...FAST_PROBES, ...backends, '--max-json-body-bytes', String(8 * 1024 * 1024)];
    [kv, rr] = await Promise.all([
      startRouter([...common, '--routing-logic', 'kvaware', '--tokenizer', publishedTokenizer('qwen3'), '--trust-request-chat-template']),
      startRouter([...common, '--routing-logic', 'roundrobin']),
    ]);
    await Promise.all([allReady(kv.url, 4), allReady(rr.url, 4)]);
    // the tokenizer loaded in the worker: small requests are tokenized in process
    await eventually(
      'a request tokenized in process',
      async () => {
        await call(`${kv.url}/v1/chat/completions`, { body: chat('small', { max_tokens: 1 }) });
        return metric(kv.url, 'llm_router_kvaware_tokenize_seconds_count', { source: 'path' });
      },
      (n) => n > 0,
      30_000,
      200,
    );
  });
  after(stopAll);

  /** The worst small-request latency through each router while `bad` (given the router's URL) runs there. */
  async function compare(what: string, bad: (router: string) => Promise<Answer[]>, windowMs: number, t: { diagnostic(s: string): void }) {
    const base = await worstWhile(rr.url, () => bad(rr.url), windowMs);
    const mine = await worstWhile(kv.url, () => bad(kv.url), windowMs);
    t.diagnostic(
      `${what}: worst small-request latency ${mine.worst.toFixed(0)} ms through kvaware (${mine.count} requests), ${base.worst.toFixed(0)} ms through round robin (${base.count})`,
    );
    // the target is 150 ms over round robin's; the bound here is generous for a busy machine, and still far
    // below the seconds to minutes these requests held the event loop for before
    assert.ok(mine.worst <= base.worst + 1_000, `${what}: ${mine.worst.toFixed(0)} ms vs ${base.worst.toFixed(0)} ms`);
    return mine;
  }

  test('a chat whose own template loops for minutes (trusted): KV routing falls back, the worker restarts, then tokenizes again', async (t) => {
    const looping = JSON.stringify({
      model: 'big',
      messages: [{ role: 'user', content: 'hi' }],
      chat_template: '{% for i in range(500000000) %}{% endfor %}{{ messages[0].content }}',
      max_tokens: 1,
    });
    const mine = await compare('looping request template', async (router) => [await post(router, looping)], 3_000, t);
    // the looping request itself was forwarded and answered, by prefixaware
    assert.equal(mine.bad[0]?.status, 200, mine.bad[0]?.text);
    assert.ok((await metric(kv.url, 'llm_router_kvaware_fallback_total', { reason: 'tokenizer-busy' })) >= 1);
    await eventually(
      'the tokenizer worker restarted',
      () => metric(kv.url, 'llm_router_kvaware_tokenizer_restarts_total'),
      (n) => n >= 1,
      15_000,
    );
    // and tokenizes again once it has loaded the tokenizer anew
    const before = await metric(kv.url, 'llm_router_kvaware_tokenize_seconds_count', { source: 'path' });
    await eventually(
      'requests tokenized in process again',
      async () => {
        await call(`${kv.url}/v1/chat/completions`, { body: chat('small', { max_tokens: 1 }) });
        return metric(kv.url, 'llm_router_kvaware_tokenize_seconds_count', { source: 'path' });
      },
      (n) => n > before,
      30_000,
      200,
    );
  });

  test('prompts of spaces: 1 MB over the character cap goes by prefixaware at once; 400 KB under it cannot hold the others', async (t) => {
    const tooLarge = await metric(kv.url, 'llm_router_kvaware_fallback_total', { reason: 'too-large' });
    const mega = JSON.stringify({ model: 'big', prompt: ' '.repeat(1024 * 1024), max_tokens: 1 });
    const over = await compare('1 MB of spaces', async (router) => [await postPrompt(router, mega)], 1_500, t);
    assert.equal(over.bad[0]?.status, 200);
    assert.equal(await metric(kv.url, 'llm_router_kvaware_fallback_total', { reason: 'too-large' }), tooLarge + 1);
    const under = JSON.stringify({ model: 'big', prompt: ' '.repeat(400 * 1024), max_tokens: 1 });
    const mine = await compare('400 KB of spaces', async (router) => [await postPrompt(router, under)], 3_000, t);
    assert.equal(mine.bad[0]?.status, 200);
  });

  test('4 MB bodies of nested arrays are refused before parsing, and hold up nothing', async (t) => {
    const nested = `{"model": "big", "x": ${'['.repeat(2_000_000)}${']'.repeat(2_000_000)}}`;
    const mine = await compare(
      '4 MB nested bodies',
      async (router) => {
        const answers: Answer[] = [];
        for (let i = 0; i < 5; i++) answers.push(await post(router, nested));
        return answers;
      },
      1_500,
      t,
    );
    for (const a of mine.bad) assert.equal(a.status, 400, a.text);
  });
});
