// `npm run bench`: the router against nginx and against the direct path, measured in one run, interleaved, on loopback.
// Options: --quick (short run), --rounds N, --seconds S, --connections C, --chunks N, --streams N, --out FILE,
// --only routing,suggest,base,logging,workers,streams,wake,pd,lora (parts to run), --router-cli PATH (another build of dist/cli/main.js).
// --only tracing: what OpenTelemetry tracing at 100 % sampling adds (bench/tracing.ts): CPU per request and p50.
// --only kv runs the KV-aware routing part (bench/kv.ts), which reads its own flags (--trace FILE, --requests N, ...).
// --only flow: flow control (bench/flow.ts) without and with --flow-control; its own flags (--flow-seconds S, --json FILE, ...).
// The system soak (--only system, bench/system.ts): --seconds S (default 180, --quick 60), --rate R, --max-retries N.
// The soak and the system soak run once per --migration-limits value (default 0,1: without and with mid-stream migration).
// Everything it starts (upstream, simulator, routers, nginx) listens on 127.0.0.1 and is stopped before it exits.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { startNginx } from './nginx.js';
import { fetchOnce, freePort, killAllNow, startProc, stopAll, usageOf, waitUntil, type Proc } from './procs.js';
import { median, renderTable, type Row } from './report.js';
import { measureRouting, type RoutingResult } from './routing.js';
import { measureHotpath, type HotpathResult } from './hotpath.js';
import { measureSuggest, type SuggestResult } from './suggest.js';
import { runStreams, type StreamsResult } from './streams.js';
import { renderSoak, runSoak, type SoakResult } from './soak.js';
import { killRoutersNow, renderQualityTable, runRoutingQuality } from './routing-quality.js';
import { parseKvArgs, renderKv, runKv, type KvBenchResult } from './kv.js';
import { runWake, type WakeResult } from './wake.js';
import { renderSystem, runSystem, type SystemResult } from './system.js';
import { pdRows, runPd, type PdBenchResult } from './pd.js';
import { loraRows, runLora, type LoraBenchResult } from './lora.js';
import { runTracing, tracingRows, type TracingBenchResult } from './tracing.js';
import { parseFlowArgs, renderFlow, runFlow, type FlowBenchResult } from './flow.js';
import { JSON_BODY, MODEL, SSE_BODY, killWrk, runWrk, wrkScript, type WrkResult } from './wrk.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
/** the built CLI; --router-cli PATH measures another build (e.g. the code before a change) */
let CLI = path.join(root, 'dist', 'cli', 'main.js');

interface Options {
  readonly quick: boolean;
  readonly rounds: number;
  readonly seconds: number;
  readonly latencySeconds: number;
  readonly connections: number;
  readonly chunks: number;
  readonly streams: number;
  readonly streamTokens: number;
  readonly streamItlMs: number;
  readonly out: string | undefined;
  /** parts to run: routing, base, logging, workers, streams (default all) */
  readonly only: ReadonlySet<string>;
  /** the system soak: its length (--seconds when given, else 180, --quick 60), client requests/s, retries per request */
  readonly systemSeconds: number;
  readonly systemRate: number;
  readonly systemMaxRetries: number;
  /** the soak and the system soak: one run per router --migration-limit */
  readonly migrationLimits: readonly number[];
}

/**
 * parts run by default; `quality` (routing quality per policy, ~15 min), `soak` (~2 min), `kv` (KV-aware routing over a
 * trace, ~25 min; ~5 with --quick), `system` (~4 min) and `flow` (flow control, ~9 min; ~4 with --quick) on request or
 * with --all
 */
const PARTS = ['routing', 'suggest', 'base', 'logging', 'workers', 'streams', 'wake', 'pd', 'lora'];
const EXTRA_PARTS = ['quality', 'soak', 'kv', 'system', 'tracing', 'flow'];

function parseOptions(argv: readonly string[]): Options {
  const quick = argv.includes('--quick');
  const value = (name: string, fallback: number): number => {
    const i = argv.indexOf(`--${name}`);
    if (i < 0) return fallback;
    const n = Number(argv[i + 1]);
    if (!Number.isFinite(n) || n <= 0) throw new Error(`--${name} needs a positive number`);
    return n;
  };
  const outIndex = argv.indexOf('--out');
  return {
    quick,
    rounds: value('rounds', quick ? 2 : 3),
    seconds: value('seconds', quick ? 2 : 5),
    latencySeconds: value('latency-seconds', quick ? 2 : 3),
    connections: value('connections', 50),
    chunks: value('chunks', 50),
    streams: value('streams', 2_000),
    streamTokens: value('stream-tokens', quick ? 60 : 80),
    streamItlMs: value('stream-itl-ms', 100),
    systemSeconds: value('system-seconds', argv.includes('--seconds') ? value('seconds', 180) : quick ? 60 : 180),
    systemRate: value('rate', 20),
    systemMaxRetries: argv.includes('--max-retries') ? Number(argv[argv.indexOf('--max-retries') + 1]) : 2,
    migrationLimits: argv.includes('--migration-limits')
      ? (argv[argv.indexOf('--migration-limits') + 1] ?? '').split(',').map(Number)
      : [0, 1],
    out: outIndex >= 0 ? argv[outIndex + 1] : undefined,
    only: new Set(
      argv.includes('--only')
        ? (argv[argv.indexOf('--only') + 1] ?? '').split(',')
        : argv.includes('--all')
          ? [...PARTS, ...EXTRA_PARTS]
          : PARTS,
    ),
  };
}

function log(line: string): void {
  process.stderr.write(`[bench] ${line}\n`);
}

function has(tool: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' }).status === 0;
}

/** wrk and nginx from Debian when missing; a tool that still is missing skips its column. */
function ensureTools(): { wrk: boolean; nginx: boolean } {
  const missing = (['wrk', 'nginx'] as const).filter((t) => !has(t));
  if (missing.length > 0) {
    if (process.getuid?.() !== 0 || !has('apt-get')) {
      log(`missing ${missing.join(', ')} and cannot install (needs root and apt-get)`);
    } else {
      log(`installing ${missing.map((t) => (t === 'nginx' ? 'nginx-light' : t)).join(' ')} with apt-get`);
      const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
      spawnSync('apt-get', ['update', '-qq'], { stdio: 'ignore', env, timeout: 300_000 });
      spawnSync('apt-get', ['install', '-y', '-qq', ...missing.map((t) => (t === 'nginx' ? 'nginx-light' : t))], {
        stdio: 'ignore',
        env,
        timeout: 600_000,
      });
    }
  }
  const tools = { wrk: has('wrk'), nginx: has('nginx') };
  if (!tools.wrk) log('wrk is not available: the request/s and latency columns are skipped');
  if (!tools.nginx) log('nginx is not available: the nginx column is skipped');
  return tools;
}

/** undici: the router run with undici's Pool as its engine client (issue 14: the engine client is chosen by measurement) */
type Target = 'direct' | 'nginx' | 'floor' | 'router' | 'undici';

interface Sample extends WrkResult {
  /** CPU time the proxy process tree used per request, in microseconds (undefined for direct) */
  readonly cpuUsPerRequest: number | undefined;
}

interface Scenario {
  readonly name: string;
  readonly script: string;
  readonly connections: number;
  readonly seconds: number;
}

interface PassResult {
  readonly name: string;
  /** scenario -> target -> samples, one per round */
  readonly samples: Record<string, Partial<Record<Target, Sample[]>>>;
}

async function measure(port: number, proc: Proc | undefined, s: Scenario): Promise<Sample> {
  const before = proc ? usageOf(proc.pid).cpuSeconds : 0;
  const r = await runWrk({ port, script: s.script, connections: s.connections, seconds: s.seconds });
  const cpu = proc ? usageOf(proc.pid).cpuSeconds - before : 0;
  return { ...r, cpuUsPerRequest: proc && r.requests > 0 ? (cpu * 1e6) / r.requests : undefined };
}

/** Runs every scenario against every target, round after round, rotating the order of targets in each round. */
async function interleaved(
  name: string,
  targets: ReadonlyArray<{ target: Target; port: number; proc: Proc | undefined }>,
  scenarios: readonly Scenario[],
  rounds: number,
): Promise<PassResult> {
  const samples: PassResult['samples'] = {};
  for (const s of scenarios) {
    samples[s.name] = {};
    for (const t of targets) await runWrk({ port: t.port, script: s.script, connections: s.connections, seconds: 1 }); // warm-up (JIT, pools)
  }
  for (let round = 0; round < rounds; round++) {
    for (const s of scenarios) {
      const order = targets.map((_, i) => targets[(i + round) % targets.length] as (typeof targets)[number]);
      for (const t of order) {
        const sample = await measure(t.port, t.proc, s);
        const byTarget = samples[s.name] as Partial<Record<Target, Sample[]>>;
        byTarget[t.target] ??= [];
        byTarget[t.target]?.push(sample);
        log(
          `${name} round ${round + 1}/${rounds} ${s.name} ${t.target}: ${sample.rps.toFixed(0)} req/s p50 ${sample.p50Ms.toFixed(3)} ms p99 ${sample.p99Ms.toFixed(3)} ms${sample.errors ? ` ERRORS ${sample.errors}` : ''}`,
        );
      }
    }
  }
  return { name, samples };
}

function startRouter(
  dir: string,
  name: string,
  port: number,
  backendPort: number,
  extra: readonly string[],
  env: Readonly<Record<string, string>> = {},
): Proc {
  const args = [
    CLI,
    'serve',
    '--host',
    '127.0.0.1',
    '--port',
    String(port),
    '--static-backends',
    `http://127.0.0.1:${backendPort}`,
    '--static-models',
    MODEL,
    // no drain period on SIGTERM: nothing balances load onto these routers, and passes must not overlap
    '--log-level',
    'warn',
    '--drain-seconds',
    '0',
    ...extra,
  ];
  return startProc(name, process.execPath, args, path.join(dir, `${name}.log`), 'SIGTERM', env);
}

async function waitServing(port: number, proc: Proc, times = 1): Promise<void> {
  await waitUntil(
    `${proc.name} on ${port}`,
    async () => (await fetchOnce(port, 'POST', '/v1/chat/completions', JSON_BODY)).status === 200,
    { proc, times, timeoutMs: 30_000 },
  );
}

function stat(samples: readonly Sample[] | undefined, pick: (s: Sample) => number | undefined): number | undefined {
  if (!samples || samples.length === 0) return undefined;
  const values = samples.map(pick).filter((v): v is number => v !== undefined);
  return values.length ? median(values) : undefined;
}

interface Results {
  readonly startedAt: string;
  readonly machine: { cpus: number; model: string; node: string; nginx: string | undefined; wrk: string | undefined };
  readonly options: Omit<Options, 'only'> & { only: string[]; routerCli: string };
  readonly routing: RoutingResult[];
  /** the router's own per-request CPU in process, no sockets (part `routing`) */
  readonly hotpath: HotpathResult | undefined;
  /** a 404's "did you mean" among 10,000 declared models (part `suggest`) */
  readonly suggest: SuggestResult | undefined;
  readonly passes: PassResult[];
  readonly streams: (StreamsResult & { routerPeakRssMb: number; routerIdleRssMb: number; routerCpuPercent: number }) | undefined;
  readonly routerRssAfterLoadMb: number | undefined;
  /** engine model loaded -> held client's first byte over cold starts (part `wake`) */
  readonly wake: WakeResult | undefined;
  /** P/D: the prefill hop's added latency, TTFT P/D against aggregated (part `pd`) */
  readonly pd: PdBenchResult | undefined;
  /** LoRA: waits for adapter loads and load churn, the router against a policy that ignores adapters (part `lora`) */
  readonly lora: LoraBenchResult | undefined;
  /** tracing on (100 % sampled) against off: added CPU per request and p50 (part `tracing`) */
  readonly tracing: TracingBenchResult | undefined;
  /** flow control: tenants and priorities without and with --flow-control (part `flow`) */
  readonly flow: FlowBenchResult | undefined;
  readonly rows: Row[];
  readonly skipped: string[];
}

async function streamsScenario(dir: string, o: Options): Promise<Results['streams']> {
  const simPort = await freePort();
  const routerPort = await freePort();
  const sim = startProc(
    'sim',
    process.execPath,
    [
      CLI,
      'sim',
      '--port',
      String(simPort),
      '--model',
      MODEL,
      '--ttft-ms',
      '50',
      '--itl-ms',
      String(o.streamItlMs),
      '--output-tokens',
      String(o.streamTokens),
      '--max-num-seqs',
      String(o.streams * 2),
    ],
    path.join(dir, 'sim.log'),
  );
  await waitUntil('simulator', async () => (await fetchOnce(simPort, 'GET', '/v1/models')).status === 200, { proc: sim });
  // every stream holds an engine connection: this scenario puts all of them on one engine, beyond the default cap
  const router = startRouter(dir, 'router-streams', routerPort, simPort, ['--max-connections-per-engine', String(o.streams * 2)]);
  await waitServing(routerPort, router);
  await sleep(500);
  const idle = usageOf(router.pid);
  let peakRss = idle.rssBytes;
  const sampler = setInterval(() => (peakRss = Math.max(peakRss, usageOf(router.pid).rssBytes)), 100);
  const t0 = performance.now();
  const body = JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'Tell me a long story.' }], stream: true });
  const result = await runStreams({
    port: routerPort,
    streams: o.streams,
    body,
    stallThresholdMs: 1_000,
    timeoutMs: 60_000 + o.streamTokens * o.streamItlMs * 2,
  });
  const wall = (performance.now() - t0) / 1000;
  clearInterval(sampler);
  const after = usageOf(router.pid);
  peakRss = Math.max(peakRss, after.rssBytes);
  await router.stop();
  await sim.stop();
  return {
    ...result,
    routerIdleRssMb: idle.rssBytes / 2 ** 20,
    routerPeakRssMb: peakRss / 2 ** 20,
    routerCpuPercent: ((after.cpuSeconds - idle.cpuSeconds) / wall) * 100,
  };
}

function version(cmd: string, args: string[]): string | undefined {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  if (r.status !== 0 && !r.stderr && !r.stdout) return undefined;
  return `${r.stdout}${r.stderr}`
    .split('\n')
    .find((l) => l.trim())
    ?.trim();
}

function buildRows(r: Omit<Results, 'rows'>, o: Options): Row[] {
  const rows: Row[] = [];
  const pass = (name: string): PassResult | undefined => r.passes.find((p) => p.name === name);
  const base = pass('base');
  const json = `JSON, ${o.connections} conns`;
  const sse = `SSE ${o.chunks} chunks, ${o.connections} conns`;
  if (base) {
    for (const [scenario, label, target, minRatio] of [
      ['json', json, '>= 0.70x nginx', 0.7],
      ['sse', sse, '>= 1.00x nginx', 1.0],
    ] as const) {
      const s = base.samples[scenario] ?? {};
      const rps = (t: Target): number | undefined => stat(s[t], (x) => x.rps);
      const met =
        rps('router') !== undefined && rps('nginx') !== undefined
          ? (rps('router') as number) / (rps('nginx') as number) >= minRatio
          : undefined;
      const all = (pick: (x: Sample) => number | undefined): Pick<Row, 'direct' | 'nginx' | 'floor' | 'router' | 'undici'> => ({
        direct: stat(s.direct, pick),
        nginx: stat(s.nginx, pick),
        floor: stat(s.floor, pick),
        router: stat(s.router, pick),
        undici: stat(s.undici, pick),
      });
      rows.push({ scenario: label, metric: 'requests/s', ...all((x) => x.rps), ratios: true, target, met });
      rows.push({ scenario: label, metric: 'p50 ms', ...all((x) => x.p50Ms), ratios: true, digits: 3 });
      rows.push({ scenario: label, metric: 'p99 ms', ...all((x) => x.p99Ms), ratios: true, digits: 3 });
      rows.push({
        scenario: label,
        metric: 'proxy CPU us/request',
        ...all((x) => x.cpuUsPerRequest),
        direct: undefined,
        ratios: true,
        digits: 1,
      });
      // the engine client is chosen by this: the router's own is kept only if it leads undici's by 10 % or more
      const own = rps('router');
      const undici = rps('undici');
      if (own !== undefined && undici !== undefined) {
        rows.push({
          scenario: label,
          metric: 'own engine client / undici client, requests/s',
          router: own / undici,
          digits: 2,
          target: '>= 1.10 keeps the own client',
          met: own / undici >= 1.1,
        });
      }
    }
    const one = base.samples.json1 ?? {};
    const p50 = (t: Target): number | undefined => stat(one[t], (x) => x.p50Ms);
    const direct = p50('direct');
    rows.push({
      scenario: 'JSON, 1 conn',
      metric: 'p50 ms',
      direct,
      nginx: p50('nginx'),
      floor: p50('floor'),
      router: p50('router'),
      ratios: true,
      digits: 3,
    });
    // added latency per round (proxy minus direct in the same round), then the median
    const added = (t: Target): number | undefined => {
      const a = one[t];
      const d = one.direct;
      if (!a || !d) return undefined;
      return median(a.map((x, i) => x.p50Ms - (d[i] as Sample).p50Ms));
    };
    const routerAdded = added('router');
    rows.push({
      scenario: 'JSON, 1 conn',
      metric: 'added p50 ms (proxy - direct)',
      nginx: added('nginx'),
      floor: added('floor'),
      router: routerAdded,
      digits: 3,
      target: '<= 0.25 ms',
      met: routerAdded === undefined ? undefined : routerAdded <= 0.25,
    });
  }
  for (const [name, label] of [
    ['logging', 'logging on (router info, nginx access_log)'],
    ['workers', 'router --workers 2, nginx 2 workers'],
  ] as const) {
    const p = pass(name);
    if (!p) continue;
    for (const [scenario, what] of [
      ['json', 'JSON'],
      ['sse', 'SSE'],
    ] as const) {
      const s = p.samples[scenario] ?? {};
      rows.push({
        scenario: `${label}`,
        metric: `${what} requests/s`,
        direct: stat(s.direct, (x) => x.rps),
        nginx: stat(s.nginx, (x) => x.rps),
        router: stat(s.router, (x) => x.rps),
        ratios: true,
      });
    }
  }
  if (r.streams) {
    const s = r.streams;
    const label = `${s.streams} concurrent SSE streams (sim, ${o.streamTokens} tokens, ${o.streamItlMs} ms apart)`;
    rows.push({
      scenario: label,
      metric: 'completed streams',
      router: s.completed,
      target: `all ${s.streams}`,
      met: s.completed === s.streams,
    });
    rows.push({ scenario: label, metric: 'peak open at once', router: s.peakOpen });
    rows.push({
      scenario: label,
      metric: 'router peak RSS MB',
      router: s.routerPeakRssMb,
      digits: 1,
      target: '<= 250 MB',
      met: s.routerPeakRssMb <= 250,
    });
    rows.push({ scenario: label, metric: 'router CPU % of one core', router: s.routerCpuPercent, digits: 0 });
    rows.push({
      scenario: label,
      metric: `longest gap in a stream ms (stalls > ${s.stallThresholdMs} ms: ${s.stalls})`,
      router: s.maxGapMs,
      digits: 0,
      target: 'no stalls',
      met: s.stalls === 0,
    });
    rows.push({ scenario: label, metric: 'time to first byte ms, p50', router: s.firstByteMs.p50, digits: 0 });
    rows.push({ scenario: label, metric: 'time to first byte ms, max', router: s.firstByteMs.max, digits: 0 });
    if (s.listenOverflows !== undefined)
      rows.push({ scenario: label, metric: 'accept-queue overflows (machine-wide)', router: s.listenOverflows });
  }
  for (const x of r.routing) {
    rows.push({
      scenario: `routing decision, ${x.endpoints} endpoints / ${x.models} models`,
      metric: `${x.policy} ns/op`,
      router: x.nsPerOp,
      digits: 0,
      target: '<= 5000 ns',
      met: x.nsPerOp <= 5_000,
    });
  }
  if (r.suggest) {
    const x = r.suggest;
    const label = `404 "did you mean", ${x.names} declared models (bench/suggest.ts)`;
    for (const [metric, us] of [
      ['a one-edit typo, µs/404', x.typoUs],
      ['two or three edits from thousands, µs/404', x.nearUs],
      ['a name like none, µs/404', x.farUs],
    ] as const)
      rows.push({ scenario: label, metric, router: us, digits: 0, target: '<= 1000 µs', met: us <= 1_000 });
    rows.push({ scenario: label, metric: 'every name compared (before the index), near misses, µs/404', router: x.scanNearUs, digits: 0 });
    rows.push({ scenario: label, metric: 'index built once the names change, ms', router: x.buildMs, digits: 1 });
  }
  if (r.pd) rows.push(...pdRows(r.pd));
  if (r.lora) rows.push(...loraRows(r.lora));
  if (r.tracing) rows.push(...tracingRows(r.tracing));
  if (r.hotpath) {
    const label = 'one request in process, no sockets (bench/hotpath.ts)';
    rows.push({ scenario: label, metric: 'handleInference ns/request', router: r.hotpath.routerNs, digits: 0 });
    rows.push({
      scenario: label,
      metric: 'with --flow-control, below saturation: added ns/request',
      router: r.hotpath.flowNs - r.hotpath.routerNs,
      digits: 0,
    });
    rows.push({ scenario: label, metric: 'least proxy handler ns/request', router: r.hotpath.floorNs, digits: 0 });
  }
  return rows;
}

async function main(): Promise<void> {
  const o = parseOptions(process.argv.slice(2));
  const cliIndex = process.argv.indexOf('--router-cli');
  if (cliIndex >= 0) CLI = path.resolve(process.argv[cliIndex + 1] ?? CLI);
  const startedAt = new Date();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'llm-router-bench-'));
  workDir = dir;
  const skipped: string[] = [];
  const passes: PassResult[] = [];
  let streams: Results['streams'];
  let routerRssAfterLoadMb: number | undefined;
  log(`work dir ${dir}${o.quick ? ' (quick run)' : ''}; router ${CLI}`);

  let routing: RoutingResult[] = [];
  let hotpath: HotpathResult | undefined;
  if (o.only.has('routing')) {
    log('routing decision microbenchmark');
    routing = measureRouting({ ops: o.quick ? 200_000 : 1_000_000, rounds: o.quick ? 3 : 5 });
    log('router logic per request, in process');
    hotpath = await measureHotpath({ requests: o.quick ? 20_000 : 100_000, rounds: o.quick ? 3 : 5 });
  }

  let suggest: SuggestResult | undefined;
  if (o.only.has('suggest')) {
    log('404 "did you mean" among 10,000 declared models');
    suggest = measureSuggest({ names: 10_000, questions: o.quick ? 200 : 1_000, rounds: o.quick ? 3 : 5 });
  }

  // wrk and nginx only for the parts that use them
  const needsTools = ['base', 'logging', 'workers'].some((p) => o.only.has(p));
  const tools = needsTools ? ensureTools() : { wrk: has('wrk'), nginx: has('nginx') };
  if (needsTools && !tools.nginx) skipped.push('nginx column: nginx is not installed');
  if (needsTools && !tools.wrk) skipped.push('requests/s and latency: wrk is not installed');
  const scripts = { json: wrkScript(dir, 'json', JSON_BODY), sse: wrkScript(dir, 'sse', SSE_BODY) };
  const scenarios: Scenario[] = [
    { name: 'json', script: scripts.json, connections: o.connections, seconds: o.seconds },
    { name: 'sse', script: scripts.sse, connections: o.connections, seconds: o.seconds },
  ];

  if (tools.wrk && (o.only.has('base') || o.only.has('logging') || o.only.has('workers'))) {
    const upstreamPort = await freePort();
    const upstream = startProc(
      'upstream',
      process.execPath,
      ['--import', 'tsx', path.join(root, 'bench', 'upstream.ts'), '--port', String(upstreamPort), '--chunks', String(o.chunks)],
      path.join(dir, 'upstream.log'),
    );
    await waitUntil('upstream', async () => (await fetchOnce(upstreamPort, 'POST', '/v1/chat/completions', JSON_BODY)).status === 200, {
      proc: upstream,
    });
    const direct = { target: 'direct' as const, port: upstreamPort, proc: undefined };

    const pass = async (
      name: string,
      nginxWorkers: number,
      accessLog: boolean,
      routerArgs: string[],
      extraScenarios: Scenario[] = [],
      withFloor = false,
    ): Promise<void> => {
      const targets: Array<{ target: Target; port: number; proc: Proc | undefined }> = [direct];
      const routerPort = await freePort();
      const router = startRouter(dir, `router-${name}`, routerPort, upstreamPort, routerArgs);
      let nginx: Proc | undefined;
      let floor: Proc | undefined;
      let undici: Proc | undefined;
      try {
        if (name === 'base') {
          // the same router with undici's Pool on the engine side, measured in the same rounds
          const undiciPort = await freePort();
          undici = startRouter(dir, 'router-undici', undiciPort, upstreamPort, routerArgs, { LLM_ROUTER_ENGINE_CLIENT: 'undici' });
          await waitServing(undiciPort, undici, 6);
          targets.push({ target: 'undici', port: undiciPort, proc: undici });
        }
        if (withFloor) {
          const floorPort = await freePort();
          floor = startProc(
            'node-floor',
            process.execPath,
            [
              '--import',
              'tsx',
              path.join(root, 'bench', 'floor-proxy.ts'),
              '--port',
              String(floorPort),
              '--upstream-port',
              String(upstreamPort),
            ],
            path.join(dir, 'floor.log'),
          );
          await waitServing(floorPort, floor);
          targets.push({ target: 'floor', port: floorPort, proc: floor });
        }
        if (tools.nginx) {
          const nginxPort = await freePort();
          nginx = startNginx({ dir, port: nginxPort, upstreamPort, workers: nginxWorkers, accessLog });
          await waitServing(nginxPort, nginx);
          targets.push({ target: 'nginx', port: nginxPort, proc: nginx });
        }
        await waitServing(routerPort, router, 6);
        targets.push({ target: 'router', port: routerPort, proc: router });
        passes.push(await interleaved(name, targets, [...scenarios, ...extraScenarios], o.rounds));
        if (name === 'base') routerRssAfterLoadMb = usageOf(router.pid).rssBytes / 2 ** 20;
      } finally {
        await router.stop();
        await undici?.stop();
        await nginx?.stop();
        await floor?.stop();
      }
    };

    try {
      if (o.only.has('base'))
        await pass('base', 1, false, [], [{ name: 'json1', script: scripts.json, connections: 1, seconds: o.latencySeconds }], true);
      if (o.only.has('logging')) await pass('logging', 1, true, ['--log-level', 'info']);
      if (o.only.has('workers')) await pass('workers', 2, false, ['--workers', '2']);
    } finally {
      await upstream.stop();
    }
  }

  if (o.only.has('streams')) {
    log(`${o.streams} concurrent streams through one router process`);
    streams = await streamsScenario(dir, o);
  }

  let wake: WakeResult | undefined;
  if (o.only.has('wake')) {
    log('wake: held requests released after cold starts of a simulated engine');
    wake = await runWake({ cli: CLI, dir, starts: o.quick ? 5 : 12, loadingSeconds: 1, probeWakeIntervalSeconds: 0.1 }, log);
  }

  let pd: PdBenchResult | undefined;
  if (o.only.has('pd')) {
    log('pd: the prefill hop through the router, and TTFT of P/D against aggregated serving on simulators');
    pd = await runPd({ cli: CLI, dir, quick: o.quick }, log);
  }

  let lora: LoraBenchResult | undefined;
  if (o.only.has('lora')) {
    log('lora: requests that waited for an adapter load, and load churn, against a policy that ignores adapters');
    lora = await runLora({ cli: CLI, dir, quick: o.quick }, log);
  }

  let tracing: TracingBenchResult | undefined;
  if (o.only.has('tracing')) {
    log('tracing: a router tracing every request to an OTLP receiver against one without tracing');
    tracing = await runTracing({ cli: CLI, dir, quick: o.quick }, log);
  }

  let flow: FlowBenchResult | undefined;
  if (o.only.has('flow')) {
    log('flow: tenants and priorities through one router in front of two saturated simulators, without and with --flow-control');
    const flowOptions = parseFlowArgs(process.argv.slice(2));
    flow = await runFlow(flowOptions, { cli: CLI, dir }, (line) => log(`flow: ${line}`));
    if (flowOptions.json) writeFileSync(flowOptions.json, JSON.stringify(flow, null, 2) + '\n');
  }

  const soak: SoakResult[] = [];
  if (o.only.has('soak')) {
    for (const migrationLimit of o.migrationLimits) {
      log(`soak: mixed requests with engine faults injected, --migration-limit ${migrationLimit}`);
      soak.push(
        await runSoak(
          { requests: o.quick ? 10_000 : 100_000, concurrency: 64, streamShare: 0.3, requestTimeoutMs: 15_000, migrationLimit },
          log,
        ),
      );
    }
  }
  const system: SystemResult[] = [];
  if (o.only.has('system')) {
    if (!has('prometheus')) throw new Error('the system soak needs prometheus (Debian: apt-get install prometheus)');
    for (const migrationLimit of o.migrationLimits) {
      log(
        `system: two router replicas, four engines, faults, Prometheus and KEDA for ${o.systemSeconds} s, --migration-limit ${migrationLimit}`,
      );
      system.push(
        await runSystem(
          {
            cli: CLI,
            dir,
            seconds: o.systemSeconds,
            rate: o.systemRate,
            maxRetries: o.systemMaxRetries,
            attemptDeadlineMs: 60_000,
            migrationLimit,
          },
          log,
        ),
      );
    }
  }
  let quality: Awaited<ReturnType<typeof runRoutingQuality>> | undefined;
  if (o.only.has('quality')) {
    log('routing quality per policy (prefix-cache hit rate, TTFT, throughput)');
    quality = await runRoutingQuality(
      { conversations: o.quick ? 80 : 240, concurrency: o.quick ? [32] : [16, 32], rounds: o.quick ? 1 : 3, seed: 42 },
      log,
    );
  }

  let kv: KvBenchResult | undefined;
  if (o.only.has('kv')) {
    log('kv: a trace replayed per policy (roundrobin, least-load, prefixaware, kvaware) over simulators with KV-cache events');
    kv = await runKv(parseKvArgs(process.argv.slice(2)), (line) => log(`kv: ${line}`));
  }

  const partial = {
    startedAt: startedAt.toISOString(),
    machine: {
      cpus: os.cpus().length,
      model: os.cpus()[0]?.model ?? '',
      node: process.version,
      nginx: tools.nginx ? version('nginx', ['-v']) : undefined,
      wrk: tools.wrk ? version('wrk', ['-v']) : undefined,
    },
    options: { ...o, only: [...o.only], routerCli: CLI },
    routing,
    hotpath,
    suggest,
    passes,
    streams,
    routerRssAfterLoadMb,
    soak,
    system,
    quality,
    kv,
    wake,
    pd,
    lora,
    tracing,
    flow,
    skipped,
  };
  const rows = buildRows(partial, o);
  const results: Results = { ...partial, rows };
  const out = o.out ?? path.join(root, 'bench', 'results', `${startedAt.toISOString().replace(/[:.]/g, '-')}.json`);
  mkdirSync(path.dirname(out), { recursive: true });
  writeFileSync(out, JSON.stringify(results, null, 2) + '\n');
  if (rows.length > 0) process.stdout.write(`\n${renderTable(rows)}\n\n`);
  // a proxy that answers errors fast would look fast: every error wrk saw is printed with the table
  for (const p of passes) {
    for (const [scenario, byTarget] of Object.entries(p.samples)) {
      for (const [target, samples] of Object.entries(byTarget)) {
        const errors = (samples ?? []).reduce((n, x) => n + x.errors, 0);
        if (errors > 0) process.stdout.write(`ERRORS in ${p.name} ${scenario} ${target}: ${errors} (socket errors or non-2xx answers)\n`);
      }
    }
  }
  if (routerRssAfterLoadMb !== undefined) process.stdout.write(`router RSS after the base pass: ${routerRssAfterLoadMb.toFixed(1)} MB\n`);
  if (wake) {
    process.stdout.write(
      `wake: ${wake.starts} cold starts, engine model loaded -> held client's first byte p50 ${wake.p50} ms, max ${wake.max} ms (probe wake interval ${wake.probeWakeIntervalMs} ms)\n`,
    );
  }
  for (const s of soak) process.stdout.write(`\n${renderSoak(s)}\n`);
  for (const s of system) process.stdout.write(`\n${renderSystem(s)}\n`);
  if (quality) process.stdout.write(`\n${renderQualityTable(quality)}\n`);
  if (kv) process.stdout.write(`\n${renderKv(kv)}\n`);
  if (flow) process.stdout.write(`\n${renderFlow(flow)}\n`);
  if (streams?.firstErrors.length) process.stdout.write(`first stream errors: ${streams.firstErrors.join('; ')}\n`);
  for (const s of skipped) process.stdout.write(`skipped: ${s}\n`);
  process.stdout.write(`results: ${path.relative(process.cwd(), out)}\n`);
  rmSync(dir, { recursive: true, force: true });
}

/** kept on failure, for the logs of the processes */
let workDir = '';
let interrupted = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (interrupted) return;
    interrupted = true;
    log(`${signal}: stopping everything that was started`);
    killWrk();
    stopAll().finally(() => process.exit(130));
  });
}
process.on('exit', () => {
  killWrk();
  killAllNow();
  // the quality and kv parts start their routers themselves
  killRoutersNow();
});

main()
  .catch(async (err: unknown) => {
    log(`failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    if (workDir) log(`logs of the started processes are in ${workDir}`);
    process.exitCode = 1;
  })
  .finally(async () => {
    await stopAll();
  });
