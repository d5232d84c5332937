// The simulated inference engine: a node:http server that answers like vLLM's OpenAI server
// (or SGLang / TGI), with load phases, a batch-slot queue, faults and request statistics.
// This module owns the server's life (refuse, load, listen, fault switch, close) and sends each request to its handler.
import type { RequestTracer } from '../../router/core/trace.js';
import { bracketHost } from '../../router/util/host.js';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { once } from 'node:events';
import type { EngineContext } from './context.js';
import { answerControl } from './control.js';
import type { SimEngine, SimEngineOptions, SimKvSwitch, SimSettings } from './engine-api.js';
import { kvPoolBlocks, simSettings } from './flags.js';
import { sendJson } from './http-io.js';
import { INFERENCE_PATHS, answerInference } from './inference.js';
import { errorBody } from './openai.js';
import { SlotQueue } from './queue.js';
import { RequestStats } from './request-stats.js';
import { answerStatus } from './status.js';
import { SimPd } from './pd.js';
import { reply, SimLora, VLLM_LORA } from './lora.js';
import { SGLANG_LORA } from './lora-sglang.js';
import { EngineTiming } from './timing.js';
import { EngineKvCache } from './kv-cache.js';
import type { KvEventPublisher } from './kv-events.js';
import { WordTokenizer, type SimTokenizer } from './tokenizer.js';
import type { Fault, FaultMode, SimKvEventsStatus, SimPhase, SimStats } from './types.js';
import type { EngineKind } from '../../router/core/engine.js';

export type { SimEngine, SimEngineOptions, SimKvSwitch } from './engine-api.js';
export type { Fault, FaultMode, SimPhase, SimStats } from './types.js';

/** Starts an engine; resolves once it listens (after any startup-refuse phase). */
export async function startSimEngine(options: SimEngineOptions = {}): Promise<SimEngine> {
  const engine = new SimServer(options);
  await engine.start();
  return engine;
}

function pickFreePort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once('error', reject);
    probe.listen(0, host, () => {
      const address = probe.address() as net.AddressInfo;
      probe.close(() => resolve(address.port));
    });
  });
}

class SimServer implements SimEngine, EngineContext {
  readonly host: string;
  private listenPort: number;
  private engineId: string | undefined;
  readonly models: readonly string[];
  readonly modelRoot: string | undefined;
  readonly kind: EngineKind;
  readonly outputTokens: number;
  readonly embeddingDim: number;
  readonly maxModelLen: number;
  readonly queue: SlotQueue;
  readonly requests = new RequestStats();
  readonly timing: EngineTiming;
  readonly tokenizer: SimTokenizer;
  readonly kvCache: EngineKvCache;
  private kvPublisher: KvEventPublisher | undefined;
  readonly pd: SimPd | undefined;
  readonly lora: SimLora | undefined;
  readonly created = Math.floor(Date.now() / 1000);
  private readonly server: http.Server | https.Server;
  private readonly sockets = new Set<net.Socket>();
  private currentFault: Fault = { mode: 'none' };
  private faultTimer: NodeJS.Timeout | undefined;
  private loadedMoment = Number.POSITIVE_INFINITY;
  private closed = false;

  private readonly options: SimSettings;

  constructor(given: SimEngineOptions) {
    const options = simSettings(given);
    this.options = options;
    this.host = options.host;
    this.pd = options.role === 'both' ? undefined : new SimPd(options.role, options.pdProtocol);
    this.lora = options.lora ? new SimLora(options.lora, options.kind === 'sglang' ? SGLANG_LORA : VLLM_LORA) : undefined;
    this.listenPort = options.port;
    this.models = [...options.models];
    this.modelRoot = options.modelRoot;
    this.kind = options.kind;
    this.outputTokens = options.outputTokens;
    this.embeddingDim = options.embeddingDim;
    this.maxModelLen = options.maxModelLen;
    const poolBlocks = kvPoolBlocks(options);
    this.queue = new SlotQueue(options.maxNumSeqs, { blocks: poolBlocks, blockSize: Math.max(1, options.prefixBlockTokens) });
    this.tokenizer = options.tokenizer ?? new WordTokenizer();
    // the publisher binds in start(); events of a request admitted before cannot exist (nothing listens yet)
    this.kvCache = new EngineKvCache(
      // the prefix cache lives in the KV pool
      Math.min(options.prefixCacheBlocks, poolBlocks),
      options.prefixBlockTokens,
      options.kvEvents ? (events) => this.kvPublisher?.publish(events) : undefined,
    );
    this.timing = new EngineTiming(options, this.tokenizer, this.kvCache);
    this.engineId = options.id;
    const onRequest = (req: http.IncomingMessage, res: http.ServerResponse): void => this.onRequest(req, res);
    const tls = options.tls;
    this.server = tls
      ? https.createServer(
          { cert: tls.cert, key: tls.key, ...(tls.clientCa ? { ca: tls.clientCa, requestCert: true, rejectUnauthorized: true } : {}) },
          onRequest,
        )
      : http.createServer(onRequest);
    this.server.on('connection', (socket: net.Socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
  }

  get port(): number {
    return this.listenPort;
  }

  get url(): string {
    const host = bracketHost(this.host);
    return `${this.options.tls ? 'https' : 'http'}://${host}:${this.listenPort}`;
  }

  get id(): string {
    return this.engineId ?? `sim-${this.listenPort}`;
  }

  async start(): Promise<void> {
    if (this.options.kvEvents) {
      // ZeroMQ is loaded only by an engine that publishes
      const { KvEventPublisher } = await import('./kv-events.js');
      const publisher = new KvEventPublisher(this.host, this.options.kvEvents);
      await publisher.start();
      this.kvPublisher = publisher;
    }
    const refuseMs = this.options.startupRefuseSeconds * 1000;
    if (refuseMs > 0) {
      // the port must be known while it still refuses, so the caller can watch the refusal
      if (this.listenPort === 0) this.listenPort = await pickFreePort(this.host);
      await new Promise((resolve) => setTimeout(resolve, refuseMs));
    }
    await this.listen();
    this.loadedMoment = Date.now() + this.options.startupLoadingSeconds * 1000;
    if (this.options.fault.mode !== 'none') await this.setFault(this.options.fault);
  }

  stats(): SimStats {
    const lane = this.timing.lane;
    return {
      ...this.requests.snapshot(this.queue),
      ...(this.lora ? { lora: this.lora.stats() } : {}),
      ...(lane ? { decodeStalls: { count: lane.stalls, ms: Math.round(lane.stalledMs) } } : {}),
      ...(this.kvPublisher ? { kvEvents: this.kvEvents() as SimKvEventsStatus } : {}),
    };
  }

  kvEvents(): SimKvEventsStatus | undefined {
    if (!this.kvPublisher) return undefined;
    const cache = this.kvCache;
    return { ...this.kvPublisher.status(), blockSize: cache.blockSize, cachedBlocks: cache.size, capacityBlocks: cache.capacity };
  }

  kvSwitch(action: SimKvSwitch): void {
    if ('drop' in action) this.kvPublisher?.dropNext(action.drop);
    else if ('restart' in action) this.restartKv();
    else this.kvCache.clear();
  }

  /** As a new engine process: an empty prefix cache, new block hashes, the event sequence from 0 with no event. */
  private restartKv(): void {
    this.kvCache.restart();
    this.kvPublisher?.restart();
  }

  resetStats(): void {
    this.requests.reset();
    this.lora?.resetStats();
    this.timing.lane?.resetStats();
  }

  fault(): Fault {
    return this.currentFault;
  }

  loadedAt(): number | null {
    return Number.isFinite(this.loadedMoment) ? this.loadedMoment : null;
  }

  phase(): SimPhase {
    if (!this.server.listening) return 'refusing';
    if (this.currentFault.mode === 'loading' || Date.now() < this.loadedMoment) return 'loading';
    return 'ready';
  }

  async setFault(input: Fault | FaultMode): Promise<void> {
    const fault: Fault = typeof input === 'string' ? { mode: input } : input;
    clearTimeout(this.faultTimer);
    this.faultTimer = undefined;
    this.currentFault = fault;
    if (fault.mode === 'refuse') {
      await this.stopListening();
      // the engine process is gone: when it listens again it holds only the adapters it is started with, an empty
      // prefix cache and a new event sequence
      this.lora?.restart();
      this.restartKv();
    } else if (!this.server.listening && !this.closed) await this.listen();
    if (fault.seconds !== undefined && fault.mode !== 'none' && !this.closed) {
      this.faultTimer = setTimeout(() => {
        this.setFault({ mode: 'none' }).catch((err: unknown) => {
          process.stderr.write(`sim ${this.id}: could not end fault ${fault.mode}: ${(err as Error).message}\n`);
        });
      }, fault.seconds * 1000);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.faultTimer);
    await this.stopListening();
    this.pd?.ledger.closeAll();
    await this.kvPublisher?.close();
  }

  private async listen(): Promise<void> {
    this.server.listen({ port: this.listenPort, host: this.host, backlog: 4096 });
    await once(this.server, 'listening');
    this.listenPort = (this.server.address() as net.AddressInfo).port;
  }

  private async stopListening(): Promise<void> {
    if (!this.server.listening) return;
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const socket of this.sockets) socket.destroy();
    await closed;
  }

  private onRequest(req: http.IncomingMessage, res: http.ServerResponse): void {
    res.setHeader('x-sim-engine', this.id);
    const requestId = req.headers['x-request-id'];
    if (typeof requestId === 'string') res.setHeader('x-request-id', requestId);
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q >= 0 ? url.slice(0, q) : url;
    if (path.startsWith('/_sim/')) {
      answerControl(this, req, res, path).catch((err: unknown) =>
        sendJson(res, 500, errorBody((err as Error).message, 'InternalServerError', 500)),
      );
      return;
    }
    this.requests.recordTraceparent(req.method ?? 'GET', path, req.headers);
    if (this.options.tracer !== undefined) traceExchange(this.options.tracer, req, res, path, this.id);
    const byPath = this.requests.counters.byPath;
    byPath[path] = (byPath[path] ?? 0) + 1;
    if (INFERENCE_PATHS.has(path)) {
      if (req.method !== 'POST') return sendJson(res, 405, { detail: 'Method Not Allowed' });
      answerInference(this, req, res, path).catch((err: unknown) =>
        sendJson(res, 500, errorBody((err as Error).message, 'InternalServerError', 500)),
      );
      return;
    }
    if (this.currentFault.mode === 'hang' && this.currentFault.scope === 'all') return;
    // vLLM's dev-mode path (VLLM_SERVER_DEV_MODE=1): every cached block dropped, announced by AllBlocksCleared
    if (path === '/reset_prefix_cache' && this.kind === 'vllm') {
      if (req.method !== 'POST') return sendJson(res, 405, { detail: 'Method Not Allowed' });
      req.resume();
      this.kvCache.clear();
      res.writeHead(200, { 'content-length': 0 });
      res.end();
      return;
    }
    const flavour = this.kind === 'sglang' ? SGLANG_LORA : VLLM_LORA;
    if (path === flavour.loadPath || path === flavour.unloadPath) {
      if (req.method !== 'POST') return sendJson(res, 405, { detail: 'Method Not Allowed' });
      // without --enable-lora: vLLM has no such routes, SGLang answers that LoRA is not enabled
      if (!this.lora) {
        req.resume();
        return reply(res, flavour.disabled());
      }
      this.lora
        .answer(req, res, path)
        .catch((err: unknown) => sendJson(res, 500, errorBody((err as Error).message, 'InternalServerError', 500)));
      return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') return sendJson(res, 405, { detail: 'Method Not Allowed' });
    answerStatus(this, res, path);
  }
}

/** --otel-endpoint: one SERVER span per request, a child of the caller's span (its traceparent), ended with the answer. */
function traceExchange(tracer: RequestTracer, req: http.IncomingMessage, res: http.ServerResponse, path: string, engine: string): void {
  const method = req.method ?? 'GET';
  const span = tracer.request(`${method} ${path}`, req.headers, {
    'http.request.method': method,
    'http.route': path,
    'llm_router_sim.engine': engine,
  });
  res.once('close', () => {
    span.set('http.response.status_code', res.statusCode);
    if (!res.writableFinished) span.fail('the answer did not complete');
    span.end();
  });
}
