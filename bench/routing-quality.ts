// Routing quality: one multi-turn chat workload replayed against roundrobin, least-load and prefixaware, through one
// router and through two router replicas sharing the load, in front of four simulated engines with a prefix cache.
// Prints prefix-cache hit rate, TTFT p50/p99 and throughput per policy, then the cost of one routing decision per
// policy at 1,000 endpoints.
//
//   node --import tsx bench/routing-quality.ts [--quick] [--conversations N] [--concurrency C[,C...]] [--rounds R]
//                                              [--only quality,decisions] [--json FILE]
//
// Routers run as child processes (dist/cli/main.js when built, else the sources through tsx); engines run in this
// process (startSimEngine); everything listens on 127.0.0.1 and is stopped before the script exits.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { Agent, request } from 'undici';
import { ModelCatalog } from '../src/router/catalog/catalog.js';
import type { Endpoint } from '../src/router/core/endpoint.js';
import { forEachSample } from '../src/router/health/engine-stats.js';
import type { createPolicy as CreatePolicy } from '../src/router/routing/index.js';
import type { RouteRequest } from '../src/router/routing/policy.js';
import { startSimEngine, type SimEngine, type SimEngineOptions } from '../src/tools/sim/engine.js';
import { blockIds, PrefixCache } from '../src/tools/sim/prefix-cache.js';
import { WordTokenizer } from '../src/tools/sim/tokenizer.js';
import { rng } from '../test/support/conversations.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
/** BENCH_ROUTER_CLI: another build's CLI for the routers (e.g. an earlier commit's, to compare on the same machine) */
const DIST_CLI = process.env.BENCH_ROUTER_CLI ?? path.join(root, 'dist', 'cli', 'main.js');
const MODEL = 'bench-chat';

export const QUALITY_POLICIES = ['roundrobin', 'least-load', 'prefixaware'] as const;
const MICRO_POLICIES = ['roundrobin', 'least-load', 'session', 'prefixaware'] as const;

export interface QualityOptions {
  readonly conversations: number;
  /** closed-loop users per run; each level is a separate set of runs */
  readonly concurrency: readonly number[];
  /** every configuration runs this many times, interleaved with the others; the table shows medians */
  readonly rounds: number;
  readonly seed: number;
}

/** Four engines with a per-engine prefix cache too small for everyone's conversations, big enough for a quarter. */
const ENGINE: SimEngineOptions = {
  models: [MODEL],
  ttftMs: 10,
  prefillMsPerToken: 0.05,
  itlMs: 3,
  maxNumSeqs: 8,
  prefixCacheBlocks: 400,
  prefixBlockTokens: 16,
};
const ENGINES = 4;

// ---- the workload: deterministic from the seed, identical for every policy ----

/** The deterministic PRNG of the benchmark workloads (mulberry32), shared with the test conversations. */
export const mulberry32 = rng;

interface Turn {
  readonly user: string;
  readonly assistant: string;
  readonly maxTokens: number;
}

interface Conversation {
  readonly system: string;
  readonly turns: readonly Turn[];
}

export interface Workload {
  readonly conversations: readonly Conversation[];
  readonly requests: number;
  readonly systemPrompts: number;
}

/**
 * Eight applications, each with its own system prompt (200 to 1,500 words; the shorter ones fit inside the prefix
 * key's 2,048 characters, the longer ones do not), chosen by Zipf popularity; each conversation has 3 to 6 turns
 * whose history (user questions and recorded assistant answers) grows turn by turn.
 */
export function buildWorkload(conversations: number, seed: number): Workload {
  const rnd = mulberry32(seed);
  const syllables = [
    'ka',
    'lo',
    'mi',
    'ne',
    'ru',
    'sa',
    'ti',
    'vo',
    'ze',
    'pa',
    'qui',
    'dro',
    'fen',
    'gal',
    'hum',
    'jor',
    'lek',
    'mun',
    'nor',
    'pix',
  ];
  const vocabulary = Array.from({ length: 3000 }, () => {
    let w = '';
    const n = 1 + Math.floor(rnd() * 3);
    for (let i = 0; i < n; i++) w += syllables[Math.floor(rnd() * syllables.length)];
    return w;
  });
  const words = (n: number): string => {
    const out: string[] = [];
    for (let i = 0; i < n; i++) out.push(vocabulary[Math.floor(rnd() * vocabulary.length)] + (i % 13 === 12 ? '.' : ''));
    return out.join(' ');
  };
  const systemSizes = [1500, 1100, 800, 600, 450, 300, 250, 200];
  const systems = systemSizes.map((n, i) => `You are assistant number ${i}. ${words(n)}`);
  const zipf = systems.map((_, i) => 1 / (i + 1));
  const zipfTotal = zipf.reduce((a, b) => a + b, 0);
  const pickSystem = (): string => {
    let r = rnd() * zipfTotal;
    for (let i = 0; i < zipf.length; i++) {
      r -= zipf[i] as number;
      if (r <= 0) return systems[i] as string;
    }
    return systems[systems.length - 1] as string;
  };
  let requests = 0;
  const list: Conversation[] = [];
  for (let c = 0; c < conversations; c++) {
    const turns: Turn[] = [];
    const n = 3 + Math.floor(rnd() * 4);
    for (let t = 0; t < n; t++)
      turns.push({
        user: words(30 + Math.floor(rnd() * 90)),
        assistant: words(20 + Math.floor(rnd() * 60)),
        maxTokens: 16 + Math.floor(rnd() * 17),
      });
    requests += n;
    list.push({ system: pickSystem(), turns });
  }
  return { conversations: list, requests, systemPrompts: systems.length };
}

function messagesFor(c: Conversation, turn: number): unknown[] {
  const messages: unknown[] = [{ role: 'system', content: c.system }];
  for (let t = 0; t < turn; t++) {
    messages.push({ role: 'user', content: (c.turns[t] as Turn).user }, { role: 'assistant', content: (c.turns[t] as Turn).assistant });
  }
  messages.push({ role: 'user', content: (c.turns[turn] as Turn).user });
  return messages;
}

/** The hit rate of one engine with an unbounded cache: every block counts as a hit after its first sight, whatever the order. */
export function idealHitRate(workload: Workload): number {
  const cache = new PrefixCache(Number.MAX_SAFE_INTEGER);
  const blockTokens = ENGINE.prefixBlockTokens ?? 16;
  // the engine's own tokenization: its tokenizer and chat template, blocks chained over the token ids
  const tokenizer = new WordTokenizer();
  let queries = 0;
  let hits = 0;
  for (const c of workload.conversations) {
    for (let t = 0; t < c.turns.length; t++) {
      const ids = tokenizer.encodeBody({ messages: messagesFor(c, t) });
      const tokens = ids.length;
      const blocks = blockIds(ids, blockTokens);
      queries += tokens;
      hits += Math.min(cache.lookup(blocks) * blockTokens, Math.max(0, tokens - 1));
    }
  }
  return queries > 0 ? hits / queries : 0;
}

// ---- processes ----

export interface RouterProc {
  readonly url: string;
  readonly child: ChildProcess;
  readonly exited: Promise<void>;
  /** what it printed so far (its log: an access line per request at the default level) */
  output(): string;
}

const routers = new Set<RouterProc>();

/** `llm-router serve` in front of the engines (each serving `model`), once every engine is ready in it; `extra` flags last. */
export async function startRouter(
  policy: string,
  engines: ReadonlyArray<Pick<SimEngine, 'url'>>,
  extra: readonly string[] = [],
  model: string = MODEL,
  /** more environment for the router (e.g. the Hub's variables for a stand-in on 127.0.0.1) */
  env: Readonly<Record<string, string>> = {},
): Promise<RouterProc> {
  const cli = existsSync(DIST_CLI) ? [DIST_CLI] : ['--import', 'tsx', path.join(root, 'src', 'cli', 'main.ts')];
  const args = [
    // e.g. BENCH_ROUTER_NODE_ARGS='--cpu-prof --cpu-prof-dir=/tmp/prof': profile the routers a bench starts
    ...(process.env.BENCH_ROUTER_NODE_ARGS?.split(' ').filter((a) => a !== '') ?? []),
    ...cli,
    'serve',
    '--host',
    '127.0.0.1',
    '--port',
    '0',
    '--log-format',
    'json',
    '--log-level',
    'info',
    '--routing-logic',
    policy,
    '--static-backends',
    engines.map((e) => e.url).join(','),
    '--static-models',
    engines.map(() => model).join(','),
    ...extra,
  ];
  // never the real Hub: offline unless the bench is run with the Hub's variables set (a stand-in on 127.0.0.1)
  const child = spawn(process.execPath, args, {
    cwd: root,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { HF_HUB_OFFLINE: '1', ...process.env, ...env },
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let output = '';
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`router did not start:\n${output}`)), 30_000);
    const onData = (chunk: Buffer): void => {
      output += chunk.toString('utf8');
      const m = /"url":"(http:\/\/127\.0\.0\.1:\d+)"/.exec(output);
      if (m) {
        clearTimeout(timer);
        resolve(m[1] as string);
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    void exited.then(() => reject(new Error(`router exited:\n${output}`)));
  });
  const proc = { url, child, exited, output: () => output };
  routers.add(proc);
  // all engines ready before any request, so every replica starts from the same candidate set
  const deadline = Date.now() + 30_000;
  for (;;) {
    const res = await request(`${url}/engines`);
    const view = (await res.body.json()) as { endpoints: Array<{ state: string }> };
    if (view.endpoints.filter((e) => e.state === 'ready').length === engines.length) break;
    if (Date.now() > deadline) throw new Error(`${url}: engines not ready`);
    await sleep(50);
  }
  return proc;
}

export async function stopRouter(r: RouterProc): Promise<void> {
  routers.delete(r);
  // BENCH_ROUTER_LOG_DIR: each router's log kept there (its access lines say how every request was routed)
  const dir = process.env.BENCH_ROUTER_LOG_DIR;
  if (dir !== undefined && dir !== '') writeFileSync(path.join(dir, `router-${r.child.pid}.log`), r.output());
  if (r.child.exitCode !== null || r.child.signalCode !== null) return;
  r.child.kill('SIGTERM');
  const done = await Promise.race([r.exited.then(() => true), sleep(5_000).then(() => false)]);
  if (!done) r.child.kill('SIGKILL');
}

export function killRoutersNow(): void {
  for (const r of routers) if (r.child.exitCode === null) r.child.kill('SIGKILL');
}

// ---- one replay ----

export interface QualityResult {
  readonly policy: string;
  readonly replicas: number;
  readonly users: number;
  readonly requests: number;
  readonly failed: number;
  readonly hitRate: number;
  readonly ttftP50Ms: number;
  readonly ttftP99Ms: number;
  readonly requestsPerSecond: number;
  /** requests on the busiest engine / on the least busy */
  readonly imbalance: number;
}

export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] as number;
}

/** vLLM's prefix-cache counters of an engine, in tokens: looked up and found. */
export async function prefixCounters(engine: Pick<SimEngine, 'url'>): Promise<{ queries: number; hits: number }> {
  const text = await (await request(`${engine.url}/metrics`)).body.text();
  const out = { queries: 0, hits: 0 };
  forEachSample(
    text,
    (name) => name === 'vllm:prefix_cache_queries_total' || name === 'vllm:prefix_cache_hits_total',
    (name, _labels, value) => {
      if (name === 'vllm:prefix_cache_queries_total') out.queries += value;
      else out.hits += value;
    },
  );
  return out;
}

async function replay(policy: string, replicas: number, workload: Workload, concurrency: number): Promise<QualityResult> {
  const engines = await Promise.all(Array.from({ length: ENGINES }, (_, i) => startSimEngine({ ...ENGINE, id: `engine-${i}` })));
  const started: RouterProc[] = [];
  const dispatcher = new Agent({ connections: concurrency, pipelining: 1 });
  try {
    for (let r = 0; r < replicas; r++) started.push(await startRouter(policy, engines));
    const ttfts: number[] = [];
    let failed = 0;
    let sent = 0;
    let next = 0;
    const one = async (c: Conversation, turn: number): Promise<void> => {
      // like a Service without session affinity: the replicas take turns, whatever the conversation
      const router = started[sent++ % started.length] as RouterProc;
      const body = JSON.stringify({
        model: MODEL,
        messages: messagesFor(c, turn),
        max_tokens: (c.turns[turn] as Turn).maxTokens,
        stream: true,
      });
      const t0 = performance.now();
      const res = await request(`${router.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
        dispatcher,
      });
      let first = true;
      for await (const _chunk of res.body) {
        if (first) {
          ttfts.push(performance.now() - t0);
          first = false;
        }
      }
      if (res.statusCode !== 200) failed++;
    };
    const user = async (): Promise<void> => {
      for (;;) {
        const c = workload.conversations[next++];
        if (!c) return;
        for (let t = 0; t < c.turns.length; t++) {
          try {
            await one(c, t);
          } catch {
            failed++;
          }
        }
      }
    };
    const t0 = performance.now();
    await Promise.all(Array.from({ length: concurrency }, () => user()));
    const seconds = (performance.now() - t0) / 1000;
    const counters = await Promise.all(engines.map(prefixCounters));
    const queries = counters.reduce((n, c) => n + c.queries, 0);
    const hits = counters.reduce((n, c) => n + c.hits, 0);
    const served = engines.map((e) => e.stats().completed);
    ttfts.sort((a, b) => a - b);
    return {
      policy,
      replicas,
      users: concurrency,
      requests: workload.requests,
      failed,
      hitRate: queries > 0 ? hits / queries : 0,
      ttftP50Ms: percentile(ttfts, 50),
      ttftP99Ms: percentile(ttfts, 99),
      requestsPerSecond: workload.requests / seconds,
      imbalance: Math.max(...served) / Math.max(1, Math.min(...served)),
    };
  } finally {
    await Promise.all(started.map(stopRouter));
    await dispatcher.close();
    await Promise.all(engines.map((e) => e.close()));
  }
}

export function medianOf(values: readonly number[]): number {
  const s = [...values].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
}

/** Every configuration once per round, rounds interleaved so that a noisy moment on the machine hits all policies alike. */
export async function runRoutingQuality(opts: QualityOptions, log: (line: string) => void = () => undefined): Promise<QualityResult[]> {
  const workload = buildWorkload(opts.conversations, opts.seed);
  log(
    `workload: ${opts.conversations} conversations, ${workload.requests} requests, ${workload.systemPrompts} system prompts; best possible hit rate ${(idealHitRate(workload) * 100).toFixed(1)} %`,
  );
  const configs = opts.concurrency.flatMap((users) =>
    [1, 2].flatMap((replicas) => QUALITY_POLICIES.map((policy) => ({ users, replicas, policy }))),
  );
  const runs = configs.map((): QualityResult[] => []);
  for (let round = 0; round < opts.rounds; round++) {
    for (const [i, { users, replicas, policy }] of configs.entries()) {
      const r = await replay(policy, replicas, workload, users);
      log(
        `round ${round + 1}, ${users} users, ${policy} x${replicas}: hit rate ${(r.hitRate * 100).toFixed(1)} %, TTFT p50 ${r.ttftP50Ms.toFixed(0)} ms, p99 ${r.ttftP99Ms.toFixed(0)} ms, ${r.requestsPerSecond.toFixed(1)} req/s`,
      );
      (runs[i] as QualityResult[]).push(r);
    }
  }
  return runs.map((rs) => {
    const m = (f: (r: QualityResult) => number): number => medianOf(rs.map(f));
    const first = rs[0] as QualityResult;
    return {
      ...first,
      failed: rs.reduce((n, r) => n + r.failed, 0),
      hitRate: m((r) => r.hitRate),
      ttftP50Ms: m((r) => r.ttftP50Ms),
      ttftP99Ms: m((r) => r.ttftP99Ms),
      requestsPerSecond: m((r) => r.requestsPerSecond),
      imbalance: m((r) => r.imbalance),
    };
  });
}

export function renderQualityTable(results: readonly QualityResult[]): string {
  const base = (r: QualityResult): QualityResult | undefined =>
    results.find((x) => x.policy === 'roundrobin' && x.replicas === r.replicas && x.users === r.users);
  const rows = results.map((r) => {
    const rr = base(r);
    return [
      String(r.users),
      r.policy,
      String(r.replicas),
      `${(r.hitRate * 100).toFixed(1)} %`,
      rr ? `${(r.hitRate / rr.hitRate).toFixed(2)}x` : '-',
      r.ttftP50Ms.toFixed(0),
      r.ttftP99Ms.toFixed(0),
      r.requestsPerSecond.toFixed(1),
      rr ? `${(r.requestsPerSecond / rr.requestsPerSecond).toFixed(2)}x` : '-',
      r.imbalance.toFixed(2),
      String(r.failed),
    ];
  });
  const header = [
    'users',
    'policy',
    'router replicas',
    'prefix-cache hit rate',
    'vs roundrobin',
    'TTFT p50 ms',
    'TTFT p99 ms',
    'req/s',
    'vs roundrobin',
    'busiest/idlest engine',
    'failed',
  ];
  return [header, header.map(() => '---'), ...rows].map((cells) => `| ${cells.join(' | ')} |`).join('\n');
}

// ---- the cost of one decision ----

export interface DecisionCost {
  readonly policy: string;
  readonly endpoints: number;
  readonly medianNs: number;
  readonly minNs: number;
}

/**
 * ns per pick() with `endpoints` ready candidates for one model, every engine with fresh load, 0-4 requests in flight
 * each, chat bodies with this workload's system prompts, and a session header: what each policy reads is there.
 * The policies come from dist/ when built (what `serve` runs), else from the sources.
 */
export async function measureDecisions(endpoints = 1000, rounds = 101, ops = 1000): Promise<{ source: string; costs: DecisionCost[] }> {
  const distIndex = path.join(root, 'dist', 'router', 'routing', 'index.js');
  const source = existsSync(distIndex) ? 'dist' : 'src';
  const mod = (await import(
    pathToFileURL(source === 'dist' ? distIndex : path.join(root, 'src', 'router', 'routing', 'index.ts')).href
  )) as { createPolicy: typeof CreatePolicy };
  const catalog = new ModelCatalog();
  catalog.setDeclarations('static', [MODEL]);
  catalog.setEndpoints(
    'static',
    Array.from({ length: endpoints }, (_, i) => {
      const url = `http://10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}:8000`;
      return { id: url, url, models: [MODEL] };
    }),
  );
  const rnd = mulberry32(7);
  const now = Date.now();
  for (const e of catalog.endpoints()) {
    catalog.setState(e, 'ready');
    for (let n = Math.floor(rnd() * 5); n > 0; n--) catalog.requestStarted(e);
    const running = Math.floor(rnd() * 8);
    catalog.recordLoad(e, { at: now, running, waiting: 0, kvUsage: running / 8, otherLoad: running / 2, others: running / 2, ours: 0 });
  }
  const resolution = catalog.resolve(MODEL);
  if (resolution.kind !== 'routable') throw new Error('bench catalog is not routable');
  const candidates = resolution.candidates;
  const workload = buildWorkload(64, 11);
  const requests: RouteRequest[] = workload.conversations.map((c, i) => ({
    model: MODEL,
    headers: { 'content-type': 'application/json', 'x-session-id': `session-${i}` },
    // parsed from JSON like the handler's body, so strings are flat as in production
    body: JSON.parse(JSON.stringify({ model: MODEL, messages: messagesFor(c, Math.min(1, c.turns.length - 1)), max_tokens: 16 })) as Record<
      string,
      unknown
    >,
  }));
  // an hour-long scrape interval keeps the snapshots fresh for the whole measurement
  const policies = MICRO_POLICIES.map((name) => mod.createPolicy(name, { sessionKey: 'x-session-id', engineStatsIntervalMs: 3_600_000 }));
  const timings = policies.map((): number[] => []);
  let sink = 0;
  // rounds interleave the policies, so that a busy moment on the machine does not land on one of them only
  for (let r = 0; r <= rounds; r++) {
    for (const [p, policy] of policies.entries()) {
      const t0 = process.hrtime.bigint();
      for (let i = 0; i < ops; i++) sink += (policy.pick(candidates, requests[i & 63] as RouteRequest) as Endpoint).inFlight;
      if (r > 0) (timings[p] as number[]).push(Number(process.hrtime.bigint() - t0) / ops);
    }
  }
  if (sink < 0) throw new Error('unreachable');
  const costs = MICRO_POLICIES.map((policy, p) => {
    const t = [...(timings[p] as number[])].sort((a, b) => a - b);
    return { policy, endpoints, medianNs: medianOf(t), minNs: t[0] as number };
  });
  return { source, costs };
}

export function renderDecisionTable(costs: readonly DecisionCost[]): string {
  const header = ['policy', 'endpoints', 'ns/op (median of rounds)', 'ns/op (best round)', 'budget 5,000 ns'];
  const rows = costs.map((c) => [
    c.policy,
    c.endpoints.toLocaleString('en-US'),
    c.medianNs.toFixed(0),
    c.minNs.toFixed(0),
    c.medianNs <= 5000 ? 'within' : 'OVER',
  ]);
  return [header, header.map(() => '---'), ...rows].map((cells) => `| ${cells.join(' | ')} |`).join('\n');
}

// ---- command line ----

function parseArgs(argv: readonly string[]): QualityOptions & { json: string | undefined; only: ReadonlySet<string> } {
  const list = (name: string, fallback: number[]): number[] => {
    const i = argv.indexOf(`--${name}`);
    if (i < 0) return fallback;
    const values = (argv[i + 1] ?? '').split(',').map(Number);
    if (values.length === 0 || values.some((n) => !Number.isInteger(n) || n <= 0))
      throw new Error(`--${name} needs positive whole numbers, comma separated`);
    return values;
  };
  const value = (name: string): string | undefined => {
    const i = argv.indexOf(`--${name}`);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const positive = (name: string, fallback: number): number => {
    const v = value(name);
    if (v === undefined) return fallback;
    const n = Number(v);
    if (!Number.isInteger(n) || n <= 0) throw new Error(`--${name} needs a positive whole number`);
    return n;
  };
  const quick = argv.includes('--quick');
  return {
    conversations: positive('conversations', quick ? 80 : 240),
    concurrency: list('concurrency', quick ? [32] : [16, 32]),
    rounds: positive('rounds', quick ? 1 : 3),
    seed: positive('seed', 42),
    json: value('json'),
    only: new Set((value('only') ?? 'quality,decisions').split(',')),
  };
}

async function main(): Promise<void> {
  const opts = parseArgs(process.argv.slice(2));
  const stop = (): void => {
    killRoutersNow();
    process.exit(130);
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  try {
    const results = opts.only.has('quality') ? await runRoutingQuality(opts, (line) => process.stderr.write(`${line}\n`)) : [];
    const decisions = opts.only.has('decisions') ? await measureDecisions() : undefined;
    if (results.length > 0) {
      const ideal = idealHitRate(buildWorkload(opts.conversations, opts.seed));
      process.stdout.write(
        `\nRouting quality (${opts.conversations} conversations, ${ENGINES} engines of ${ENGINE.maxNumSeqs} slots and ${ENGINE.prefixCacheBlocks} cache blocks each; ` +
          `one engine with an unbounded cache would hit ${(ideal * 100).toFixed(1)} %; medians of ${opts.rounds} interleaved rounds)\n\n${renderQualityTable(results)}\n`,
      );
    }
    if (decisions) {
      const load = os.loadavg()[0]?.toFixed(1);
      process.stdout.write(
        `\nRouting decision cost (policies from ${decisions.source}/; load average ${load} on ${os.cpus().length} cores)\n\n${renderDecisionTable(decisions.costs)}\n`,
      );
    }
    if (opts.json) writeFileSync(opts.json, JSON.stringify({ options: { ...opts, only: [...opts.only] }, results, decisions }, null, 2));
  } finally {
    await Promise.all([...routers].map(stopRouter));
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main().catch((err: unknown) => {
    killRoutersNow();
    process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
    process.exit(1);
  });
}
