// The router's own per-request CPU, with no sockets: handleInference (admission, body parse, catalog, policy,
// forwarder, attempt handler, header filtering, metrics, demand tracking) against an engine client that answers at
// once, and a fake response that only counts bytes. Beside it, the least a proxy handler can do in the same harness
// (parse the body, dispatch, pass the answer through). The difference is what the router's logic costs per request,
// apart from the HTTP and socket work the socket benchmarks include.
// Usage: node --import tsx bench/hotpath.ts   (or as part of `npm run bench -- --only hotpath`)
import { EventEmitter } from 'node:events';
import { ModelCatalog } from '../src/router/catalog/catalog.js';
import { loadRouterConfig } from '../src/router/config/config.js';
import { applyStaticSource } from '../src/router/discovery/static.js';
import { SyncTracker } from '../src/router/discovery/sync.js';
import { RouterMetrics } from '../src/router/metrics/metrics.js';
import { Forwarder } from '../src/router/proxy/forwarder.js';
import { AdapterManager } from '../src/router/adapters/manager.js';
import { EngineAdmin } from '../src/router/adapters/engine-admin.js';
import { PdForwarder } from '../src/router/proxy/pd/pd-forwarder.js';
import type { H1DispatchOptions, H1Handler } from '../src/router/proxy/h1/pool.js';
import type { UpstreamPools } from '../src/router/proxy/pools.js';
import { createPolicy } from '../src/router/routing/index.js';
import { Scaling } from '../src/router/scaling/index.js';
import type { InboundRequest, ResponseSink } from '../src/router/core/exchange.js';
import { handleInference, type InferenceDeps } from '../src/router/server/pipeline.js';
import { createLogger } from '../src/router/util/log.js';
import { realClock } from '../src/router/util/clock.js';
import { FlowController } from '../src/router/flow/controller.js';
import { JSON_BODY } from './wrk.js';

export interface HotpathResult {
  /** ns per request through handleInference */
  readonly routerNs: number;
  /** the same with --flow-control on, its pool below saturation (what flow control adds to a request that passes) */
  readonly flowNs: number;
  /** ns per request through the least handler that parses, dispatches and passes the answer through */
  readonly floorNs: number;
}

const ANSWER = Buffer.from(
  JSON.stringify({
    id: 'x',
    object: 'chat.completion',
    choices: [{ index: 0, message: { role: 'assistant', content: 'The quick brown fox.' } }],
  }),
);
const ANSWER_HEADERS = [
  'content-type',
  'application/json',
  'content-length',
  String(ANSWER.length),
  'date',
  'Mon, 30 Nov 2026 10:00:00 GMT',
].map((s) => Buffer.from(s));

/** An engine client that answers every request at once, as a fast engine on a warm connection would. */
class InstantPool {
  dispatch(_opts: H1DispatchOptions, handler: H1Handler): void {
    handler.onConnect(() => undefined);
    handler.onHeaders(200, ANSWER_HEADERS, () => undefined);
    handler.onData(ANSWER);
    handler.onComplete(null);
  }
}

/** Counts what would be written; keeps ServerResponse's meaning for the calls the inference path makes. */
class CountingResponse extends EventEmitter implements ResponseSink {
  statusCode = 200;
  headersSent = false;
  writableFinished = false;
  destroyed = false;
  bytes = 0;
  setHeader(): this {
    return this;
  }
  writeHead(statusCode: number): this {
    this.statusCode = statusCode;
    this.headersSent = true;
    return this;
  }
  flushHeaders(): void {
    this.headersSent = true;
  }
  write(chunk: Buffer | string): boolean {
    this.headersSent = true;
    this.bytes += chunk.length;
    return true;
  }
  end(chunk?: Buffer | string): this {
    if (chunk) this.bytes += chunk.length;
    this.headersSent = true;
    this.writableFinished = true;
    return this;
  }
  destroy(): this {
    this.destroyed = true;
    return this;
  }
}

/**
 * The deps with flow control on: the pool's engines report a quarter of their KV cache in use (below saturation), on a
 * clock that stands still at the time of that scrape, so it never goes stale during the rounds.
 */
function withFlowControl(deps: InferenceDeps): InferenceDeps {
  const at = Date.now();
  for (const e of deps.catalog.endpoints())
    deps.catalog.recordLoad(e, { at, running: 1, waiting: 0, kvUsage: 0.25, otherLoad: 0, others: 0, ours: 0 });
  const clock = { ...realClock, now: () => at };
  const flow = new FlowController({
    thresholds: { queueDepth: 5, kvCache: 0.8, stalenessMs: 200 },
    queueTimeoutMs: 30_000,
    maxRequests: 10_000,
    maxBytes: 1 << 30,
    bandMaxRequests: 2_000,
    bandMaxBytes: 1 << 28,
    candidates: (model) => {
      const r = deps.catalog.resolve(model);
      return r.kind === 'routable' ? r.candidates : [];
    },
    clock,
  });
  return { ...deps, flow, keyEntry: () => undefined };
}

function inferenceDeps(): InferenceDeps {
  const config = loadRouterConfig(['--static-backends', 'http://127.0.0.1:9', '--static-models', 'bench-model', '--log-level', 'warn'], {});
  const log = createLogger({ level: 'warn', format: 'text' });
  const catalog = new ModelCatalog();
  applyStaticSource(catalog, config);
  for (const e of catalog.endpoints()) catalog.setState(e, 'ready');
  const pool = new InstantPool();
  const pools = { get: () => pool } as unknown as UpstreamPools;
  const observer = { succeeded: () => undefined, failed: () => undefined, failover: () => undefined };
  const policy = createPolicy(config.routingLogic);
  const forwarder = new Forwarder(pools, policy, observer, catalog, config.timeouts, config.maxFailoverAttempts);
  const metrics = new RouterMetrics(catalog);
  const pd = new PdForwarder(forwarder, pools, { decode: policy, prefill: policy }, observer, catalog, metrics.pd, {
    pd: config.pd,
    timeouts: config.timeouts,
    engineAuthorization: undefined,
    forwardClientAuth: false,
  });
  let inFlight = 0;
  return {
    catalog,
    forwarder,
    policyName: 'roundrobin',
    pd,
    adapters: new AdapterManager(
      catalog,
      new EngineAdmin({ kind: 'vllm', apiKey: undefined, timeoutMs: 1_000 }),
      metrics.lora,
      {
        defaultSlots: 1,
        spillThreshold: 0,
        cooldownMs: 0,
        statsIntervalMs: 1_000,
      },
      log,
    ),
    metrics,
    log,
    maxBodyBytes: config.maxBodyBytes,
    maxJsonBodyBytes: config.maxJsonBodyBytes,
    scaling: new Scaling(catalog, config.scaling, config.retryAfterSeconds, log),
    sync: new SyncTracker(),
    syncWaitMs: 0,
    engineAuthorization: undefined,
    forwardClientAuth: false,
    allowClientKvTransferParams: false,
    admit: () => {
      inFlight++;
      return () => void inFlight--;
    },
  };
}

const RAW_HEADERS = ['Host', '127.0.0.1:8001', 'Content-Type', 'application/json', 'Content-Length', String(JSON_BODY.length)];
function request(): InboundRequest {
  return {
    url: '/v1/chat/completions',
    headers: { host: '127.0.0.1:8001', 'content-type': 'application/json', 'content-length': String(JSON_BODY.length) },
    rawHeaders: RAW_HEADERS,
    socket: { bytesWritten: 0, remoteAddress: '127.0.0.1' },
  };
}

async function timeRounds(run: () => Promise<void>, perRound: number, rounds: number): Promise<number> {
  const timings: number[] = [];
  for (let r = 0; r <= rounds; r++) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < perRound; i++) await run();
    const ns = Number(process.hrtime.bigint() - t0) / perRound;
    if (r > 0) timings.push(ns); // round 0 warms up
  }
  timings.sort((a, b) => a - b);
  return timings[Math.floor(timings.length / 2)] as number;
}

export async function measureHotpath(opts: { requests?: number; rounds?: number } = {}): Promise<HotpathResult> {
  const perRound = opts.requests ?? 100_000;
  const rounds = opts.rounds ?? 5;
  const deps = inferenceDeps();
  const body = Buffer.from(JSON_BODY);
  const pool = new InstantPool();
  let check = 0;
  const routerNs = await timeRounds(
    async () => {
      const res = new CountingResponse();
      await handleInference(request(), res, '/v1/chat/completions', deps, body);
      if (res.statusCode !== 200 || !res.writableFinished) throw new Error(`handleInference answered ${res.statusCode}`);
      check += res.bytes;
    },
    perRound,
    rounds,
  );
  const flowDeps = withFlowControl(deps);
  const flowNs = await timeRounds(
    async () => {
      const res = new CountingResponse();
      await handleInference(request(), res, '/v1/chat/completions', flowDeps, body);
      if (res.statusCode !== 200 || !res.writableFinished) throw new Error(`handleInference with flow control answered ${res.statusCode}`);
      check += res.bytes;
    },
    perRound,
    rounds,
  );
  const floorNs = await timeRounds(
    async () => {
      const res = new CountingResponse();
      const req = request();
      const model = (JSON.parse(body.toString('utf8')) as { model: string }).model;
      await new Promise<void>((resolve) => {
        pool.dispatch(
          {
            method: 'POST',
            path: req.url ?? '/',
            headers: ['content-type', 'application/json', 'content-length', String(body.length), 'x-model', model],
            body,
            headersTimeout: 0,
            bodyTimeout: 0,
          },
          {
            onConnect: () => undefined,
            onHeaders: (status, raw) => {
              const headers: string[] = [];
              for (let i = 0; i < raw.length; i += 2)
                headers.push((raw[i] as Buffer).toString('latin1'), (raw[i + 1] as Buffer).toString('latin1'));
              res.writeHead(status);
              return headers.length > 0;
            },
            onData: (chunk) => res.write(chunk),
            onComplete: () => {
              res.end();
              resolve();
            },
            onError: () => resolve(),
          },
        );
      });
      check += res.bytes;
    },
    perRound,
    rounds,
  );
  if (check === 0) throw new Error('nothing was answered');
  deps.scaling.stop().catch(() => undefined);
  return { routerNs, flowNs, floorNs };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const r = await measureHotpath();
  process.stdout.write(
    `handleInference: ${Math.round(r.routerNs)} ns/request; with --flow-control below saturation: ${Math.round(r.flowNs)} ns (+${Math.round(r.flowNs - r.routerNs)}); least handler: ${Math.round(r.floorNs)} ns/request; router logic: ${Math.round(r.routerNs - r.floorNs)} ns\n`,
  );
  process.exit(0);
}
