// The simulated inference engine: a node:http server that answers like vLLM's OpenAI server
// (or SGLang / TGI), with load phases, a batch-slot queue, faults and request statistics.
import http from 'node:http';
import net from 'node:net';
import { once } from 'node:events';
import { randomUUID } from 'node:crypto';
import { DEFAULT_RESET_AFTER_CHUNKS, DEFAULT_SLOW_CHUNK_DELAY_MS, parseFault } from './faults.js';
import { renderMetrics } from './metrics.js';
import {
  SSE_DONE,
  completionBody,
  echoBody,
  embeddingsBody,
  errorBody,
  modelNotFound,
  newGeneration,
  roleChunk,
  sseEvent,
  tokenChunk,
  usage,
  usageChunk,
  type GenerationApi,
} from './openai.js';
import { PrefixCache, promptBlocks, renderPrompt } from './prefix-cache.js';
import { SlotQueue } from './queue.js';
import { fillerText, fillerToken, outputBudget, promptTokens } from './tokens.js';
import type { EngineKind, Fault, FaultMode, SimPhase, SimStats } from './types.js';

export type { EngineKind, Fault, FaultMode, SimPhase, SimStats } from './types.js';

export interface SimEngineOptions {
  /** default 127.0.0.1 */
  readonly host?: string;
  /** default 0 (any free port) */
  readonly port?: number;
  /** served model names; default ['sim-model'] */
  readonly models?: readonly string[];
  /** default 'vllm' */
  readonly kind?: EngineKind;
  /** the port refuses connections this long before the engine listens; default 0 */
  readonly startupRefuseSeconds?: number;
  /** then the engine listens but the model is not loaded this long; default 0 */
  readonly startupLoadingSeconds?: number;
  /** time to first token; default 20 */
  readonly ttftMs?: number;
  /** inter-token latency; default 5 */
  readonly itlMs?: number;
  /** tokens generated per request, lowered by its max_tokens; default 16 */
  readonly outputTokens?: number;
  /** requests running at once; later ones wait in FIFO order; default 256 */
  readonly maxNumSeqs?: number;
  /** default 8 */
  readonly embeddingDim?: number;
  /** reported in /v1/models, /info and /tokenize; default 4096 */
  readonly maxModelLen?: number;
  /** prefill time per prompt token not found in the prefix cache, added to the TTFT; default 0 */
  readonly prefillMsPerToken?: number;
  /** prefix cache capacity in blocks (an LRU); 0 turns prefix caching off; default 4096 */
  readonly prefixCacheBlocks?: number;
  /** tokens per prefix-cache block; default 16 (vLLM's block size) */
  readonly prefixBlockTokens?: number;
  /** value of the x-sim-engine header; default sim-<port> */
  readonly id?: string;
  /** fault applied once the engine listens; default none */
  readonly fault?: Fault;
}

export interface SimEngine {
  readonly port: number;
  /** http://host:port */
  readonly url: string;
  readonly id: string;
  stats(): SimStats;
  resetStats(): void;
  fault(): Fault;
  phase(): SimPhase;
  /** `refuse` resolves once the port is closed; any other mode re-opens a refused port first */
  setFault(fault: Fault | FaultMode): Promise<void>;
  /** stops listening and destroys every open connection */
  close(): Promise<void>;
}

/** Starts an engine; resolves once it listens (after any startup-refuse phase). */
export async function startSimEngine(options: SimEngineOptions = {}): Promise<SimEngine> {
  const engine = new SimServer(options);
  await engine.start();
  return engine;
}

const GENERATION_PATHS: ReadonlyMap<string, GenerationApi> = new Map([
  ['/v1/chat/completions', 'chat'],
  ['/v1/completions', 'completion'],
]);
/** Paths answered by echoBody after a slot and a delay: they take batch slots like real requests do. */
const ECHO_GENERATION_PATHS = new Set(['/v1/responses', '/v1/messages']);
const ECHO_POOLING_PATHS = new Set(['/v1/rerank', '/rerank', '/v1/score', '/score']);
/** Tokenizer-only paths: answered at once, no batch slot. */
const TOKENIZER_PATHS = new Set(['/tokenize', '/detokenize']);
const INFERENCE_PATHS = new Set([...GENERATION_PATHS.keys(), '/v1/embeddings', ...ECHO_GENERATION_PATHS, ...ECHO_POOLING_PATHS, ...TOKENIZER_PATHS]);

const MAX_BODY_BYTES = 16 * 1024 * 1024;

class BodyError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

function readBody(req: http.IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        reject(new BodyError(413, `request body larger than ${MAX_BODY_BYTES} bytes`));
        req.resume();
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
    req.on('close', () => reject(new BodyError(499, 'client closed the connection')));
  });
}

async function readJsonObject(req: http.IncomingMessage): Promise<Record<string, unknown>> {
  const raw = await readBody(req);
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw.toString('utf8'));
  } catch (err) {
    throw new BodyError(400, `Invalid JSON body: ${(err as Error).message}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new BodyError(400, 'The request body must be a JSON object.');
  return parsed as Record<string, unknown>;
}

function sendJson(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  if (res.destroyed || res.headersSent) return;
  const text = JSON.stringify(body);
  res.writeHead(status, { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function sendEmpty(res: http.ServerResponse, status: number): void {
  if (res.destroyed || res.headersSent) return;
  res.writeHead(status, { 'content-length': 0 });
  res.end();
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

/** One inference request in flight: what to undo when it ends, and whether a fault (not the client) cut it. */
interface Exchange {
  readonly cleanup: Array<() => void>;
  resetBySim: boolean;
}

interface SuccessRecord {
  readonly finishReason: string;
  readonly prompt: number;
  readonly generated: number;
}

function emptyStats(): SimStats {
  return { received: 0, completed: 0, failed: 0, aborted: 0, running: 0, waiting: 0, byPath: {}, byModel: {} };
}

class SimServer implements SimEngine {
  private readonly host: string;
  private listenPort: number;
  private engineId: string | undefined;
  private readonly models: readonly string[];
  private readonly kind: EngineKind;
  private readonly ttftMs: number;
  private readonly itlMs: number;
  private readonly outputTokens: number;
  private readonly embeddingDim: number;
  private readonly maxModelLen: number;
  private readonly queue: SlotQueue;
  private readonly server: http.Server;
  private readonly sockets = new Set<net.Socket>();
  private readonly created = Math.floor(Date.now() / 1000);
  private currentFault: Fault = { mode: 'none' };
  private faultTimer: NodeJS.Timeout | undefined;
  private loadedAt = Number.POSITIVE_INFINITY;
  private closed = false;
  private counters: SimStats = emptyStats();
  // Prometheus counters are never reset: a reset would look like an engine restart to a scraper
  private readonly successByReason: Record<string, number> = {};
  private promptTokenTotal = 0;
  private generationTokenTotal = 0;
  private readonly prefillMsPerToken: number;
  private readonly prefixBlockTokens: number;
  private readonly prefixCache: PrefixCache;
  private prefixQueryTokens = 0;
  private prefixHitTokens = 0;

  constructor(private readonly options: SimEngineOptions) {
    this.host = options.host ?? '127.0.0.1';
    this.listenPort = options.port ?? 0;
    this.models = options.models && options.models.length > 0 ? [...options.models] : ['sim-model'];
    this.kind = options.kind ?? 'vllm';
    this.ttftMs = options.ttftMs ?? 20;
    this.itlMs = options.itlMs ?? 5;
    this.outputTokens = options.outputTokens ?? 16;
    this.embeddingDim = options.embeddingDim ?? 8;
    this.maxModelLen = options.maxModelLen ?? 4096;
    this.queue = new SlotQueue(options.maxNumSeqs ?? 256);
    this.prefillMsPerToken = options.prefillMsPerToken ?? 0;
    this.prefixBlockTokens = Math.max(1, options.prefixBlockTokens ?? 16);
    this.prefixCache = new PrefixCache(options.prefixCacheBlocks ?? 4096);
    this.engineId = options.id;
    this.server = http.createServer((req, res) => this.onRequest(req, res));
    this.server.on('connection', (socket: net.Socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
  }

  get port(): number {
    return this.listenPort;
  }

  get url(): string {
    const host = this.host.includes(':') ? `[${this.host}]` : this.host;
    return `http://${host}:${this.listenPort}`;
  }

  get id(): string {
    return this.engineId ?? `sim-${this.listenPort}`;
  }

  async start(): Promise<void> {
    const refuseMs = (this.options.startupRefuseSeconds ?? 0) * 1000;
    if (refuseMs > 0) {
      // the port must be known while it still refuses, so the caller can watch the refusal
      if (this.listenPort === 0) this.listenPort = await pickFreePort(this.host);
      await new Promise((resolve) => setTimeout(resolve, refuseMs));
    }
    await this.listen();
    this.loadedAt = Date.now() + (this.options.startupLoadingSeconds ?? 0) * 1000;
    if (this.options.fault && this.options.fault.mode !== 'none') await this.setFault(this.options.fault);
  }

  stats(): SimStats {
    return {
      ...this.counters,
      running: this.queue.running,
      waiting: this.queue.waiting,
      byPath: { ...this.counters.byPath },
      byModel: { ...this.counters.byModel },
    };
  }

  resetStats(): void {
    this.counters = emptyStats();
  }

  fault(): Fault {
    return this.currentFault;
  }

  phase(): SimPhase {
    if (!this.server.listening) return 'refusing';
    if (this.currentFault.mode === 'loading' || Date.now() < this.loadedAt) return 'loading';
    return 'ready';
  }

  async setFault(input: Fault | FaultMode): Promise<void> {
    const fault: Fault = typeof input === 'string' ? { mode: input } : input;
    clearTimeout(this.faultTimer);
    this.faultTimer = undefined;
    this.currentFault = fault;
    if (fault.mode === 'refuse') await this.stopListening();
    else if (!this.server.listening && !this.closed) await this.listen();
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

  // ---- request handling ----

  private onRequest(req: http.IncomingMessage, res: http.ServerResponse): void {
    res.setHeader('x-sim-engine', this.id);
    const requestId = req.headers['x-request-id'];
    if (typeof requestId === 'string') res.setHeader('x-request-id', requestId);
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q >= 0 ? url.slice(0, q) : url;
    if (path.startsWith('/_sim/')) {
      this.control(req, res, path).catch((err: unknown) => sendJson(res, 500, errorBody((err as Error).message, 'InternalServerError', 500)));
      return;
    }
    this.counters.byPath[path] = (this.counters.byPath[path] ?? 0) + 1;
    if (INFERENCE_PATHS.has(path)) {
      if (req.method !== 'POST') return sendJson(res, 405, { detail: 'Method Not Allowed' });
      this.inference(req, res, path).catch((err: unknown) => sendJson(res, 500, errorBody((err as Error).message, 'InternalServerError', 500)));
      return;
    }
    if (this.currentFault.mode === 'hang' && this.currentFault.scope === 'all') return;
    if (req.method !== 'GET' && req.method !== 'HEAD') return sendJson(res, 405, { detail: 'Method Not Allowed' });
    this.status(res, path);
  }

  private loadingError(): object {
    return errorBody('The model is still loading; try again later.', 'ServiceUnavailableError', 503);
  }

  /** Health, model list, metrics and engine info: the signals readiness rules read, per engine kind. */
  private status(res: http.ServerResponse, path: string): void {
    const ready = this.phase() === 'ready';
    const first = this.models[0] as string;
    switch (path) {
      case '/health':
        if (ready || this.kind === 'vllm' || this.kind === 'openai') return sendEmpty(res, 200);
        if (this.kind === 'tgi') return sendJson(res, 503, { error: 'unhealthy', error_type: 'healthcheck' });
        return sendEmpty(res, 503);
      case '/v1/models':
        if (!ready) return sendJson(res, 503, this.loadingError());
        return sendJson(res, 200, {
          object: 'list',
          data: this.models.map((id) => ({
            id,
            object: 'model',
            created: this.created,
            owned_by: this.kind === 'openai' ? 'system' : this.kind,
            root: id,
            parent: null,
            max_model_len: this.maxModelLen,
          })),
        });
      case '/metrics': {
        const text = renderMetrics(this.kind, first, {
          running: this.queue.running,
          waiting: this.queue.waiting,
          maxNumSeqs: this.queue.capacity,
          successByReason: this.successByReason,
          promptTokens: this.promptTokenTotal,
          generationTokens: this.generationTokenTotal,
          prefixCacheQueries: this.prefixQueryTokens,
          prefixCacheHits: this.prefixHitTokens,
        });
        res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8', 'content-length': Buffer.byteLength(text) });
        res.end(text);
        return;
      }
      case '/get_model_info':
        if (this.kind !== 'sglang') break;
        if (!ready) return sendEmpty(res, 503);
        return sendJson(res, 200, { model_path: first, tokenizer_path: first, is_generation: true });
      case '/info':
        if (this.kind !== 'tgi') break;
        if (!ready) return sendJson(res, 503, { error: 'unhealthy', error_type: 'healthcheck' });
        return sendJson(res, 200, {
          model_id: first,
          model_sha: null,
          model_dtype: 'float16',
          model_device_type: 'cuda',
          model_pipeline_tag: 'text-generation',
          max_concurrent_requests: this.queue.capacity,
          max_best_of: 2,
          max_stop_sequences: 4,
          max_input_tokens: this.maxModelLen - 1,
          max_total_tokens: this.maxModelLen,
          validation_workers: 2,
          max_client_batch_size: 4,
          router: 'text-generation-router',
          version: 'sim',
        });
    }
    sendJson(res, 404, { detail: 'Not Found' });
  }

  /** Counts the request once it ends: completed, failed, or aborted by its client. */
  private track(res: http.ServerResponse): Exchange {
    const exchange: Exchange = { cleanup: [], resetBySim: false };
    res.on('close', () => {
      for (const undo of exchange.cleanup) undo();
      if (res.writableFinished) {
        if (res.statusCode < 400) this.counters.completed++;
        else this.counters.failed++;
      } else if (exchange.resetBySim) this.counters.failed++;
      else this.counters.aborted++;
    });
    return exchange;
  }

  private resetSocket(res: http.ServerResponse, exchange: Exchange): void {
    exchange.resetBySim = true;
    res.socket?.destroy();
  }

  private interTokenMs(): number {
    const f = this.currentFault;
    return f.mode === 'slow-chunks' ? (f.delayMs ?? DEFAULT_SLOW_CHUNK_DELAY_MS) : this.itlMs;
  }

  private async inference(req: http.IncomingMessage, res: http.ServerResponse, path: string): Promise<void> {
    this.counters.received++;
    const exchange = this.track(res);
    if (this.currentFault.mode === 'hang') return;
    let body: Record<string, unknown>;
    try {
      body = await readJsonObject(req);
    } catch (err) {
      if (err instanceof BodyError && err.status === 499) return;
      const status = err instanceof BodyError ? err.status : 400;
      return sendJson(res, status, errorBody((err as Error).message, 'BadRequestError', status));
    }
    if (body.model !== undefined && typeof body.model !== 'string') {
      return sendJson(res, 400, errorBody('"model" must be a string.', 'BadRequestError', 400, 'model'));
    }
    // like vLLM, a request without a model goes to the first served name
    const model = (body.model as string | undefined) ?? (this.models[0] as string);
    this.counters.byModel[model] = (this.counters.byModel[model] ?? 0) + 1;
    if (this.phase() !== 'ready') return sendJson(res, 503, this.loadingError());
    if (!this.models.includes(model)) return sendJson(res, 404, modelNotFound(model));

    const fault = this.currentFault;
    if (fault.mode === 'error500') return sendJson(res, 500, errorBody('Internal server error (simulated engine fault).', 'InternalServerError', 500));
    // a per-request failure, as an engine bug triggered by one client's input would give
    const forced = Number(req.headers['x-sim-status']);
    if (Number.isInteger(forced) && forced >= 400 && forced <= 599) {
      return sendJson(res, forced, errorBody(`Simulated failure for this request (x-sim-status ${forced}).`, 'InternalServerError', forced));
    }
    if (fault.mode === 'overloaded') {
      return sendJson(res, 503, errorBody('The engine is overloaded: too many requests waiting; retry later.', 'ServiceUnavailableError', 503), { 'retry-after': '1' });
    }
    const api = GENERATION_PATHS.get(path);
    const stream = api !== undefined && body.stream === true;
    if (fault.mode === 'reset-mid-stream' && !stream) return this.resetSocket(res, exchange);

    if (api !== undefined) return this.generate(res, exchange, api, body, model, stream);
    const prompt = promptTokens(body);
    if (path === '/v1/embeddings') {
      return this.answerLater(res, exchange, this.ttftMs, { finishReason: 'stop', prompt, generated: 0 }, () => embeddingsBody(model, body.input, this.embeddingDim, body.encoding_format, prompt, this.newId()));
    }
    const budget = outputBudget(body, this.outputTokens);
    const generates = ECHO_GENERATION_PATHS.has(path);
    const outputTokens = generates ? budget.tokens : 0;
    const build = (): object =>
      echoBody({ path, model, body, promptTokens: prompt, outputText: fillerText(outputTokens), outputTokens, id: this.newId(), maxModelLen: this.maxModelLen });
    if (TOKENIZER_PATHS.has(path)) return sendJson(res, 200, build());
    const delay = generates ? this.ttftMs + this.interTokenMs() * (budget.tokens - 1) : this.ttftMs;
    this.answerLater(res, exchange, delay, { finishReason: 'stop', prompt, generated: outputTokens }, build);
  }

  private newId(): string {
    return randomUUID().replace(/-/g, '');
  }

  private recordSuccess({ finishReason, prompt, generated }: SuccessRecord): void {
    this.successByReason[finishReason] = (this.successByReason[finishReason] ?? 0) + 1;
    this.promptTokenTotal += prompt;
    this.generationTokenTotal += generated;
  }

  /**
   * Time to first token of a prompt that starts prefilling now: the base TTFT plus prefill of the tokens the prefix
   * cache does not hold. Looking the prompt up caches its blocks, as a real engine's prefill does.
   */
  private prefillTtft(body: Record<string, unknown>): number {
    const { tokens, blocks } = promptBlocks(renderPrompt(body), this.prefixBlockTokens);
    // like vLLM, the last prompt token is always computed, even when every block is cached
    const hit = Math.min(this.prefixCache.lookup(blocks) * this.prefixBlockTokens, Math.max(0, tokens - 1));
    this.prefixQueryTokens += tokens;
    this.prefixHitTokens += hit;
    return this.ttftMs + (tokens - hit) * this.prefillMsPerToken;
  }

  /** Holds a batch slot for delayMs (computed when the slot is granted), then answers with one JSON body. */
  private answerLater(res: http.ServerResponse, exchange: Exchange, delayMs: number | (() => number), record: SuccessRecord, build: () => object): void {
    let timer: NodeJS.Timeout | undefined;
    const lease = this.queue.admit(() => {
      timer = setTimeout(() => {
        lease.release();
        this.recordSuccess(record);
        sendJson(res, 200, build());
      }, typeof delayMs === 'number' ? delayMs : delayMs());
    });
    exchange.cleanup.push(() => {
      clearTimeout(timer);
      lease.release();
    });
  }

  /** Chat and text completions: one token after TTFT, then one per ITL; streamed as SSE or sent as one body. */
  private generate(res: http.ServerResponse, exchange: Exchange, api: GenerationApi, body: Record<string, unknown>, model: string, stream: boolean): void {
    const budget = outputBudget(body, this.outputTokens);
    const prompt = promptTokens(body);
    const generation = newGeneration(api, model, this.newId());
    const streamOptions = body.stream_options as { include_usage?: unknown } | null | undefined;
    const includeUsage = stream && typeof streamOptions === 'object' && streamOptions !== null && streamOptions.include_usage === true;
    const fault = this.currentFault;
    const resetAfter = fault.mode === 'reset-mid-stream' ? (fault.afterChunks ?? DEFAULT_RESET_AFTER_CHUNKS) : undefined;
    if (stream) {
      // like vLLM, headers go out as soon as the request is accepted, before the first token (even while queued)
      res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
      res.flushHeaders();
    }
    if (!stream) {
      const delay = (): number => this.prefillTtft(body) + this.interTokenMs() * (budget.tokens - 1);
      const text = fillerText(budget.tokens);
      return this.answerLater(res, exchange, delay, { finishReason: budget.finishReason, prompt, generated: budget.tokens }, () =>
        completionBody(generation, text, budget.finishReason, usage(prompt, budget.tokens)),
      );
    }
    let timer: NodeJS.Timeout | undefined;
    let sent = 0;
    const step = (): void => {
      for (;;) {
        if (resetAfter !== undefined && (sent >= resetAfter || sent === budget.tokens - 1)) {
          lease.release();
          return this.resetSocket(res, exchange);
        }
        const token = fillerToken(sent);
        sent++;
        const last = sent === budget.tokens;
        if (sent === 1 && api === 'chat') res.write(sseEvent(roleChunk(generation)));
        res.write(sseEvent(tokenChunk(generation, token, last ? budget.finishReason : null)));
        if (last) break;
        const delay = this.interTokenMs();
        if (delay > 0) {
          timer = setTimeout(step, delay);
          return;
        }
      }
      lease.release();
      this.recordSuccess({ finishReason: budget.finishReason, prompt, generated: budget.tokens });
      if (includeUsage) res.write(sseEvent(usageChunk(generation, usage(prompt, budget.tokens))));
      res.end(SSE_DONE);
    };
    const lease = this.queue.admit(() => {
      timer = setTimeout(step, this.prefillTtft(body));
    });
    exchange.cleanup.push(() => {
      clearTimeout(timer);
      lease.release();
    });
  }

  // ---- fault switch and statistics ----

  private async control(req: http.IncomingMessage, res: http.ServerResponse, path: string): Promise<void> {
    const describe = (): object => ({ ...this.currentFault, phase: this.phase() });
    if (path === '/_sim/stats' && req.method === 'GET') return sendJson(res, 200, this.stats());
    if (path === '/_sim/reset-stats' && req.method === 'POST') {
      req.resume();
      this.resetStats();
      return sendJson(res, 200, this.stats());
    }
    if (path === '/_sim/fault' && req.method === 'GET') return sendJson(res, 200, describe());
    if (path === '/_sim/fault' && req.method === 'POST') {
      let fault: Fault;
      try {
        fault = parseFault(await readJsonObject(req));
      } catch (err) {
        if (err instanceof BodyError && err.status === 499) return;
        return sendJson(res, 400, errorBody((err as Error).message, 'BadRequestError', 400));
      }
      if (fault.mode === 'refuse') {
        // answer first, on a connection that closes after this response, then stop listening
        res.on('close', () => {
          this.setFault(fault).catch((err: unknown) => process.stderr.write(`sim ${this.id}: refuse failed: ${(err as Error).message}\n`));
        });
        return sendJson(res, 200, { ...fault, phase: 'refusing' }, { connection: 'close' });
      }
      await this.setFault(fault);
      return sendJson(res, 200, describe());
    }
    sendJson(res, 404, { detail: 'Not Found' });
  }
}
