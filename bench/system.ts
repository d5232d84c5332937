// System soak (`npm run bench -- --only system [--seconds S | --quick] [--rate R] [--max-retries N]`): the whole
// deployment on loopback for several minutes while it is disturbed the way production disturbs it, with every client
// request accounted for and the two autoscaling signals (Prometheus and the KEDA external scaler) checked against what
// the clients really did.
//
// What runs: two router replicas (`--workers 2`, KEDA scaler on, each the other's `--scaler-peers`), four simulators
// (two for MODEL_A, two for MODEL_B), MODEL_C declared with `--known-models` and a static backend whose simulator is not
// running at first (scaled to zero), a real Prometheus scraping both replicas' /metrics every second, and a KEDA gRPC
// client polling GetMetrics and IsActive on each replica every 500 ms. Clients send at a fixed rate, streaming and not,
// retry as the OpenAI SDK does, and some leave at every stage; they reach the replicas as through a Kubernetes Service
// (round robin over the replicas whose /ready answered 200 at the last check, every second). Faults, in order over the
// run: MODEL_C woken (its simulator started), a router worker SIGKILLed, an engine restarted, MODEL_C scaled to zero
// (its simulator stopped), a rolling restart of both replicas and a worker of the other replica SIGKILLed while its
// requests are held, MODEL_C woken again, an engine SIGKILLed in the middle of its streams (and started again). The
// replicas run with --migration-limit (SystemOptions.migrationLimit): streams cut by an engine are continued elsewhere.
// Streams are also checked whole: the content of one uninterrupted generation, one [DONE], no error event (intact).
//
// How each client request ends (docs/benchmarks.md, "System soak", says the same):
// - answered: an HTTP answer read to its end: 200 with a whole body (a stream up to `data: [DONE]`) = ok; an error
//   status with an OpenAI error body, or a stream that ends with an error event = error answer;
// - answered with a transport error: the connection was refused, reset, or closed in the middle of the response's
//   framing (so the HTTP client raised an error): the client knows it failed;
// - left: the client disconnected on purpose (before sending the whole body, before the head, after the head, mid-stream);
// - lost: the response ended cleanly by its framing but is not an answer: a 200 stream with neither `[DONE]` nor an
//   error event, a 200 body that is not whole JSON, an error status without an error body (classify() in soak.ts);
// - hung: no end within the attempt deadline (the request is then aborted and not retried).
// Only the last attempt of a retried request decides its outcome; every attempt counts as sent to a router.
import http from 'node:http';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { kedaClient, type KedaClient } from '../test/support/keda.js';
import { freePort as fixedPort, stopAll as stopTestProcesses } from '../test/support/process.js';
import { startPrometheus, type Prometheus } from '../test/support/prometheus.js';
import { fetchOnce, processTree, startProc, waitUntil, type Proc } from './procs.js';
import { classify, streamIntact } from './soak.js';
import { fillerText } from '../src/tools/sim/tokens.js';

const MODEL_A = 'sys-a';
const MODEL_B = 'sys-b';
const MODEL_C = 'sys-cold';
const MODELS = [MODEL_A, MODEL_B, MODEL_C] as const;
/** a held request counts as visible only if it was sent this long before the KEDA call began (answers may be 250 ms old) */
const VISIBILITY_MARGIN_MS = 1_000;
const COLD_START_WAIT_S = 20;
const RATE_WINDOW_S = 30;

export interface SystemOptions {
  readonly cli: string;
  readonly dir: string;
  readonly seconds: number;
  /** new client requests per second, all models */
  readonly rate: number;
  /** retries per request after the first attempt (the OpenAI SDK's default is 2) */
  readonly maxRetries: number;
  /** an attempt with no end after this long is hung */
  readonly attemptDeadlineMs: number;
  /** the replicas' --migration-limit (0: off) */
  readonly migrationLimit: number;
}

export interface SystemResult {
  readonly seconds: number;
  readonly rate: number;
  readonly maxRetries: number;
  /** client requests started, and HTTP attempts made (retries included) */
  readonly sent: number;
  readonly attempts: number;
  readonly retries: number;
  /** final outcome label -> requests */
  readonly outcomes: Record<string, number>;
  /** every attempt by how it ended: HTTP status, transport error, left, hung */
  readonly attemptEnds: Record<string, number>;
  readonly firstErrors: string[];
  readonly ok: number;
  readonly errorAnswers: number;
  readonly transportErrors: number;
  readonly left: number;
  readonly lost: number;
  readonly hung: number;
  readonly faults: { at: number; what: string; ms: number }[];
  readonly demand: {
    model: string;
    /** largest sum over replicas of rate(llm_router_model_demand_total[30s]), per second */
    promMax: number;
    /** largest 30 s window of attempts the clients delivered to a router, per second */
    clientMax: number;
    ratio: number;
  }[];
  readonly maxDemandRatio: number;
  readonly resets: { metric: string; instance: string; series: string; resets: number; restarts: number }[];
  readonly unexpectedResets: number;
  /** increase of llm_router_ipc_gather_missed_total over the run, by topic, both replicas */
  readonly gatherMissed: Record<string, number>;
  readonly keda: {
    polls: number;
    pollErrors: number;
    /** polls during which at least one held request of MODEL_C was known */
    pollsWithHeld: number;
    /** the most held requests known at one poll, and the largest GetMetrics answer among those polls */
    maxHeld: number;
    maxMetric: number;
    /** each replica's last GetMetrics answer, 2 s after every client request had ended (0 expected) */
    afterLoad: number[];
    /** polls with GetMetrics 0 while a request sent before its engine stopped was unanswered (not a held request) */
    pendingInvisibleCount: number;
    pendingInvisible: string[];
    /** of those, polls whose GetMetrics was < 1 or IsActive false */
    invisible: number;
    /** of those, polls whose GetMetrics was below the number of known held requests */
    undercounted: number;
    firstInvisible: string[];
  };
  readonly passed: { lost: boolean; hung: boolean; demand: boolean; keda: boolean };
  readonly migrationLimit: number;
  /** streaming requests whose client did not leave, and those whose last attempt arrived intact (streamIntact) */
  readonly streams: number;
  readonly intact: number;
}

/** Every request's max_tokens; the simulators generate their filler text, so a whole stream's content is known. */
const TOKENS = 16;
const EXPECTED = fillerText(TOKENS);

interface Sim {
  readonly name: string;
  readonly model: string;
  readonly port: number;
  proc?: Proc;
}

interface Replica {
  readonly index: number;
  readonly port: number;
  readonly adminPort: number;
  readonly kedaPort: number;
  proc?: Proc;
  restarts: number;
  generation: number;
  /** when its current process was started */
  startedAt: number;
}

interface Attempt {
  readonly model: string;
  readonly replica: number;
  readonly sentAt: number;
  /** the whole body was written on a connected socket */
  deliveredAt?: number;
  headAt?: number;
  endAt?: number;
  /** how it ended (as in attemptEnds) */
  how?: string;
}

type AttemptEnd =
  | {
      kind: 'answer';
      label: string;
      status: number;
      retryAfterMs: number | undefined;
      shouldRetry: string | undefined;
      /** a stream: it arrived intact */
      intact?: boolean;
    }
  | { kind: 'transport'; label: string; beforeHead: boolean }
  | { kind: 'left'; label: string }
  | { kind: 'hung'; label: string };

type Leave = 'none' | 'before-body' | 'before-head' | 'after-head' | 'mid-stream';

function count(m: Record<string, number>, k: string, n = 1): void {
  m[k] = (m[k] ?? 0) + n;
}

/** The OpenAI SDK's wait before a retry: retry-after-ms, else Retry-After (seconds or a date) if under 60 s, else backoff. */
function retryDelayMs(retryAfterMs: number | undefined, retriesDone: number): number {
  if (retryAfterMs !== undefined && retryAfterMs > 0 && retryAfterMs < 60_000) return retryAfterMs;
  const seconds = Math.min(0.5 * 2 ** retriesDone, 8);
  return seconds * (1 - Math.random() * 0.25) * 1000;
}

function retryAfterOf(headers: http.IncomingHttpHeaders): number | undefined {
  const ms = Number(headers['retry-after-ms']);
  if (headers['retry-after-ms'] !== undefined && Number.isFinite(ms)) return ms;
  const value = headers['retry-after'];
  if (value === undefined) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return seconds * 1000;
  const date = Date.parse(String(value));
  return Number.isNaN(date) ? undefined : date - Date.now();
}

/** One HTTP attempt of a client request, as node:http sees it. */
function attempt(
  port: number,
  agent: http.Agent,
  body: string,
  stream: boolean,
  leave: Leave,
  deadlineMs: number,
  record: Attempt,
): Promise<AttemptEnd> {
  return new Promise((resolve) => {
    let settled = false;
    const done = (end: AttemptEnd): void => {
      if (settled) return;
      settled = true;
      record.endAt = Date.now();
      clearTimeout(deadline);
      resolve(end);
    };
    let connected = false;
    let finished = false;
    const markDelivered = (): void => {
      if (connected && finished && record.deliveredAt === undefined) record.deliveredAt = Date.now();
    };
    const req = http.request({
      host: '127.0.0.1',
      port,
      method: 'POST',
      path: '/v1/chat/completions',
      agent,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    });
    const deadline = setTimeout(() => {
      done({ kind: 'hung', label: `hung: no end after ${deadlineMs / 1000} s (${record.headAt ? 'after the head' : 'no head'})` });
      req.destroy();
    }, deadlineMs);
    const leaveNow = (label: string): void => {
      done({ kind: 'left', label: `left ${label}` });
      req.destroy();
    };
    req.on('socket', (socket) => {
      if (!socket.connecting) connected = true;
      else
        socket.once('connect', () => {
          connected = true;
          markDelivered();
        });
    });
    req.on('finish', () => {
      finished = true;
      markDelivered();
    });
    req.on('error', (err: NodeJS.ErrnoException) => {
      done({
        kind: 'transport',
        label: `transport error ${err.code ?? err.message}${record.headAt ? ' after the head' : ''}`,
        beforeHead: !record.headAt,
      });
    });
    req.on('response', (res) => {
      record.headAt = Date.now();
      if (leave === 'after-head') return leaveNow('after the head');
      let text = '';
      let events = 0;
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        text += chunk;
        if (leave === 'mid-stream') {
          events += chunk.split('\n\n').length - 1;
          if (events >= 3 && !text.includes('[DONE]')) leaveNow('mid-stream');
        }
      });
      res.on('end', () => {
        const retryAfterMs = retryAfterOf(res.headers);
        const status = res.statusCode ?? 0;
        const shouldRetry = res.headers['x-should-retry'] as string | undefined;
        const intact = stream && status === 200 ? streamIntact(text, EXPECTED) : undefined;
        done({
          kind: 'answer',
          label: classify(status, text, stream && status === 200),
          status,
          retryAfterMs,
          shouldRetry,
          ...(intact !== undefined ? { intact } : {}),
        });
      });
      res.on('error', (err: NodeJS.ErrnoException) => {
        done({ kind: 'transport', label: `transport error ${err.code ?? err.message} after the head`, beforeHead: false });
      });
      res.on('close', () => {
        if (!res.complete) done({ kind: 'transport', label: 'transport error: response cut before its end', beforeHead: false });
      });
    });
    if (leave === 'before-body') {
      req.write(body.slice(0, Math.floor(body.length / 2)));
      setTimeout(() => leaveNow('before sending the whole body'), Math.random() * 50);
      return;
    }
    req.end(body);
    if (leave === 'before-head') setTimeout(() => record.headAt === undefined && leaveNow('before the head'), Math.random() * 400);
  });
}

/** The SDK retries these: 408, 409, 429, 5xx, connection errors before a response; `x-should-retry` overrides. */
function retryable(end: AttemptEnd): boolean {
  if (end.kind === 'transport') return end.beforeHead;
  if (end.kind !== 'answer') return false;
  if (end.shouldRetry === 'true') return true;
  if (end.shouldRetry === 'false') return false;
  return end.status === 408 || end.status === 409 || end.status === 429 || end.status >= 500;
}

export async function runSystem(opts: SystemOptions, log: (line: string) => void): Promise<SystemResult> {
  // a Ctrl-C exits through run.ts's handler: Prometheus (started through test/support) goes with it
  const onExit = (): void => void stopTestProcesses();
  process.once('exit', onExit);
  const sims: Sim[] = [
    { name: 'sim-a0', model: MODEL_A, port: await fixedPort() },
    { name: 'sim-a1', model: MODEL_A, port: await fixedPort() },
    { name: 'sim-b0', model: MODEL_B, port: await fixedPort() },
    { name: 'sim-b1', model: MODEL_B, port: await fixedPort() },
  ];
  const cold: Sim = { name: 'sim-cold', model: MODEL_C, port: await fixedPort() };
  const replicas: Replica[] = [];
  for (let i = 0; i < 2; i++)
    replicas.push({
      index: i,
      port: await fixedPort(),
      adminPort: await fixedPort(),
      kedaPort: await fixedPort(),
      restarts: 0,
      generation: 0,
      startedAt: 0,
    });
  let prom: Prometheus | undefined;
  const kedas: KedaClient[] = [];
  let polling = false;
  const pollers: Promise<void>[] = [];
  let sending = false;
  /** what a Service would route to: replicas whose /ready answered 200 at the last check (every second) */
  const ready = [true, true];
  let checking = false;
  let readiness: Promise<void> | undefined;
  const agents = replicas.map(() => new http.Agent({ keepAlive: true, maxSockets: 256 }));

  const startSim = async (s: Sim, loadingSeconds: number): Promise<number> => {
    s.proc = startProc(
      s.name,
      process.execPath,
      [
        opts.cli,
        'sim',
        '--host',
        '127.0.0.1',
        '--port',
        String(s.port),
        '--model',
        s.model,
        '--id',
        s.name,
        '--ttft-ms',
        '20',
        '--itl-ms',
        '10',
        '--output-tokens',
        String(TOKENS),
        '--max-num-seqs',
        '256',
        '--startup-loading-seconds',
        String(loadingSeconds),
      ],
      path.join(opts.dir, `${s.name}.log`),
    );
    let loadedAt = 0;
    await waitUntil(
      `${s.name} listening`,
      async () => {
        const r = await fetchOnce(s.port, 'GET', '/_sim/fault');
        loadedAt = (JSON.parse(r.text) as { loadedAt: number }).loadedAt;
        return r.status === 200;
      },
      { proc: s.proc },
    );
    return loadedAt;
  };
  const routerArgs = (r: Replica): string[] => {
    const peer = replicas[1 - r.index] as Replica;
    const backends = [...sims, cold];
    return [
      opts.cli,
      'serve',
      '--host',
      '127.0.0.1',
      '--port',
      String(r.port),
      '--admin-port',
      String(r.adminPort),
      '--keda-scaler-port',
      String(r.kedaPort),
      '--scaler-peers',
      `http://127.0.0.1:${peer.adminPort}`,
      '--workers',
      '2',
      '--static-backends',
      backends.map((s) => `http://127.0.0.1:${s.port}`).join(','),
      '--static-models',
      backends.map((s) => s.model).join(','),
      '--known-models',
      MODEL_C,
      '--cold-start-wait',
      String(COLD_START_WAIT_S),
      '--probe-interval',
      '0.5',
      '--probe-ready-interval',
      '1',
      '--drain-seconds',
      '3',
      '--shutdown-timeout',
      '15',
      '--scale-to-zero-grace-seconds',
      '10',
      '--log-level',
      'warn',
      '--migration-limit',
      String(opts.migrationLimit),
    ];
  };
  const startReplica = async (r: Replica): Promise<void> => {
    r.generation++;
    r.startedAt = Date.now();
    r.proc = startProc(`router-${r.index}-${r.generation}`, process.execPath, routerArgs(r), path.join(opts.dir, `router-${r.index}.log`));
    await waitUntil(`router ${r.index} ready`, async () => (await fetchOnce(r.port, 'GET', '/ready')).status === 200, {
      proc: r.proc,
      timeoutMs: 30_000,
    });
  };
  /** SIGTERM, then the replica's own drain and shutdown; SIGKILL only if it outlives that by far */
  const stopReplica = async (r: Replica): Promise<boolean> => {
    const proc = r.proc;
    if (!proc) return true;
    proc.child.kill('SIGTERM');
    const clean = await Promise.race([proc.exited.then(() => true), sleep(30_000).then(() => false)]);
    await proc.stop();
    return clean;
  };

  const attempts: Attempt[] = [];
  /** every attempt's end: its HTTP status, or its transport error, or that the client left */
  const attemptEnds: Record<string, number> = {};
  /** the first six attempts of each kind that did not end with a 200 or on purpose: when, where, how */
  const firstErrors: string[] = [];
  const outcomes: Record<string, number> = {};
  const finalKinds: Record<AttemptEnd['kind'] | 'lost' | 'error-answer' | 'ok', number> = {
    answer: 0,
    transport: 0,
    left: 0,
    hung: 0,
    lost: 0,
    'error-answer': 0,
    ok: 0,
  };
  const faults: SystemResult['faults'] = [];
  /** MODEL_C had no loaded engine from `from` to `to` (its simulator's loadedAt) */
  const coldDown: { from: number; to: number }[] = [];
  const kedaPolls: { replica: number; start: number; end: number; metric?: number; active?: boolean; error?: string }[] = [];
  let runStart = 0;
  let sent = 0;
  let streams = 0;
  let intact = 0;
  let outstanding = 0;
  let roundRobin = 0;

  const clientRequest = async (i: number): Promise<void> => {
    // a fixed mix: 15 % for the model at zero, the rest split; half stream; 1 in 8 leaves at some stage
    const h = (i * 2654435761) >>> 0;
    const model = h % 100 < 15 ? MODEL_C : h % 2 === 0 ? MODEL_A : MODEL_B;
    const stream = (h >>> 8) % 2 === 0;
    const leaves: Leave[] = stream ? ['before-body', 'before-head', 'after-head', 'mid-stream'] : ['before-body', 'before-head'];
    const leave: Leave = (h >>> 12) % 8 === 0 ? (leaves[(h >>> 16) % leaves.length] as Leave) : 'none';
    const body = JSON.stringify({ model, messages: [{ role: 'user', content: `system soak ${i}` }], max_tokens: TOKENS, stream });
    let end: AttemptEnd | undefined;
    for (let retry = 0; retry <= opts.maxRetries; retry++) {
      const routable = [0, 1].filter((k) => ready[k]);
      const candidates = routable.length > 0 ? routable : [0, 1];
      const replica = candidates[roundRobin++ % candidates.length] as number;
      const record: Attempt = { model, replica, sentAt: Date.now() };
      attempts.push(record);
      end = await attempt(
        (replicas[replica] as Replica).port,
        agents[replica] as http.Agent,
        body,
        stream,
        leave,
        opts.attemptDeadlineMs,
        record,
      );
      const how =
        end.kind === 'answer' ? (end.label.startsWith('ok') ? 'HTTP 200' : end.label) : end.kind === 'transport' ? end.label : end.kind;
      count(attemptEnds, how);
      record.how = how;
      // the first six of each kind, with the retry it was (0: the request's first attempt)
      if (how !== 'HTTP 200' && how !== 'left' && (attemptEnds[how] ?? 0) <= 6)
        firstErrors.push(
          `${(((record.endAt ?? 0) - runStart) / 1000).toFixed(1)} s router ${replica} ${model}${stream ? ' stream' : ''} retry ${retry}: ${how}`,
        );
      if (retry === opts.maxRetries || !retryable(end)) break;
      await sleep(retryDelayMs(end.kind === 'answer' ? end.retryAfterMs : undefined, retry));
    }
    const final = end as AttemptEnd;
    count(outcomes, final.label);
    if (stream && final.kind !== 'left') {
      streams++;
      if (final.kind === 'answer' && final.intact === true) intact++;
    }
    if (final.kind === 'answer')
      finalKinds[final.label.startsWith('lost') ? 'lost' : final.label.startsWith('ok') ? 'ok' : 'error-answer']++;
    else finalKinds[final.kind]++;
  };

  const at = async (fraction: number): Promise<void> => {
    const wait = runStart + fraction * opts.seconds * 1000 - Date.now();
    if (wait > 0) await sleep(wait);
  };
  const fault = async (what: string, f: () => Promise<void>): Promise<void> => {
    const t0 = Date.now();
    log(`system: ${((t0 - runStart) / 1000).toFixed(0)} s: ${what}`);
    await f();
    faults.push({ at: Math.round((t0 - runStart) / 1000), what, ms: Date.now() - t0 });
  };
  const killWorker = async (r: Replica): Promise<void> => {
    // a worker that dies within 5 s of its start stops the whole replica (src/router/app/primary.ts: it would only
    // crash again), so the worker killed here has run for longer than that
    const young = r.startedAt + 7_000 - Date.now();
    if (young > 0) await sleep(young);
    const pid = r.proc ? processTree(r.proc.pid)[1] : undefined;
    if (pid === undefined) throw new Error(`router ${r.index} has no worker`);
    process.kill(pid, 'SIGKILL');
    // the primary forks another; wait for it so the next fault meets a whole replica
    await waitUntil(
      `router ${r.index} has 2 workers again`,
      async () => processTree(r.proc?.pid ?? 0).length >= 3 && !processTree(r.proc?.pid ?? 0).includes(pid),
      {
        timeoutMs: 30_000,
      },
    );
  };

  try {
    for (const s of sims) await startSim(s, 0);
    for (const r of replicas) await startReplica(r);
    await waitUntil(
      'every engine of the served models ready on both replicas',
      async () => {
        for (const r of replicas) {
          const e = JSON.parse((await fetchOnce(r.adminPort, 'GET', '/engines')).text) as { endpoints: { state: string; url?: string }[] };
          if (e.endpoints.filter((x) => x.state === 'ready').length < sims.length) return false;
        }
        return true;
      },
      { timeoutMs: 30_000 },
    );
    prom = await startPrometheus(
      replicas.map((r) => `127.0.0.1:${r.adminPort}`),
      1,
    );
    const promStart = Date.now();
    await sleep(2_000);

    checking = true;
    readiness = (async () => {
      while (checking) {
        await Promise.all(
          replicas.map(async (r) => {
            ready[r.index] = await fetchOnce(r.port, 'GET', '/ready', undefined, 900).then(
              (x) => x.status === 200,
              () => false,
            );
          }),
        );
        await sleep(1_000);
      }
    })();
    runStart = Date.now();
    coldDown.push({ from: runStart, to: Number.POSITIVE_INFINITY });
    polling = true;
    for (const r of replicas) {
      const client = kedaClient(`127.0.0.1:${r.kedaPort}`, undefined, {
        'grpc.initial_reconnect_backoff_ms': 200,
        'grpc.max_reconnect_backoff_ms': 1_000,
      });
      kedas.push(client);
      const ref = { name: 'sys-cold', namespace: 'bench', scalerMetadata: { model: MODEL_C } };
      pollers.push(
        (async () => {
          while (polling) {
            const start = Date.now();
            try {
              const [metric, active] = await Promise.all([client.metric(ref), client.isActive(ref)]);
              kedaPolls.push({ replica: r.index, start, end: Date.now(), metric, active });
            } catch (err) {
              kedaPolls.push({ replica: r.index, start, end: Date.now(), error: String((err as { code?: unknown }).code ?? err) });
            }
            await sleep(500);
          }
        })(),
      );
    }
    sending = true;
    const inFlight = new Set<Promise<void>>();
    const sender = (async () => {
      const cap = Math.max(100, opts.rate * 20);
      while (sending) {
        const due = Math.floor(((Date.now() - runStart) / 1000) * opts.rate);
        while (sent < due && sending) {
          if (outstanding >= cap) {
            count(outcomes, 'not sent: too many outstanding');
            sent++;
            continue;
          }
          const i = sent++;
          outstanding++;
          const p = clientRequest(i).finally(() => {
            outstanding--;
            inFlight.delete(p);
          });
          inFlight.add(p);
        }
        await sleep(20);
      }
    })();

    const wake = async (loading: number): Promise<void> => {
      const loadedAt = await startSim(cold, loading);
      const down = coldDown.at(-1);
      if (down) down.to = loadedAt;
    };
    await at(0.1);
    await fault(`wake ${MODEL_C}: start its engine (2 s loading)`, () => wake(2));
    await at(0.2);
    await fault('SIGKILL a worker of router 0', () => killWorker(replicas[0] as Replica));
    await at(0.3);
    await fault('restart engine sim-a0 (SIGTERM, start again on its port)', async () => {
      await sims[0]?.proc?.stop();
      await startSim(sims[0] as Sim, 1);
    });
    await at(0.38);
    await fault(`scale ${MODEL_C} to zero: stop its engine`, async () => {
      coldDown.push({ from: Date.now(), to: Number.POSITIVE_INFINITY });
      await cold.proc?.stop();
    });
    await at(0.4);
    await fault(`rolling restart of the router replicas (${MODEL_C} at zero: requests held)`, async () => {
      for (const r of replicas) {
        const t0 = Date.now();
        const clean = await stopReplica(r);
        const t1 = Date.now();
        r.restarts++;
        await startReplica(r);
        const step = `router ${r.index}: ${clean ? 'exited' : 'still running (then SIGKILLed)'} ${((t1 - t0) / 1000).toFixed(1)} s after SIGTERM, the new process ready ${((Date.now() - t1) / 1000).toFixed(1)} s later`;
        log(`system: ${step}`);
        faults.push({ at: Math.round((t0 - runStart) / 1000), what: step, ms: Date.now() - t0 });
      }
    });
    await at(0.65);
    await fault(`SIGKILL a worker of router 1 (${MODEL_C} still at zero)`, () => killWorker(replicas[1] as Replica));
    await at(0.75);
    await fault(`wake ${MODEL_C} again (2 s loading)`, () => wake(2));
    await at(0.85);
    await fault('SIGKILL engine sim-b0 in the middle of its streams, start it again on its port', async () => {
      const s = sims[2] as Sim;
      s.proc?.child.kill('SIGKILL');
      await s.proc?.exited;
      await startSim(s, 1);
    });
    await at(1);
    sending = false;
    await sender;
    const runEnd = Date.now();
    log(`system: ${sent} requests sent; waiting for the ${outstanding} outstanding (at most ${opts.attemptDeadlineMs / 1000} s each)`);
    await Promise.all([...inFlight]);
    // nothing held or in flight any more: the scaler's answers should say 0 within a round of peer requests
    await sleep(2_000);
    polling = false;
    checking = false;
    await Promise.all([...pollers, readiness]);
    // the last scrapes
    await sleep(3_000);

    // demand: Prometheus's largest per-model rate against the clients' largest 30 s window, over the same run
    const step = 2;
    const q = new URLSearchParams({
      query: `sum by (model) (rate(llm_router_model_demand_total[${RATE_WINDOW_S}s]))`,
      start: String((runStart + RATE_WINDOW_S * 1000) / 1000),
      end: String(runEnd / 1000 + step),
      step: `${step}s`,
    });
    const range = (await (await fetch(`${prom.url}/api/v1/query_range?${q}`)).json()) as {
      status: string;
      data?: { result: { metric: { model?: string }; values: [number, string][] }[] };
    };
    if (range.status !== 'success') throw new Error(`Prometheus query_range: ${JSON.stringify(range).slice(0, 300)}`);
    const demand: SystemResult['demand'] = [];
    for (const model of MODELS) {
      const series = range.data?.result.find((s) => s.metric.model === model);
      const promMax = Math.max(0, ...(series?.values ?? []).map(([, v]) => Number(v)).filter(Number.isFinite));
      const delivered = attempts
        .filter((a) => a.model === model && a.deliveredAt !== undefined)
        .map((a) => a.deliveredAt as number)
        .sort((x, y) => x - y);
      let clientMax = 0;
      for (let t = runStart + RATE_WINDOW_S * 1000; t <= runEnd + step * 1000; t += 500) {
        const n = delivered.filter((d) => d > t - RATE_WINDOW_S * 1000 && d <= t).length;
        clientMax = Math.max(clientMax, n / RATE_WINDOW_S);
      }
      demand.push({ model, promMax, clientMax, ratio: clientMax > 0 ? promMax / clientMax : Number.NaN });
    }
    const maxDemandRatio = Math.max(...demand.map((d) => d.ratio).filter((r) => !Number.isNaN(r)));

    // resets: a replica restart resets its counters once; nothing else may (a worker killed keeps its counts)
    const rangeS = Math.ceil((Date.now() - promStart) / 1000) + 5;
    const resets: SystemResult['resets'] = [];
    for (const metric of ['llm_router_model_demand_total', 'llm_router_requests_total']) {
      const r = await prom.query(`resets(${metric}[${rangeS}s])`);
      for (const s of r.samples) {
        const replica = replicas.find((x) => s.metric.instance === `127.0.0.1:${x.adminPort}`);
        const { __name__: _, instance, job: __, ...labels } = s.metric;
        resets.push({
          metric,
          instance: `router ${replica?.index ?? '?'} (${instance})`,
          series: JSON.stringify(labels),
          resets: s.value,
          restarts: replica?.restarts ?? 0,
        });
      }
    }
    const unexpectedResets = resets.filter((r) => r.resets > r.restarts).length;
    // gathers a primary finished without a worker's part (that worker then counts with its last answer)
    const gatherMissed: Record<string, number> = {};
    for (const x of (await prom.query(`sum by (topic) (increase(llm_router_ipc_gather_missed_total[${rangeS}s]))`)).samples)
      gatherMissed[x.metric.topic ?? '?'] = Math.round(x.value);

    // KEDA: was a held request ever invisible to an answer?
    const downAt = (t0: number, t1: number): { from: number; to: number } | undefined => coldDown.find((d) => t0 >= d.from && t1 <= d.to);
    const rel = (t: number | undefined): string => (t === undefined ? '-' : `${((t - runStart) / 1000).toFixed(1)} s`);
    /** polls that saw 0 while a request sent before the engine stopped was still unanswered (in flight, failing over) */
    const pendingInvisible: string[] = [];
    let pendingInvisibleCount = 0;
    let pollsWithHeld = 0;
    let invisible = 0;
    let undercounted = 0;
    let maxHeld = 0;
    let maxMetric = 0;
    const firstInvisible: string[] = [];
    const coldAttempts = attempts.filter((a) => a.model === MODEL_C && a.deliveredAt !== undefined);
    for (const p of kedaPolls) {
      const down = downAt(p.start, p.end);
      if (p.error !== undefined || !down) continue;
      const unanswered = coldAttempts.filter(
        (a) =>
          (a.deliveredAt as number) <= p.start - VISIBILITY_MARGIN_MS &&
          (a.headAt ?? Number.POSITIVE_INFINITY) > p.end &&
          (a.endAt ?? Number.POSITIVE_INFINITY) > p.end,
      );
      // held: sent once no engine of the model was up, so it cannot be one an engine was working on when it stopped
      const heldOnes = unanswered.filter((a) => (a.deliveredAt as number) >= down.from);
      const held = heldOnes.length;
      if (held === 0) {
        if (unanswered.length > 0 && (p.metric ?? 0) < 1) {
          pendingInvisibleCount++;
          const a = unanswered[0] as Attempt;
          if (pendingInvisible.length < 5)
            pendingInvisible.push(
              `poll ${rel(p.start)}-${rel(p.end)} router ${p.replica}: GetMetrics ${p.metric}; request to router ${a.replica} sent ${rel(a.deliveredAt)}, engine stopped ${rel(down.from)}, ended ${rel(a.endAt)}: ${a.how}`,
            );
        }
        continue;
      }
      pollsWithHeld++;
      maxHeld = Math.max(maxHeld, held);
      maxMetric = Math.max(maxMetric, p.metric ?? 0);
      if ((p.metric ?? 0) < 1 || p.active !== true) {
        invisible++;
        if (firstInvisible.length < 5)
          firstInvisible.push(
            `poll ${rel(p.start)}-${rel(p.end)} router ${p.replica}: ${held} held, GetMetrics ${p.metric}, IsActive ${p.active}; one sent ${rel(heldOnes[0]?.deliveredAt)} to router ${heldOnes[0]?.replica}, ended ${rel(heldOnes[0]?.endAt)}: ${heldOnes[0]?.how}`,
          );
      }
      if ((p.metric ?? 0) < held) undercounted++;
    }
    const pollErrors = kedaPolls.filter((p) => p.error !== undefined).length;
    const afterLoad = replicas.map(
      (r) => kedaPolls.filter((p) => p.replica === r.index && p.metric !== undefined).at(-1)?.metric ?? Number.NaN,
    );

    const result: SystemResult = {
      seconds: (runEnd - runStart) / 1000,
      rate: opts.rate,
      maxRetries: opts.maxRetries,
      sent,
      attempts: attempts.length,
      retries: attempts.length - (sent - (outcomes['not sent: too many outstanding'] ?? 0)),
      outcomes,
      attemptEnds,
      firstErrors,
      ok: finalKinds.ok,
      errorAnswers: finalKinds['error-answer'],
      transportErrors: finalKinds.transport,
      left: finalKinds.left,
      lost: finalKinds.lost,
      hung: finalKinds.hung,
      faults,
      demand,
      maxDemandRatio,
      resets,
      unexpectedResets,
      gatherMissed,
      keda: {
        polls: kedaPolls.length,
        pollErrors,
        pollsWithHeld,
        maxHeld,
        maxMetric,
        afterLoad,
        pendingInvisibleCount,
        pendingInvisible,
        invisible,
        undercounted,
        firstInvisible,
      },
      passed: {
        lost: finalKinds.lost === 0,
        hung: finalKinds.hung === 0,
        demand: maxDemandRatio <= 1.2,
        keda: invisible === 0 && pollsWithHeld > 0,
      },
      migrationLimit: opts.migrationLimit,
      streams,
      intact,
    };
    return result;
  } finally {
    sending = false;
    polling = false;
    checking = false;
    await Promise.race([Promise.all([...pollers, readiness]), sleep(12_000)]);
    for (const k of kedas) k.close();
    for (const a of agents) a.destroy();
    await prom?.stop().catch(() => undefined);
    await Promise.all(replicas.map((r) => r.proc?.stop()));
    await Promise.all([...sims, cold].map((s) => s.proc?.stop()));
    process.removeListener('exit', onExit);
  }
}

export function renderSystem(r: SystemResult): string {
  const pass = (ok: boolean): string => (ok ? 'PASS' : 'FAIL');
  const lines = [
    `system soak (--migration-limit ${r.migrationLimit}): ${r.seconds.toFixed(0)} s at ${r.rate} requests/s (max ${r.maxRetries} retries as the OpenAI SDK), ${r.sent} requests sent, ${r.attempts} HTTP attempts (${r.retries} retries)`,
    `faults: ${r.faults.map((f) => `${f.at} s ${f.what} (${(f.ms / 1000).toFixed(1)} s)`).join('; ')}`,
    '',
    '| outcome (last attempt) | requests |',
    '| --- | --- |',
    ...Object.entries(r.outcomes)
      .sort((a, b) => b[1] - a[1])
      .map(([k, v]) => `| ${k} | ${v} |`),
    '',
    `attempts by end: ${Object.entries(r.attemptEnds)
      .sort((a, b) => b[1] - a[1])
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}`,
    ...(r.firstErrors.length ? [`first attempts that failed (six of each kind): ${r.firstErrors.join('; ')}`] : []),
    `answered ok ${r.ok}, answered with an error response ${r.errorAnswers}, answered with a transport error ${r.transportErrors}, left on purpose ${r.left}`,
    `streams intact (one uninterrupted generation, one [DONE], no error event): ${r.intact} of ${r.streams} whose client stayed (${r.streams - r.intact} not)`,
    '',
    '| model | Prometheus max sum(rate(demand[30s])) /s | clients max 30 s rate /s | ratio |',
    '| --- | --- | --- | --- |',
    ...r.demand.map((d) => `| ${d.model} | ${d.promMax.toFixed(2)} | ${d.clientMax.toFixed(2)} | ${d.ratio.toFixed(2)}x |`),
    '',
    `counter resets: ${r.resets.filter((x) => x.resets > 0).length} series reset, ${r.unexpectedResets} more often than their replica restarted${
      r.unexpectedResets
        ? `: ${r.resets
            .filter((x) => x.resets > x.restarts)
            .slice(0, 6)
            .map((x) => `${x.metric}${x.series} on ${x.instance} ${x.resets} resets / ${x.restarts} restarts`)
            .join('; ')}`
        : ''
    }`,
    `primary gathers that missed a worker's part (llm_router_ipc_gather_missed_total): ${
      Object.entries(r.gatherMissed)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ') || 'none'
    }`,
    `KEDA: ${r.keda.polls} polls (${r.keda.pollErrors} failed), ${r.keda.pollsWithHeld} while a held request was known (up to ${r.keda.maxHeld} at once; GetMetrics up to ${r.keda.maxMetric}); invisible in ${r.keda.invisible}, undercounted in ${r.keda.undercounted}; GetMetrics 2 s after the last request ended: ${r.keda.afterLoad.join(', ')}; GetMetrics 0 while a request sent before its engine stopped was unanswered: ${r.keda.pendingInvisibleCount}${
      r.keda.pendingInvisible.length ? ` (${r.keda.pendingInvisible.join('; ')})` : ''
    }${r.keda.firstInvisible.length ? ` (first: ${r.keda.firstInvisible.join('; ')})` : ''}`,
    '',
    `${pass(r.passed.lost)} lost ${r.lost} (target 0)`,
    `${pass(r.passed.hung)} hung ${r.hung} (target 0)`,
    `${pass(r.passed.demand)} max demand-rate ratio ${r.maxDemandRatio.toFixed(2)}x (target <= 1.2x)`,
    `${pass(r.passed.keda)} held request invisible to KEDA ${r.keda.invisible} times (target never${r.keda.pollsWithHeld === 0 ? '; no poll saw a held request, so nothing was checked' : ''})`,
  ];
  return lines.join('\n');
}
