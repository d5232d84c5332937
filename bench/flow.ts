// Flow control (`npm run bench -- --only flow`, issue 31): tenants (x-gateway-inference-fairness-id) and priorities
// (x-llm-router-priority) through one router in front of two saturated simulators, each scenario run without and with
// `--flow-control` in the same run, a fresh router for each. Per tenant: requests, 200s, share of the 200s, p50/p90,
// refusals by status and error code and how fast they came, whether every request got an answer within its bound; the
// issue's Done-when targets with pass/fail; Jain's fairness index for tenants with the same offered load.
//
//   node --import tsx bench/flow.ts [--quick] [--flow-seconds S] [--flow-unloaded-seconds S] [--flow-request-timeout S]
//        [--flow-scenarios done-when,noisy,priority,sheddable,equal] [--router-args "..."] [--flow-args "..."]
//        [--json FILE]
//
// Engines: two `llm-router sim` processes, --max-num-seqs 4, TTFT 50 ms + 32 tokens 10 ms apart (360 ms a request
// unloaded), 200-token prompts and a KV pool of 64 blocks of 16 tokens (a request holds 15 at its end: four fit, and
// four running hold 80-95 % of the pool). Routers: `llm-router serve` processes of the build (--router-args added to
// both, --flow-args to the one with --flow-control). A build whose router refuses --flow-control runs the "without"
// half and says so for the other. Everything listens on 127.0.0.1 on ports found at run time; every request is bounded
// in time; every process started is stopped before the script exits.
import path from 'node:path';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Agent, request } from 'undici';
import { parseEngineLoad } from '../src/router/health/engine-stats.js';
import {
  doneWhenChecks,
  jainIndex,
  NOT_AVAILABLE,
  renderChecks,
  renderScenario,
  SCENARIOS,
  tenantFigures,
  type Outcome,
  type RunFigures,
  type ScenarioSpec,
  type TargetCheck,
  type TenantLoad,
  type Unloaded,
} from './flow-stats.js';
import { fetchOnce, freePort, killAllNow, startProc, startServe, stopAll, waitUntil, type Proc } from './procs.js';
import { mulberry32 } from './routing-quality.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const MODEL = 'flow-bench';
const PROMPT_WORDS = 200;
const OUTPUT_TOKENS = 32;
/** the engines' flags: ~0.36 s a request unloaded (TTFT 50 ms + 31 gaps of 10 ms), 4 sequences, a KV pool of 64 blocks */
export const ENGINE_FLAGS: readonly string[] = [
  '--max-num-seqs',
  '4',
  '--ttft-ms',
  '50',
  '--itl-ms',
  '10',
  '--output-tokens',
  String(OUTPUT_TOKENS),
  '--kv-block-size',
  '16',
  '--num-gpu-blocks',
  '64',
];
const ENGINES = 2;

export interface FlowOptions {
  readonly quick: boolean;
  /** each scenario's length */
  readonly seconds: number;
  /** each tenant alone first (done-when), this long */
  readonly unloadedSeconds: number;
  /** a request without an answer after this long is given up (counted as unanswered) */
  readonly requestTimeoutSeconds: number;
  readonly scenarios: readonly string[];
  /** added to both routers' flags */
  readonly routerArgs: readonly string[];
  /** added to the flow-controlled router's flags, after --flow-control */
  readonly flowArgs: readonly string[];
  readonly json: string | undefined;
}

function splitArgs(text: string | undefined): string[] {
  return (text ?? '').split(' ').filter((a) => a !== '');
}

export function parseFlowArgs(argv: readonly string[]): FlowOptions {
  const value = (name: string): string | undefined => {
    const i = argv.indexOf(`--${name}`);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const num = (name: string, fallback: number): number => {
    const v = value(name);
    if (v === undefined) return fallback;
    const n = Number(v);
    if (!Number.isFinite(n) || n <= 0) throw new Error(`--${name} needs a positive number`);
    return n;
  };
  const quick = argv.includes('--quick');
  const scenarios = (value('flow-scenarios') ?? SCENARIOS.map((s) => s.name).join(',')).split(',').filter(Boolean);
  for (const s of scenarios)
    if (!SCENARIOS.some((x) => x.name === s))
      throw new Error(`--flow-scenarios: no scenario ${s} (${SCENARIOS.map((x) => x.name).join(', ')})`);
  return {
    quick,
    seconds: num('flow-seconds', quick ? 10 : 30),
    unloadedSeconds: num('flow-unloaded-seconds', quick ? 3 : 5),
    requestTimeoutSeconds: num('flow-request-timeout', quick ? 30 : 60),
    scenarios,
    routerArgs: splitArgs(value('router-args')),
    flowArgs: splitArgs(value('flow-args')),
    json: value('json'),
  };
}

export interface FlowBenchResult {
  readonly options: FlowOptions;
  readonly engines: { readonly count: number; readonly flags: readonly string[]; readonly promptTokens: number };
  /** false: the router of this build refused --flow-control */
  readonly flowControlAvailable: boolean;
  readonly scenarios: ReadonlyArray<{ readonly spec: ScenarioSpec; readonly runs: readonly RunFigures[] }>;
  /** the done-when scenario's targets per configuration (undefined where it did not run) */
  readonly doneWhen: ReadonlyArray<{ readonly config: string; readonly checks: readonly TargetCheck[] | undefined }>;
}

// ---- processes ----

interface Engine {
  readonly proc: Proc;
  readonly url: string;
}

async function startEngine(cli: string, dir: string, name: string): Promise<Engine> {
  const port = await freePort();
  const proc = startProc(
    name,
    process.execPath,
    [cli, 'sim', '--host', '127.0.0.1', '--port', String(port), '--model', MODEL, '--id', name, ...ENGINE_FLAGS],
    path.join(dir, `${name}.log`),
  );
  await waitUntil(name, async () => (await fetchOnce(port, 'GET', '/v1/models')).status === 200, { proc });
  return { proc, url: `http://127.0.0.1:${port}` };
}

/** The router in front of the engines, once both are ready in it; `unavailable` when it refused --flow-control. */
async function startRouter(
  cli: string,
  dir: string,
  name: string,
  engines: readonly Engine[],
  extra: readonly string[],
): Promise<{ proc: Proc; url: string } | 'unavailable'> {
  const port = await freePort();
  const args = ['--static-backends', engines.map((e) => e.url).join(','), '--static-models', engines.map(() => MODEL).join(','), ...extra];
  const proc = startServe(cli, dir, name, port, args);
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitUntil(
      `${name}: both engines ready`,
      async () => {
        const view = JSON.parse((await fetchOnce(port, 'GET', '/engines')).text) as { endpoints: Array<{ state: string }> };
        return view.endpoints.filter((e) => e.state === 'ready').length === engines.length;
      },
      { proc, timeoutMs: 30_000 },
    );
  } catch (err) {
    await proc.stop();
    const log = readFileSync(path.join(dir, `${name}.log`), 'utf8');
    if (extra.includes('--flow-control') && /unknown flag --flow-control\b/.test(log)) return 'unavailable';
    throw new Error(`${(err as Error).message}\n${log.slice(-2_000)}`);
  }
  return { proc, url };
}

/** Both engines' running and waiting, read from their /metrics. */
async function engineLoads(engines: readonly Engine[]): Promise<Array<{ running: number; waiting: number; kvUsage: number }>> {
  return Promise.all(
    engines.map(async (e) => {
      const res = await request(`${e.url}/metrics`, { headersTimeout: 5_000, bodyTimeout: 5_000 });
      const load = parseEngineLoad(await res.body.text());
      return { running: load?.running ?? 0, waiting: load?.waiting ?? 0, kvUsage: load?.kvUsage ?? 0 };
    }),
  );
}

/** Until the engines run and hold nothing (the last run's requests are over), at most two minutes. */
async function waitIdle(engines: readonly Engine[]): Promise<void> {
  await waitUntil('engines idle', async () => (await engineLoads(engines)).every((l) => l.running === 0 && l.waiting === 0), {
    timeoutMs: 120_000,
  });
}

/** Samples the engines every 500 ms until stopped: mean and peak waiting per engine, mean KV-cache usage. */
function sampleEngines(engines: readonly Engine[]): () => Promise<NonNullable<RunFigures['engines']>> {
  const waiting: number[] = [];
  const usage: number[] = [];
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      try {
        for (const l of await engineLoads(engines)) {
          waiting.push(l.waiting);
          usage.push(l.kvUsage);
        }
      } catch {
        // a scrape that failed says nothing
      }
      await sleep(500);
    }
  })();
  return async () => {
    stopped = true;
    await loop;
    const mean = (xs: number[]): number => (xs.length > 0 ? xs.reduce((s, x) => s + x, 0) / xs.length : Number.NaN);
    return { meanWaiting: mean(waiting), maxWaiting: waiting.length > 0 ? Math.max(...waiting) : Number.NaN, meanKvUsage: mean(usage) };
  };
}

// ---- load ----

const FILLER = Array.from({ length: PROMPT_WORDS }, (_, i) => `w${i}`).join(' ');

interface Sender {
  readonly url: string;
  readonly agent: Agent;
  readonly timeoutMs: number;
  readonly t0: number;
}

/** One request of the tenant; always resolves, with how it ended. */
async function send(s: Sender, tenant: TenantLoad, n: number): Promise<Outcome> {
  const start = performance.now();
  const headers: Record<string, string> = { 'content-type': 'application/json', 'x-gateway-inference-fairness-id': tenant.name };
  if (tenant.priority !== undefined) headers['x-llm-router-priority'] = String(tenant.priority);
  const body = JSON.stringify({
    model: MODEL,
    // its own first words, so that no two prompts are alike; 200 tokens with the simulator's word-level tokenizer
    messages: [{ role: 'user', content: `${tenant.name}${n} ${FILLER}`.split(' ').slice(0, PROMPT_WORDS).join(' ') }],
    max_tokens: OUTPUT_TOKENS,
  });
  const base = { tenant: tenant.name, startMs: start - s.t0 };
  try {
    const res = await request(`${s.url}/v1/chat/completions`, {
      method: 'POST',
      headers,
      body,
      dispatcher: s.agent,
      signal: AbortSignal.timeout(s.timeoutMs),
      headersTimeout: s.timeoutMs,
      bodyTimeout: s.timeoutMs,
    });
    const text = await res.body.text();
    const ms = performance.now() - start;
    let code: string | undefined;
    if (res.statusCode !== 200) {
      try {
        const c = (JSON.parse(text) as { error?: { code?: unknown } }).error?.code;
        if (c !== undefined && c !== null) code = String(c);
      } catch {
        // not JSON: no code
      }
    }
    const retryAfter = res.headers['retry-after'];
    const seconds = typeof retryAfter === 'string' ? Number(retryAfter) : Number.NaN;
    return {
      ...base,
      ms,
      status: res.statusCode,
      ...(code !== undefined ? { code } : {}),
      retryAfter: retryAfter !== undefined,
      ...(Number.isFinite(seconds) && seconds >= 0 ? { retryAfterSeconds: seconds } : {}),
    };
  } catch (err) {
    const e = err as Error;
    return {
      ...base,
      ms: performance.now() - start,
      status: 0,
      retryAfter: false,
      failure: e.name === 'TimeoutError' ? 'no answer in time' : e.message,
    };
  }
}

/** How long a client waits after an answer other than 200: its Retry-After (at most 10 s), else 1 s. */
export function backoffMs(o: Outcome): number {
  return o.retryAfterSeconds !== undefined ? Math.min(10, o.retryAfterSeconds) * 1000 : 1_000;
}

/**
 * The tenants' traffic for `seconds`: closed-loop clients back to back (a refused one waits its Retry-After), open-loop
 * arrivals at their rate (Poisson, fixed seed) whatever the answers. Resolves once every request sent has ended.
 */
async function drive(url: string, tenants: readonly TenantLoad[], seconds: number, timeoutMs: number): Promise<Outcome[]> {
  const agent = new Agent({ keepAliveTimeout: 10_000, connect: { timeout: 5_000 } });
  const t0 = performance.now();
  const end = t0 + seconds * 1000;
  const s: Sender = { url, agent, timeoutMs, t0 };
  const outcomes: Outcome[] = [];
  const pending: Promise<void>[] = [];
  try {
    tenants.forEach((tenant, index) => {
      let n = 0;
      if (tenant.rate !== undefined) {
        const rate = tenant.rate;
        const rnd = mulberry32(1000 + index);
        pending.push(
          (async () => {
            const inFlight: Promise<void>[] = [];
            for (let at = t0; ; ) {
              at += (-Math.log(1 - rnd()) / rate) * 1000;
              if (at >= end) break;
              const wait = at - performance.now();
              if (wait > 0) await sleep(wait);
              inFlight.push(send(s, tenant, n++).then((o) => void outcomes.push(o)));
            }
            await Promise.all(inFlight);
          })(),
        );
      }
      for (let c = 0; c < (tenant.clients ?? 0); c++) {
        pending.push(
          (async () => {
            while (performance.now() < end) {
              const o = await send(s, tenant, n++);
              outcomes.push(o);
              if (o.status !== 200) {
                const wait = Math.min(backoffMs(o), end - performance.now());
                if (wait > 0) await sleep(wait);
              }
            }
          })(),
        );
      }
    });
    await Promise.all(pending);
  } finally {
    await agent.close();
  }
  return outcomes;
}

// ---- the run ----

interface Context {
  readonly cli: string;
  readonly dir: string;
  readonly engines: readonly Engine[];
  readonly o: FlowOptions;
  readonly log: (line: string) => void;
}

let routerCount = 0;

/** One scenario with one configuration, through a fresh router; undefined figures when flow control is unavailable. */
async function runConfig(ctx: Context, spec: ScenarioSpec, config: 'without' | 'with'): Promise<RunFigures> {
  const { o, engines } = ctx;
  const extra = config === 'with' ? [...o.routerArgs, '--flow-control', ...o.flowArgs] : [...o.routerArgs];
  const started = await startRouter(ctx.cli, ctx.dir, `router-${++routerCount}-${spec.name}-${config}`, engines, extra);
  if (started === 'unavailable') return { config, available: false, seconds: o.seconds, tenants: [] };
  const timeoutMs = o.requestTimeoutSeconds * 1000;
  try {
    let unloaded: Record<string, Unloaded> | undefined;
    if (spec.unloadedClients !== undefined) {
      unloaded = {};
      for (const t of spec.tenants) {
        const alone: TenantLoad = { ...t, ...(t.clients !== undefined ? { clients: Math.min(t.clients, spec.unloadedClients) } : {}) };
        const outcomes = await drive(started.url, [alone], o.unloadedSeconds, timeoutMs);
        const f = tenantFigures(t.name, outcomes, o.unloadedSeconds);
        unloaded[t.name] = { p50Ms: f.p50Ms, p90Ms: f.p90Ms };
        ctx.log(
          `${spec.name} ${config}: ${t.name} alone (${alone.clients ?? `${alone.rate}/s`}): p50 ${Math.round(f.p50Ms)} ms, p90 ${Math.round(f.p90Ms)} ms`,
        );
        await waitIdle(engines);
      }
    }
    const stopSampling = sampleEngines(engines);
    const outcomes = await drive(started.url, spec.tenants, o.seconds, timeoutMs);
    const engineView = await stopSampling();
    const tenants = spec.tenants.map((t) => tenantFigures(t.name, outcomes, o.seconds));
    for (const f of tenants)
      ctx.log(
        `${spec.name} ${config}: ${f.tenant} ${f.answered}/${f.requests} 200s, p50 ${Math.round(f.p50Ms)} ms, p90 ${Math.round(f.p90Ms)} ms`,
      );
    const equal = spec.equal;
    return {
      config,
      available: true,
      seconds: o.seconds,
      tenants,
      ...(unloaded ? { unloaded } : {}),
      ...(equal ? { jain: jainIndex(equal.map((name) => tenants.find((f) => f.tenant === name)?.answered ?? 0)) } : {}),
      engines: engineView,
    };
  } finally {
    await started.proc.stop();
    await waitIdle(engines);
  }
}

export async function runFlow(o: FlowOptions, env: { cli: string; dir: string }, log: (line: string) => void): Promise<FlowBenchResult> {
  const engines: Engine[] = [];
  try {
    for (let i = 0; i < ENGINES; i++) engines.push(await startEngine(env.cli, env.dir, `flow-sim-${i}`));
    const ctx: Context = { ...env, engines, o, log };
    let available = true;
    const scenarios: Array<{ spec: ScenarioSpec; runs: RunFigures[] }> = [];
    for (const name of o.scenarios) {
      const spec = SCENARIOS.find((s) => s.name === name) as ScenarioSpec;
      log(`${spec.name}: ${spec.title}, ${o.seconds} s without flow control`);
      const runs: RunFigures[] = [await runConfig(ctx, spec, 'without')];
      if (available) {
        log(`${spec.name}: ${o.seconds} s with --flow-control`);
        const withRun = await runConfig(ctx, spec, 'with');
        if (!withRun.available) {
          available = false;
          log(NOT_AVAILABLE);
        }
        runs.push(withRun);
      } else runs.push({ config: 'with', available: false, seconds: o.seconds, tenants: [] });
      scenarios.push({ spec, runs });
    }
    const doneWhen = scenarios.find((s) => s.spec.name === 'done-when');
    return {
      options: o,
      engines: { count: ENGINES, flags: ENGINE_FLAGS, promptTokens: PROMPT_WORDS },
      flowControlAvailable: available,
      scenarios,
      doneWhen: (['without', 'with'] as const).map((config) => {
        const run = doneWhen?.runs.find((r) => r.config === config && r.available);
        return { config, checks: run ? doneWhenChecks(run.tenants, run.unloaded ?? {}) : undefined };
      }),
    };
  } finally {
    await Promise.all(engines.map((e) => e.proc.stop()));
  }
}

export function renderFlow(r: FlowBenchResult): string {
  const lines = [
    `## Flow control (bench/flow.ts): ${r.engines.count} engines (${r.engines.flags.join(' ')}), ${r.engines.promptTokens}-token prompts, ${r.options.seconds} s per scenario`,
    '',
  ];
  if (!r.flowControlAvailable) lines.push(`Note: ${NOT_AVAILABLE}; only the "without" half ran.`, '');
  for (const s of r.scenarios) lines.push(renderScenario(s.spec, s.runs), '');
  if (r.doneWhen.some((c) => c.checks)) lines.push(renderChecks(r.doneWhen));
  return lines.join('\n');
}

// ---- command line ----

async function main(): Promise<void> {
  const o = parseFlowArgs(process.argv.slice(2));
  const cli = process.env.BENCH_ROUTER_CLI ?? path.join(root, 'dist', 'cli', 'main.js');
  const dir = mkdtempSync(path.join(os.tmpdir(), 'llm-router-flow-'));
  const stop = (): void => {
    killAllNow();
    process.exit(130);
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  const result = await runFlow(o, { cli, dir }, (line) => process.stderr.write(`[flow] ${line}\n`));
  process.stdout.write(`\n${renderFlow(result)}\n`);
  if (o.json) writeFileSync(o.json, JSON.stringify(result, null, 2) + '\n');
  rmSync(dir, { recursive: true, force: true });
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main()
    .catch((err: unknown) => {
      process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
      process.exitCode = 1;
    })
    .finally(() => stopAll());
}
