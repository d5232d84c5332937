// What OpenTelemetry tracing costs the router (`npm run bench -- --only tracing`): two routers in front of one
// simulated engine that answers at once, one without tracing and one tracing every request (100 % sampled: no sampler
// set, the client sends no traceparent) to an OTLP/gRPC receiver in this process (test/support/otlp-receiver.ts).
//
// Added p50: JSON requests one at a time, the two routers taking turns request by request; p50 per router per round,
// the difference per round, the median over rounds. Added CPU: a closed loop of concurrent clients against one router
// at a time for a few seconds; the router process's CPU seconds (/proc) per request answered; the difference per
// round, the median over rounds. The receiver's spans and the router's drop counter say whether every span got out.
import http from 'node:http';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { startOtlpReceiver } from '../test/support/otlp-receiver.js';
import { fetchOnce, freePort, postTimed, startProc, usageOf, waitUntil, type Proc } from './procs.js';
import { median, type Row } from './report.js';

export interface TracingBenchResult {
  /** p50 ms of one request, off and on, medians over rounds */
  readonly p50OffMs: number;
  readonly p50OnMs: number;
  /** on - off per round, median */
  readonly addedP50Ms: number;
  /** router CPU µs per request under load, off and on, medians over rounds */
  readonly cpuOffUs: number;
  readonly cpuOnUs: number;
  readonly addedCpuUs: number;
  /** requests per second under load, off and on, medians */
  readonly rpsOff: number;
  readonly rpsOn: number;
  /** spans the receiver got, and spans the router counted as dropped */
  readonly spansReceived: number;
  readonly spansDropped: number;
  readonly requestsTraced: number;
  readonly concurrency: number;
}

const MODEL = 'trace-bench';
const BODY = JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'Hello there' }], max_tokens: 1 });

function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}

async function startRouter(
  cli: string,
  dir: string,
  name: string,
  sim: number,
  extra: readonly string[],
): Promise<{ proc: Proc; port: number }> {
  const port = await freePort();
  const proc = startProc(
    name,
    process.execPath,
    [
      cli,
      'serve',
      '--host',
      '127.0.0.1',
      '--port',
      String(port),
      '--log-level',
      'warn',
      '--drain-seconds',
      '0',
      '--static-backends',
      `http://127.0.0.1:${sim}`,
      '--static-models',
      MODEL,
      ...extra,
    ],
    path.join(dir, `${name}.log`),
  );
  await waitUntil(`${name} ready`, async () => (await fetchOnce(port, 'GET', '/ready')).status === 200, { proc, timeoutMs: 30_000 });
  return { proc, port };
}

/** A closed loop of `concurrency` clients for `seconds`: requests answered, and the router's CPU seconds meanwhile. */
async function load(port: number, pid: number, concurrency: number, seconds: number): Promise<{ requests: number; cpuSeconds: number }> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  const until = Date.now() + seconds * 1000;
  let requests = 0;
  const before = usageOf(pid).cpuSeconds;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (Date.now() < until) {
        const r = await postTimed(port, BODY, { agent });
        if (r.status !== 200) throw new Error(`the router answered ${r.status}`);
        requests++;
      }
    }),
  );
  const cpuSeconds = usageOf(pid).cpuSeconds - before;
  agent.destroy();
  return { requests, cpuSeconds };
}

async function droppedSpans(port: number): Promise<number> {
  const text = (await fetchOnce(port, 'GET', '/metrics')).text;
  let n = 0;
  for (const m of text.matchAll(/^llm_router_otel_spans_dropped_total\{[^}]*\} (\S+)$/gm)) n += Number(m[1]);
  return n;
}

export async function runTracing(
  opts: { cli: string; dir: string; quick: boolean },
  log: (line: string) => void,
): Promise<TracingBenchResult> {
  const rounds = opts.quick ? 3 : 5;
  const sequential = opts.quick ? 300 : 1000;
  const loadSeconds = opts.quick ? 3 : 5;
  const concurrency = 8;
  const receiver = await startOtlpReceiver();
  const simPort = await freePort();
  const sim = startProc(
    'trace-sim',
    process.execPath,
    [opts.cli, 'sim', '--port', String(simPort), '--model', MODEL, '--ttft-ms', '0', '--itl-ms', '0', '--output-tokens', '1'],
    path.join(opts.dir, 'trace-sim.log'),
  );
  try {
    await waitUntil('simulator', async () => (await fetchOnce(simPort, 'GET', '/v1/models')).status === 200, { proc: sim });
    const off = await startRouter(opts.cli, opts.dir, 'router-trace-off', simPort, []);
    const on = await startRouter(opts.cli, opts.dir, 'router-trace-on', simPort, ['--otel-endpoint', receiver.address]);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    // warm both up (JIT, connections)
    for (let i = 0; i < 200; i++) {
      await postTimed(off.port, BODY, { agent });
      await postTimed(on.port, BODY, { agent });
    }
    const p50Off: number[] = [];
    const p50On: number[] = [];
    const added: number[] = [];
    let traced = 200;
    for (let r = 0; r < rounds; r++) {
      const a: number[] = [];
      const b: number[] = [];
      for (let i = 0; i < sequential; i++) {
        for (const [port, into] of [
          [off.port, a],
          [on.port, b],
        ] as const) {
          const t0 = process.hrtime.bigint();
          const res = await postTimed(port, BODY, { agent });
          if (res.status !== 200) throw new Error(`the router answered ${res.status}`);
          into.push(Number(process.hrtime.bigint() - t0) / 1e6);
        }
      }
      traced += sequential;
      p50Off.push(percentile(a, 50));
      p50On.push(percentile(b, 50));
      added.push(percentile(b, 50) - percentile(a, 50));
      log(`  tracing round ${r + 1}: p50 off ${percentile(a, 50).toFixed(3)} ms, on ${percentile(b, 50).toFixed(3)} ms`);
    }
    agent.destroy();
    const cpuOff: number[] = [];
    const cpuOn: number[] = [];
    const cpuAdded: number[] = [];
    const rpsOff: number[] = [];
    const rpsOn: number[] = [];
    for (let r = 0; r < rounds; r++) {
      const x = await load(off.port, off.proc.pid, concurrency, loadSeconds);
      const y = await load(on.port, on.proc.pid, concurrency, loadSeconds);
      traced += y.requests;
      const usOff = (x.cpuSeconds / x.requests) * 1e6;
      const usOn = (y.cpuSeconds / y.requests) * 1e6;
      cpuOff.push(usOff);
      cpuOn.push(usOn);
      cpuAdded.push(usOn - usOff);
      rpsOff.push(x.requests / loadSeconds);
      rpsOn.push(y.requests / loadSeconds);
      log(`  tracing load round ${r + 1}: CPU off ${usOff.toFixed(1)} µs/request, on ${usOn.toFixed(1)} µs/request`);
    }
    // the last batches go out within the schedule delay (1 s)
    await sleep(2_000);
    const spansDropped = await droppedSpans(on.port);
    await off.proc.stop();
    await on.proc.stop();
    return {
      p50OffMs: median(p50Off),
      p50OnMs: median(p50On),
      addedP50Ms: median(added),
      cpuOffUs: median(cpuOff),
      cpuOnUs: median(cpuOn),
      addedCpuUs: median(cpuAdded),
      rpsOff: median(rpsOff),
      rpsOn: median(rpsOn),
      spansReceived: receiver.spans.length,
      spansDropped,
      requestsTraced: traced,
      concurrency,
    };
  } finally {
    await sim.stop();
    await receiver.stop();
  }
}

export function tracingRows(r: TracingBenchResult): Row[] {
  const one = 'tracing, one request at a time (bench/tracing.ts)';
  const loaded = `tracing, ${r.concurrency} concurrent clients (bench/tracing.ts)`;
  return [
    { scenario: one, metric: 'p50 ms, tracing off', router: r.p50OffMs, digits: 3 },
    { scenario: one, metric: 'p50 ms, tracing on (100 % sampled)', router: r.p50OnMs, digits: 3 },
    { scenario: one, metric: 'added p50 ms', router: r.addedP50Ms, digits: 3 },
    { scenario: loaded, metric: 'router CPU µs/request, tracing off', router: r.cpuOffUs, digits: 1 },
    { scenario: loaded, metric: 'router CPU µs/request, tracing on', router: r.cpuOnUs, digits: 1 },
    { scenario: loaded, metric: 'added CPU µs/request', router: r.addedCpuUs, digits: 1 },
    { scenario: loaded, metric: 'requests/s, tracing off', router: r.rpsOff, digits: 0 },
    { scenario: loaded, metric: 'requests/s, tracing on', router: r.rpsOn, digits: 0 },
    { scenario: loaded, metric: `spans received (of ${r.requestsTraced} requests traced)`, router: r.spansReceived, digits: 0 },
    { scenario: loaded, metric: 'spans dropped (llm_router_otel_spans_dropped_total)', router: r.spansDropped, digits: 0 },
  ];
}
