// The simulator's KV pool (--num-gpu-blocks): running sequences hold blocks of their prompt and generated tokens, a
// request waits until its blocks fit, and the metrics say so (as vLLM's and SGLang's do), read here by the router's
// own metric reader.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'undici';
import { parseFlags } from '../../src/router/config/flags.js';
import { parseCacheConfig, parseEngineLoad, type EngineLoadSample } from '../../src/router/health/engine-stats.js';
import { startSimEngine, type SimEngine } from '../../src/tools/sim/engine.js';
import { SIM_FLAGS, kvPoolBlocks, simOptionsFromFlags } from '../../src/tools/sim/flags.js';
import { eventually } from '../support/within.js';

const engines: SimEngine[] = [];
const aborts: AbortController[] = [];
after(async () => {
  for (const a of aborts) a.abort();
  await Promise.all(engines.map((e) => e.close()));
});

async function start(options: Parameters<typeof startSimEngine>[0]): Promise<SimEngine> {
  const engine = await startSimEngine({ port: 0, ttftMs: 5, ...options });
  engines.push(engine);
  return engine;
}

const words = (n: number, from = 0): string => Array.from({ length: n }, (_, i) => `w${from + i}`).join(' ');

/** Sends a chat request that the test abandons (aborted when the file ends); its answer is not awaited. */
function send(engine: SimEngine, content: string, maxTokens: number, stream = false): void {
  const abort = new AbortController();
  aborts.push(abort);
  request(`${engine.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content }], max_tokens: maxTokens, stream }),
    signal: abort.signal,
  }).then(
    (res) => res.body.dump().catch(() => undefined),
    () => undefined,
  );
}

async function metrics(engine: SimEngine): Promise<string> {
  return (await request(`${engine.url}/metrics`, { headersTimeout: 5_000, bodyTimeout: 5_000 })).body.text();
}

async function load(engine: SimEngine): Promise<EngineLoadSample> {
  const sample = parseEngineLoad(await metrics(engine));
  assert.ok(sample, 'a load sample in /metrics');
  return sample;
}

test('--num-gpu-blocks: its default leaves room for --max-num-seqs sequences of --max-model-len tokens, at least the prefix cache', () => {
  const read = (argv: string[]) => kvPoolBlocks(simOptionsFromFlags(parseFlags(argv, SIM_FLAGS, { env: {} }).values));
  // 256 x 4096 tokens in blocks of 16
  assert.equal(read([]), 65_536);
  assert.equal(read(['--max-num-seqs', '4']), 4_096);
  assert.equal(read(['--max-num-seqs', '4', '--prefix-cache-blocks', '100']), 1_024);
  assert.equal(read(['--max-num-seqs', '1', '--max-model-len', '16', '--prefix-cache-blocks', '100']), 100);
  assert.equal(read(['--max-num-seqs', '64', '--kv-block-size', '32']), 8_192);
  assert.equal(read(['--num-gpu-blocks', '64']), 64);
});

test('long prompts: the waiting queue grows while batch slots are free, and KV usage rises as tokens are generated', async () => {
  // 200-token prompts, 40 tokens out: 15 blocks at the end; two fit in 40 blocks, the third waits with 2 slots free
  const engine = await start({ maxNumSeqs: 4, numGpuBlocks: 40, itlMs: 100 });
  for (let i = 0; i < 4; i++) send(engine, words(200, i * 1000), 40);
  const first = await eventually(
    'two running, two waiting',
    () => load(engine),
    (l) => l.running === 2 && l.waiting === 2,
  );
  // each holds its prompt's 13 blocks at first (200 tokens), 15 at its end
  const usage = first.kvUsage as number;
  assert.ok(usage >= 26 / 40 && usage <= 30 / 40, `usage ${usage}`);
  await eventually(
    'usage rising as the running sequences generate',
    () => load(engine),
    (l) => (l.kvUsage as number) > usage,
  );
  assert.deepEqual(parseCacheConfig(await metrics(engine)), { blockSize: 16, numGpuBlocks: 40 });

  // the same load with short prompts fills the slots, and KV usage stays low
  const short = await start({ maxNumSeqs: 4, numGpuBlocks: 40, itlMs: 100 });
  for (let i = 0; i < 5; i++) send(short, words(10, i * 1000), 40);
  const full = await eventually(
    'four running, one waiting',
    () => load(short),
    (l) => l.running === 4 && l.waiting === 1,
  );
  // 4 x (10 prompt tokens + up to 40 generated): at most 4 x 4 blocks of 40
  assert.ok((full.kvUsage as number) > 0 && (full.kvUsage as number) <= 16 / 40, `usage ${full.kvUsage}`);
});

test('without --num-gpu-blocks the slots alone limit the batch; streams hold their generated tokens too; SGLang says token_usage', async () => {
  const engine = await start({ maxNumSeqs: 4, itlMs: 100 });
  for (let i = 0; i < 5; i++) send(engine, words(1000, i * 2000), 40, true);
  const seen = await eventually(
    'four running, one waiting',
    () => load(engine),
    (l) => l.running === 4 && l.waiting === 1,
  );
  // 4 x 63 blocks (1,000 prompt tokens) of 4,096 at first
  assert.ok((seen.kvUsage as number) >= (4 * 63) / 4096, `usage ${seen.kvUsage}`);
  await eventually(
    "usage rising with the streams' tokens",
    () => load(engine),
    (l) => (l.kvUsage as number) > (seen.kvUsage as number),
  );
  assert.equal(parseCacheConfig(await metrics(engine))?.numGpuBlocks, 4096);

  const sglang = await start({ kind: 'sglang', maxNumSeqs: 4, numGpuBlocks: 100, itlMs: 100 });
  send(sglang, words(160), 40, true);
  const text = await eventually(
    'one running',
    () => metrics(sglang),
    (t) => /^sglang:num_running_reqs\{[^}]*\} 1\.0$/m.test(t),
  );
  const usage = Number(/^sglang:token_usage\{[^}]*\} (\S+)$/m.exec(text)?.[1]);
  // 160 prompt tokens: 10 blocks of 100, one more once the 1st token is out
  assert.ok(usage >= 0.1 && usage <= 0.11, `token_usage ${usage}`);
});
