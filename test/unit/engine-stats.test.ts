// Engine load signals: Prometheus text parsing (vLLM, SGLang, TGI names), staleness, and the scraper against a simulator.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { ModelCatalog } from '../../src/router/catalog/catalog.js';
import type { Endpoint, EngineLoad } from '../../src/router/core/endpoint.js';
import {
  EngineStatsScraper,
  forEachSample,
  labelValue,
  otherLoad,
  parseCacheConfig,
  parseEngineLoad,
} from '../../src/router/health/engine-stats.js';
import { isFresh, staleAfterMs } from '../../src/router/core/endpoint.js';
import { startSimEngine, type SimEngine } from '../../src/tools/sim/engine.js';
import { createLogger } from '../../src/router/util/log.js';
import { until } from '../support/within.js';

const VLLM = `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 3.0
vllm:num_requests_running{engine="1",model_name="meta-llama/Llama-3.1-8B-Instruct"} 2.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 7.0
vllm:num_requests_waiting{engine="1",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.8125
vllm:kv_cache_usage_perc{engine="1",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.25
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{le="0.001",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.0
vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="meta-llama/Llama-3.1-8B-Instruct"} 12.0
vllm:time_to_first_token_seconds_count{model_name="meta-llama/Llama-3.1-8B-Instruct"} 12.0
`;

test('vLLM: running and waiting are summed over series (data-parallel ranks); KV usage takes the fullest', () => {
  assert.deepEqual(parseEngineLoad(VLLM), { running: 5, waiting: 7, kvUsage: 0.8125 });
});

test('vLLM before 0.10 (gpu_cache_usage_perc), CRLF line ends, timestamps and a missing KV gauge', () => {
  const old =
    'vllm:num_requests_running{model_name="m"} 1\r\nvllm:num_requests_waiting{model_name="m"} 4 1712345678000\r\nvllm:gpu_cache_usage_perc{model_name="m"} 0.5\r\n';
  assert.deepEqual(parseEngineLoad(old), { running: 1, waiting: 4, kvUsage: 0.5 });
  assert.deepEqual(parseEngineLoad('vllm:num_requests_running 2\n'), { running: 2, waiting: 0, kvUsage: undefined });
});

test('SGLang and TGI names; an engine speaking two dialects is read by the first of vLLM, SGLang, TGI', () => {
  const sglang =
    '# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs{model_name="m"} 6.0\nsglang:num_queue_reqs{model_name="m"} 2.0\nsglang:token_usage{model_name="m"} 0.42\n';
  assert.deepEqual(parseEngineLoad(sglang), { running: 6, waiting: 2, kvUsage: 0.42 });
  const tgi = '# TYPE tgi_queue_size gauge\ntgi_queue_size 9\n# TYPE tgi_batch_current_size gauge\ntgi_batch_current_size 4\n';
  assert.deepEqual(parseEngineLoad(tgi), { running: 4, waiting: 9, kvUsage: undefined });
  assert.deepEqual(
    parseEngineLoad(`vllm:num_requests_running{model_name="m"} 1.0\nvllm:num_requests_waiting{model_name="m"} 0.0\n${tgi}`),
    {
      running: 1,
      waiting: 0,
      kvUsage: undefined,
    },
  );
});

test('no load metrics, NaN values and garbage give no load rather than an idle one', () => {
  assert.equal(parseEngineLoad(''), undefined);
  assert.equal(parseEngineLoad('# HELP x y\nprocess_cpu_seconds_total 12.5\n'), undefined);
  assert.equal(parseEngineLoad('vllm:num_requests_running{model_name="m"} NaN\n'), undefined);
  assert.equal(parseEngineLoad('vllm:num_requests_running{model_name="m\n'), undefined);
  assert.equal(parseEngineLoad('<html>502 Bad Gateway</html>'), undefined);
});

test('label values may hold quotes, braces, spaces and escapes', () => {
  const text =
    'vllm:num_requests_running{model_name="we\\"ird } model",x="a\\\\b"} 3\nvllm:num_requests_waiting{model_name="line\\nbreak"} 1\n';
  const seen: Array<[string, string | undefined, number]> = [];
  forEachSample(
    text,
    () => true,
    (name, labels, value) => seen.push([name, labelValue(labels, 'model_name'), value]),
  );
  assert.deepEqual(seen, [
    ['vllm:num_requests_running', 'we"ird } model', 3],
    ['vllm:num_requests_waiting', 'line\nbreak', 1],
  ]);
  assert.equal(labelValue('model_name="m",x="a\\\\b"', 'x'), 'a\\b');
  assert.equal(labelValue('model_name="m"', 'absent'), undefined);
});

test('the load other clients put on an engine: what runs or waits there beyond our requests, the queue again, KV usage as a tie-break', () => {
  // 8 running + 2 waiting, all 10 ours: nothing from others, but the engine is saturated; a full KV cache weighs as one request
  assert.equal(otherLoad({ running: 8, waiting: 2, kvUsage: 1 }, 10), 0 + 2 + 1);
  // 6 running and 4 queued, none ours: all of it is someone else's, and the queue counts twice
  assert.equal(otherLoad({ running: 6, waiting: 4, kvUsage: 0.5 }, 0), 10 + 4 + 0.5);
  // more ours in flight than the engine reports (still in transit): never negative
  assert.equal(otherLoad({ running: 1, waiting: 0, kvUsage: undefined }, 5), 0);
});

test('a snapshot older than three intervals is stale', () => {
  const load = { at: 10_000, running: 0, waiting: 0, kvUsage: 0, otherLoad: 0, others: 0, ours: 0 };
  assert.equal(staleAfterMs(1000), 3000);
  assert.equal(isFresh(load, 13_000, 1000), true);
  assert.equal(isFresh(load, 13_001, 1000), false);
  assert.equal(isFresh(undefined, 10_000, 1000), false);
  assert.equal(isFresh(load, 10_140, 50), true);
  assert.equal(isFresh(load, 10_151, 50), false);
});

const engines: SimEngine[] = [];
const scrapers: EngineStatsScraper[] = [];
after(async () => {
  await Promise.all(scrapers.map((s) => s.stop()));
  await Promise.all(engines.map((e) => e.close()));
});

test('the scraper keeps each ready endpoint’s latest load with the time of its scrape; a hung /metrics leaves the last one to go stale', async () => {
  // the engine the test watches, and one whose scrapes show that the scraper's timer runs
  // a KV pool of one block: the running request's prompt fills it (KV-cache usage 1)
  const engine = await startSimEngine({ port: 0, ttftMs: 60_000, maxNumSeqs: 1, numGpuBlocks: 1 });
  const ticking = await startSimEngine({ port: 0 });
  engines.push(engine, ticking);
  // the scraper's clock: snapshots are stamped with it, and staleness is judged against it
  let now = 1_000_000;
  const catalog = new ModelCatalog({ now: () => now });
  catalog.setEndpoints('static', [
    { id: engine.url, url: engine.url, models: ['sim-model'] },
    { id: ticking.url, url: ticking.url, models: ['sim-model'] },
  ]);
  const [endpoint, ticker] = catalog.endpoints() as [Endpoint, Endpoint];
  const loadNow = (): EngineLoad | undefined => endpoint.engineLoad;
  const scrapes = (e: SimEngine): number => e.stats().byPath['/metrics'] ?? 0;
  const scraper = new EngineStatsScraper(
    catalog,
    { intervalMs: 50, timeoutMs: 200, apiKey: undefined, now: () => now },
    createLogger({ level: 'silent', format: 'json' }),
  );
  scrapers.push(scraper);
  catalog.setState(ticker, 'ready');
  scraper.start();
  await until('three scrapes of the ready endpoint', () => scrapes(ticking) >= 3);
  assert.equal(scrapes(engine), 0, 'endpoints that are not ready are not scraped');
  assert.equal(loadNow(), undefined);

  catalog.setState(endpoint, 'ready');
  // two requests straight to the engine: one runs (for a minute), one waits
  const controllers = [new AbortController(), new AbortController()];
  for (const c of controllers) {
    void fetch(`${engine.url}/v1/completions`, {
      method: 'POST',
      body: JSON.stringify({ prompt: 'hi' }),
      headers: { 'content-type': 'application/json' },
      signal: c.signal,
    }).catch(() => undefined);
  }
  await until('the queue in the snapshot', () => loadNow()?.waiting === 1);
  const load = loadNow() as EngineLoad;
  assert.equal(load.running, 1);
  assert.equal(load.kvUsage, 1);
  assert.equal(load.at, now, 'the snapshot carries the time of its scrape');
  assert.equal(isFresh(load, now + 150, 50), true, 'fresh for three intervals');

  await engine.setFault({ mode: 'hang', scope: 'all' });
  // one scrape at a time per endpoint: once two more have arrived, the first of them hung and was given up
  const before = scrapes(engine);
  await until('a scrape of the hung engine given up, and the next one sent', () => scrapes(engine) >= before + 2);
  now += 151;
  assert.deepEqual(loadNow(), load, 'the last snapshot is kept; staleness is judged by its time');
  assert.equal(isFresh(loadNow(), now, 50), false, 'stale three intervals after its scrape');
  for (const c of controllers) c.abort();
});

test("the KV cache's geometry from vllm:cache_config_info: block size and GPU blocks, absent when not exported", () => {
  const text = [
    '# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig',
    '# TYPE vllm:cache_config_info gauge',
    'vllm:cache_config_info{block_size="16",cache_dtype="auto",enable_prefix_caching="True",gpu_memory_utilization="0.9",num_cpu_blocks="None",num_gpu_blocks="27153",num_gpu_blocks_override="None"} 1.0',
  ].join('\n');
  assert.deepEqual(parseCacheConfig(text), { blockSize: 16, numGpuBlocks: 27153 });
  assert.deepEqual(parseCacheConfig('vllm:cache_config_info{block_size="32",num_gpu_blocks="None"} 1'), {
    blockSize: 32,
    numGpuBlocks: undefined,
  });
  assert.equal(parseCacheConfig('vllm:num_requests_running 3\n'), undefined);
});
