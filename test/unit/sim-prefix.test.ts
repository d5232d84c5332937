// The simulator's prefix-cache model: chained block ids, an LRU of blocks, TTFT from uncached tokens, vLLM's counters.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'undici';
import { parseFlags } from '../../src/router/config/flags.js';
import { SIM_FLAGS, simOptionsFromFlags } from '../../src/tools/sim/flags.js';
import { startSimEngine, type SimEngine, type SimEngineOptions } from '../../src/tools/sim/engine.js';
import { PrefixCache, promptBlocks, renderPrompt } from '../../src/tools/sim/prefix-cache.js';

test('blocks are chained: prompts share block ids up to where they diverge, and only full blocks get one', () => {
  const words = (n: number, from = 0): string => Array.from({ length: n }, (_, i) => `w${from + i}`).join(' ');
  const a = promptBlocks(words(40), 16);
  assert.equal(a.tokens, 40);
  assert.equal(a.blocks.length, 2);
  const b = promptBlocks(`${words(20)} ${words(20, 100)}`, 16);
  assert.equal(b.blocks[0], a.blocks[0]);
  assert.notEqual(b.blocks[1], a.blocks[1]);
  // the same tokens after a different first block are a different block
  const c = promptBlocks(`${words(16, 500)} ${words(16, 16)}`, 16);
  assert.notEqual(c.blocks[1], a.blocks[1]);
  assert.equal(promptBlocks('Hello, world!', 2).tokens, 4);
  assert.notEqual(promptBlocks('ab c', 1).blocks[1], promptBlocks('a bc', 1).blocks[1]);
});

test('chat messages render in order with their roles', () => {
  const text = renderPrompt({
    messages: [
      { role: 'system', content: 'S' },
      { role: 'user', content: [{ type: 'text', text: 'U' }] },
    ],
  });
  assert.equal(text, 'system\nS\nuser\nU\n');
  assert.equal(renderPrompt({ prompt: 'P' }), 'P');
  assert.equal(renderPrompt({ prompt: ['P1', 'P2'] }), 'P1');
});

test('the LRU counts hits up to the first missing block, and evicts a prefix’s tail before its head', () => {
  const cache = new PrefixCache(4);
  assert.equal(cache.lookup([1, 2, 3]), 0);
  assert.equal(cache.lookup([1, 2, 3]), 3);
  assert.equal(cache.lookup([1, 2, 9]), 2);
  // 1, 2, 3, 9 cached; a new 2-block prompt evicts the two least recent: the tails 3 and 9, not the shared head
  assert.equal(cache.lookup([7, 8]), 0);
  assert.equal(cache.size, 4);
  assert.equal(cache.lookup([1, 2, 3]), 2);
  const none = new PrefixCache(0);
  assert.equal(none.lookup([1]), 0);
  assert.equal(none.lookup([1]), 0);
});

const engines: SimEngine[] = [];
after(async () => {
  await Promise.all(engines.map((e) => e.close()));
});

async function start(options: SimEngineOptions): Promise<SimEngine> {
  const engine = await startSimEngine({ port: 0, itlMs: 1, outputTokens: 2, ...options });
  engines.push(engine);
  return engine;
}

async function timedChat(engine: SimEngine, messages: unknown[]): Promise<number> {
  const started = performance.now();
  const res = await request(`${engine.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'sim-model', messages, stream: true }),
  });
  // the role chunk arrives with the first token
  for await (const chunk of res.body) if (String(chunk).includes('"role"')) break;
  const ttft = performance.now() - started;
  await res.body.dump().catch(() => undefined);
  return ttft;
}

function counter(metrics: string, name: string): number {
  const m = new RegExp(`^${name}\\{[^}]*\\} ([0-9.e+]+)$`, 'm').exec(metrics);
  assert.ok(m, `${name} in /metrics`);
  return Number(m[1]);
}

test('a cached prefix skips its prefill: TTFT = base + uncached tokens x per-token time, counted in vLLM’s counters', async () => {
  const engine = await start({ ttftMs: 5, prefillMsPerToken: 2, prefixBlockTokens: 16 });
  const system = { role: 'system', content: Array.from({ length: 300 }, (_, i) => `rule${i}`).join(' ') };
  const cold = await timedChat(engine, [system, { role: 'user', content: 'first question' }]);
  const warm = await timedChat(engine, [system, { role: 'user', content: 'second question' }]);
  // ~600 ms of prefill for 304 tokens against a few blocks' worth once the system prompt is cached
  assert.ok(cold >= 550, `cold TTFT ${cold} ms`);
  assert.ok(warm < cold / 2, `warm TTFT ${warm} ms vs cold ${cold} ms`);
  const metrics = await (await request(`${engine.url}/metrics`)).body.text();
  const queries = counter(metrics, 'vllm:prefix_cache_queries_total');
  const hits = counter(metrics, 'vllm:prefix_cache_hits_total');
  // 304 tokens of messages and roles, and the assistant turn the chat template opens (add_generation_prompt)
  assert.equal(queries, 2 * 305);
  // the system prompt and its role line fill 18 full blocks of 16 tokens
  assert.equal(hits, 288);
});

test('without per-token prefill the TTFT is the base, as before; SGLang output has no vLLM names', async () => {
  const engine = await start({ ttftMs: 5 });
  const metrics = await (await request(`${engine.url}/metrics`)).body.text();
  assert.equal(counter(metrics, 'vllm:prefix_cache_hits_total'), 0);
  const sglang = await start({ kind: 'sglang' });
  assert.doesNotMatch(await (await request(`${sglang.url}/metrics`)).body.text(), /vllm:/);
});

test('sim flags: --prefill-ms-per-token, --prefix-cache-blocks, --prefix-block-tokens (now --kv-block-size)', () => {
  const read = (argv: string[]): SimEngineOptions =>
    simOptionsFromFlags(parseFlags(argv, SIM_FLAGS, { env: {}, envPrefix: 'LLM_ROUTER_SIM_' }).values);
  const defaults = read([]);
  assert.equal(defaults.prefillMsPerToken, 0);
  assert.equal(defaults.prefixCacheBlocks, 4096);
  assert.equal(defaults.prefixBlockTokens, 16);
  const set = read(['--prefill-ms-per-token', '0.05', '--prefix-cache-blocks', '0', '--prefix-block-tokens', '32']);
  assert.deepEqual([set.prefillMsPerToken, set.prefixCacheBlocks, set.prefixBlockTokens], [0.05, 0, 32]);
  assert.equal(read(['--kv-block-size', '64']).prefixBlockTokens, 64);
});
