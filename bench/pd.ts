// P/D: what the router adds when it serves a model through a prefill and a decode engine, and time to first token of
// P/D against aggregated serving, on simulated engines (`npm run bench -- --only pd`).
//
// Added latency: JSON requests, one at a time, on engines that answer at once; the four paths take turns request by
// request. The direct P/D path is the same two calls (prefill, then decode with its kv_transfer_params) made by the
// client itself; the router's added latency is (through the router) - (direct) per round, for P/D and for a plain
// aggregated request, then the median over rounds. Their difference is what the prefill hop costs the router.
//
// TTFT and ITL: streams with a prompt whose prefill is costly on the simulator (--prefill-ms-per-token); aggregated
// serving on two whole-request engines against one prefill and one decode engine, at 1 and at 8 concurrent clients.
// Every engine runs with --prefill-stalls-decode (one compute lane, as without chunked prefill): prefills queue behind
// each other, and a stream's next token waits while its engine prefills another prompt. That is the interference P/D
// removes from decode, so the inter-token gaps of the streams show what P/D buys and the TTFT what it costs.
import http from 'node:http';
import path from 'node:path';
import { freePort, postTimed, startProc, startServe, waitUntil, fetchOnce, type Proc } from './procs.js';
import { NIXL_PREFILL_PARAMS } from '../src/tools/sim/pd-checks.js';
import { median, type Row } from './report.js';

export interface PdBenchResult {
  /** p50 ms of one request, per path, medians over rounds */
  readonly latency: {
    readonly directAggregated: number;
    readonly routerAggregated: number;
    readonly directPd: number;
    readonly routerPd: number;
  };
  /** router p50 - direct p50 in the same round, ms, median over rounds */
  readonly addedAggregatedMs: number;
  readonly addedPdMs: number;
  /** what the prefill hop adds: addedPd - addedAggregated */
  readonly prefillHopMs: number;
  /** time to first token and inter-token gaps of the streams, ms, per concurrency */
  readonly streams: readonly { readonly concurrency: number; readonly aggregated: StreamStats; readonly pd: StreamStats }[];
  readonly promptTokens: number;
  readonly prefillMsPerToken: number;
}

interface Stats {
  readonly p50: number;
  readonly p90: number;
}

interface StreamStats extends Stats {
  /** gaps between a stream's consecutive tokens, every stream's pooled, ms */
  readonly itl: { readonly p50: number; readonly p99: number; readonly max: number };
}

const MODEL = 'pd-bench';

const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

/** One POST on a kept-alive connection, with its time to first body byte and when each SSE event arrived. */
async function post(
  port: number,
  body: string,
): Promise<{ status: number; text: string; firstByteMs: number; eventsAt: readonly number[] }> {
  const started = Date.now();
  const r = await postTimed(port, body, { agent });
  return { status: r.status, text: r.text, firstByteMs: r.firstDataAt - started, eventsAt: r.eventsAt };
}

/** A chat stream's events are the role chunk, then one per token, then [DONE]: the gaps between its tokens. */
function tokenGaps(eventsAt: readonly number[]): number[] {
  const tokens = eventsAt.slice(1, -1);
  return tokens.slice(1).map((t, i) => t - (tokens[i] as number));
}

function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}

async function startSim(cli: string, dir: string, name: string, args: readonly string[]): Promise<{ proc: Proc; port: number }> {
  const port = await freePort();
  const proc = startProc(
    name,
    process.execPath,
    [cli, 'sim', '--port', String(port), '--model', MODEL, '--id', name, ...args],
    path.join(dir, `${name}.log`),
  );
  await waitUntil(name, async () => (await fetchOnce(port, 'GET', '/v1/models')).status === 200, { proc });
  return { proc, port };
}

async function startRouter(
  cli: string,
  dir: string,
  name: string,
  backends: readonly { port: number; role: string }[],
): Promise<{ proc: Proc; port: number }> {
  const port = await freePort();
  const proc = startServe(cli, dir, name, port, [
    '--static-backends',
    backends.map((b) => `http://127.0.0.1:${b.port}`).join(','),
    '--static-models',
    backends.map(() => MODEL).join(','),
    '--static-backend-roles',
    backends.map((b) => b.role).join(','),
  ]);
  await waitUntil(name, async () => /"status":"ready"/.test((await fetchOnce(port, 'GET', '/v1/models')).text), { proc });
  return { proc, port };
}

/** The client doing P/D itself: the prefill call, then the decode call with the prefill's kv_transfer_params. */
async function directPd(prefill: number, decode: number, request: Record<string, unknown>): Promise<void> {
  const p = await post(prefill, JSON.stringify({ ...request, kv_transfer_params: NIXL_PREFILL_PARAMS, stream: false, max_tokens: 1 }));
  const params = (JSON.parse(p.text) as { kv_transfer_params: unknown }).kv_transfer_params;
  const d = await post(decode, JSON.stringify({ ...request, kv_transfer_params: params }));
  if (p.status !== 200 || d.status !== 200) throw new Error(`direct P/D answered ${p.status}, ${d.status}`);
}

/** Runs the paths one request each in turn (rotating the order), `n` times: the p50 ms of each. */
async function interleavedP50(n: number, paths: Record<string, () => Promise<void>>): Promise<Record<string, number>> {
  const names = Object.keys(paths);
  const ms: Record<string, number[]> = Object.fromEntries(names.map((k) => [k, []]));
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < names.length; j++) {
      const name = names[(i + j) % names.length] as string;
      const t0 = performance.now();
      await (paths[name] as () => Promise<void>)();
      ms[name]?.push(performance.now() - t0);
    }
  }
  return Object.fromEntries(names.map((k) => [k, median(ms[k] ?? [])]));
}

async function addedLatency(
  cli: string,
  dir: string,
  o: { requests: number; rounds: number },
  log: (l: string) => void,
): Promise<PdBenchResult['latency'] & Pick<PdBenchResult, 'addedAggregatedMs' | 'addedPdMs'>> {
  const fast = ['--ttft-ms', '0', '--itl-ms', '0', '--output-tokens', '4'];
  const prefill = await startSim(cli, dir, 'lat-prefill', [...fast, '--role', 'prefill']);
  const decode = await startSim(cli, dir, 'lat-decode', [...fast, '--role', 'decode']);
  const whole = await startSim(cli, dir, 'lat-both', fast);
  const router = await startRouter(cli, dir, 'router-pd-latency', [
    { port: prefill.port, role: 'prefill' },
    { port: decode.port, role: 'decode' },
  ]);
  const aggregated = await startRouter(cli, dir, 'router-aggregated-latency', [{ port: whole.port, role: 'both' }]);
  const request = { model: MODEL, messages: [{ role: 'user', content: 'Hello there, how are you?' }], max_tokens: 4 };
  const body = JSON.stringify(request);
  const ok = async (port: number): Promise<void> => {
    const r = await post(port, body);
    if (r.status !== 200) throw new Error(`answered ${r.status}: ${r.text}`);
  };
  const paths: Record<string, () => Promise<void>> = {
    directAggregated: () => ok(whole.port),
    routerAggregated: () => ok(aggregated.port),
    directPd: () => directPd(prefill.port, decode.port, request),
    routerPd: () => ok(router.port),
  };
  const rounds: Record<string, number>[] = [];
  try {
    await interleavedP50(50, paths); // warm-up: JIT, connections
    for (let round = 0; round < o.rounds; round++) {
      const p50 = await interleavedP50(o.requests, paths);
      rounds.push(p50);
      log(
        `pd latency round ${round + 1}/${o.rounds}: ${Object.entries(p50)
          .map(([k, v]) => `${k} ${v.toFixed(3)} ms`)
          .join(', ')}`,
      );
    }
  } finally {
    await Promise.all([router, aggregated, prefill, decode, whole].map((x) => x.proc.stop()));
  }
  const m = (k: string): number => median(rounds.map((r) => r[k] as number));
  return {
    directAggregated: m('directAggregated'),
    routerAggregated: m('routerAggregated'),
    directPd: m('directPd'),
    routerPd: m('routerPd'),
    addedAggregatedMs: median(rounds.map((r) => (r.routerAggregated as number) - (r.directAggregated as number))),
    addedPdMs: median(rounds.map((r) => (r.routerPd as number) - (r.directPd as number))),
  };
}

/** A prompt of `tokens` simulator tokens, different per request (nothing comes from a prefix cache). */
function prompt(i: number, tokens: number): string {
  return `request ${i} ${'word '.repeat(tokens - 2)}`;
}

async function streamsAt(port: number, concurrency: number, requests: number, tokens: number): Promise<StreamStats> {
  const ttfts: number[] = [];
  const gaps: number[] = [];
  let next = 0;
  const client = async (): Promise<void> => {
    while (next < requests) {
      const i = next++;
      const r = await post(
        port,
        JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: prompt(i, tokens) }], max_tokens: 16, stream: true }),
      );
      if (r.status !== 200 || !r.text.includes('[DONE]')) throw new Error(`stream ${i} answered ${r.status}`);
      ttfts.push(r.firstByteMs);
      gaps.push(...tokenGaps(r.eventsAt));
    }
  };
  await Promise.all(Array.from({ length: concurrency }, client));
  return {
    p50: percentile(ttfts, 50),
    p90: percentile(ttfts, 90),
    itl: { p50: percentile(gaps, 50), p99: percentile(gaps, 99), max: Math.max(...gaps) },
  };
}

async function streams(
  cli: string,
  dir: string,
  o: { promptTokens: number; prefillMsPerToken: number; levels: readonly { concurrency: number; requests: number }[] },
  log: (l: string) => void,
): Promise<PdBenchResult['streams']> {
  const engine = [
    '--ttft-ms',
    '20',
    '--itl-ms',
    '10',
    '--output-tokens',
    '16',
    '--prefill-ms-per-token',
    String(o.prefillMsPerToken),
    '--prefix-cache-blocks',
    '0',
    '--max-num-seqs',
    '4',
    '--prefill-stalls-decode',
  ];
  const sims = await Promise.all([
    startSim(cli, dir, 'ttft-prefill', [...engine, '--role', 'prefill']),
    startSim(cli, dir, 'ttft-decode', [...engine, '--role', 'decode']),
    startSim(cli, dir, 'ttft-both-1', engine),
    startSim(cli, dir, 'ttft-both-2', engine),
  ]);
  const [prefill, decode, both1, both2] = sims as [
    (typeof sims)[number],
    (typeof sims)[number],
    (typeof sims)[number],
    (typeof sims)[number],
  ];
  const pd = await startRouter(cli, dir, 'router-pd-ttft', [
    { port: prefill.port, role: 'prefill' },
    { port: decode.port, role: 'decode' },
  ]);
  const aggregated = await startRouter(cli, dir, 'router-aggregated-ttft', [
    { port: both1.port, role: 'both' },
    { port: both2.port, role: 'both' },
  ]);
  const out: { concurrency: number; aggregated: StreamStats; pd: StreamStats }[] = [];
  try {
    for (const level of o.levels) {
      const a = await streamsAt(aggregated.port, level.concurrency, level.requests, o.promptTokens);
      const p = await streamsAt(pd.port, level.concurrency, level.requests, o.promptTokens);
      log(
        `pd at ${level.concurrency} concurrent: TTFT p50 aggregated ${a.p50.toFixed(1)} ms, P/D ${p.p50.toFixed(1)} ms; ` +
          `ITL p99 aggregated ${a.itl.p99.toFixed(1)} ms, P/D ${p.itl.p99.toFixed(1)} ms`,
      );
      out.push({ concurrency: level.concurrency, aggregated: a, pd: p });
    }
  } finally {
    await Promise.all([pd, aggregated, ...sims].map((x) => x.proc.stop()));
  }
  return out;
}

/** The benchmark table's P/D rows. */
export function pdRows(r: PdBenchResult): Row[] {
  const lat = 'P/D: one JSON request at a time, engines answering at once';
  const rows: Row[] = [
    {
      scenario: lat,
      metric: 'aggregated p50 ms',
      direct: r.latency.directAggregated,
      router: r.latency.routerAggregated,
      ratios: true,
      digits: 3,
    },
    {
      scenario: lat,
      metric: 'P/D p50 ms (direct: the client makes both calls)',
      direct: r.latency.directPd,
      router: r.latency.routerPd,
      ratios: true,
      digits: 3,
    },
    { scenario: lat, metric: 'router-added p50 ms, aggregated', router: r.addedAggregatedMs, digits: 3 },
    { scenario: lat, metric: 'router-added p50 ms, P/D', router: r.addedPdMs, digits: 3 },
    {
      scenario: lat,
      metric: 'the prefill hop: added P/D - added aggregated, ms',
      router: r.prefillHopMs,
      digits: 3,
      target: '<= 0.25 ms',
      met: r.prefillHopMs <= 0.25,
    },
  ];
  for (const t of r.streams) {
    const scenario = `TTFT, ${t.concurrency} concurrent, ${r.promptTokens}-token prompts at ${r.prefillMsPerToken} ms/token (sim)`;
    rows.push({ scenario, metric: 'aggregated (2 engines) p50 ms', router: t.aggregated.p50, digits: 1 });
    rows.push({ scenario, metric: 'aggregated (2 engines) p90 ms', router: t.aggregated.p90, digits: 1 });
    rows.push({ scenario, metric: 'P/D (1 prefill + 1 decode) p50 ms', router: t.pd.p50, digits: 1 });
    rows.push({ scenario, metric: 'P/D (1 prefill + 1 decode) p90 ms', router: t.pd.p90, digits: 1 });
    const itl = `ITL (gaps between a stream's tokens, 10 ms on an idle engine), ${t.concurrency} concurrent, same streams (sim)`;
    for (const [name, s] of [
      ['aggregated (2 engines)', t.aggregated],
      ['P/D (1 prefill + 1 decode)', t.pd],
    ] as const) {
      rows.push({ scenario: itl, metric: `${name} p50 ms`, router: s.itl.p50, digits: 1 });
      rows.push({ scenario: itl, metric: `${name} p99 ms`, router: s.itl.p99, digits: 1 });
      rows.push({ scenario: itl, metric: `${name} max ms`, router: s.itl.max, digits: 1 });
    }
  }
  return rows;
}

export async function runPd(opts: { cli: string; dir: string; quick: boolean }, log: (line: string) => void): Promise<PdBenchResult> {
  const latency = await addedLatency(opts.cli, opts.dir, { requests: opts.quick ? 200 : 1_000, rounds: opts.quick ? 2 : 3 }, log);
  const promptTokens = 500;
  const prefillMsPerToken = 0.2;
  const levels = opts.quick
    ? [
        { concurrency: 1, requests: 10 },
        { concurrency: 8, requests: 32 },
      ]
    : [
        { concurrency: 1, requests: 30 },
        { concurrency: 8, requests: 96 },
      ];
  const t = await streams(opts.cli, opts.dir, { promptTokens, prefillMsPerToken, levels }, log);
  const { addedAggregatedMs, addedPdMs, ...p50 } = latency;
  return {
    latency: p50,
    addedAggregatedMs,
    addedPdMs,
    prefillHopMs: addedPdMs - addedAggregatedMs,
    streams: t,
    promptTokens,
    prefillMsPerToken,
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { mkdtempSync } = await import('node:fs');
  const os = await import('node:os');
  const cli = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', 'dist', 'cli', 'main.js');
  const r = await runPd({ cli, dir: mkdtempSync(path.join(os.tmpdir(), 'pd-bench-')), quick: process.argv.includes('--quick') }, (l) =>
    process.stderr.write(`[pd] ${l}\n`),
  );
  process.stdout.write(`${JSON.stringify(r, null, 2)}\n`);
  agent.destroy();
  process.exit(0);
}
