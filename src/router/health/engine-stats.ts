// Engine load signals: every --engine-stats-interval, GET /metrics of each ready endpoint and keep the latest
// snapshot (with its time) on the endpoint. Parsing is a pure function; policies judge staleness from `at`.
import { Agent, request } from 'undici';
import { tlsConnectOptions, type EngineTls } from '../config/engine-tls.js';
import { isRoutable, type CatalogEvent, type ModelCatalog } from '../catalog/catalog.js';
import type { Endpoint, EngineCacheConfig } from '../core/endpoint.js';
import type { Logger } from '../util/log.js';

/** What one /metrics answer says about an engine's load. */
export interface EngineLoadSample {
  readonly running: number;
  readonly waiting: number;
  /** 0..1; undefined when the engine exports no KV-cache usage */
  readonly kvUsage: number | undefined;
}

const MAX_METRICS_BYTES = 16 * 1024 * 1024;

/**
 * Load on the engine beyond this router's own in-flight requests, in requests: what other clients (other router
 * replicas, direct callers) run or queue there; the queue once more, since a queue means the batch is full and a new
 * request waits rather than joins; and KV-cache usage as a fraction of one request (long contexts fill it), which
 * breaks ties between equal counts. least-load scores an endpoint as its live in-flight count plus this. Our own
 * running share is not taken from the scrape: it is known live, and a snapshot up to 3 intervals old would steer
 * traffic by where it was a second ago.
 */
export function otherLoad(sample: EngineLoadSample, inFlightAtScrape: number): number {
  return Math.max(0, sample.running + sample.waiting - inFlightAtScrape) + sample.waiting + (sample.kvUsage ?? 0);
}

/**
 * Visits every sample line of Prometheus text exposition (0.0.4 or OpenMetrics) whose metric name `wanted` accepts,
 * with its raw label text (between the braces, '' when none) and value. Comments, blank and malformed lines are skipped.
 */
export function forEachSample(
  text: string,
  wanted: (name: string) => boolean,
  visit: (name: string, labels: string, value: number) => void,
): void {
  const n = text.length;
  let i = 0;
  while (i < n) {
    let end = text.indexOf('\n', i);
    if (end < 0) end = n;
    const lineStart = i;
    i = end + 1;
    // skip leading blanks; comments (# HELP, # TYPE, # EOF) carry no samples
    let p = lineStart;
    while (p < end && (text.charCodeAt(p) === 32 || text.charCodeAt(p) === 9)) p++;
    if (p >= end || text.charCodeAt(p) === 35) continue;
    let q = p;
    while (q < end) {
      const c = text.charCodeAt(q);
      if (c === 123 /* { */ || c === 32 || c === 9) break;
      q++;
    }
    const name = text.slice(p, q);
    if (!wanted(name)) continue;
    let labels = '';
    if (q < end && text.charCodeAt(q) === 123) {
      const close = labelsEnd(text, q + 1, end);
      if (close < 0) continue;
      labels = text.slice(q + 1, close);
      q = close + 1;
    }
    while (q < end && (text.charCodeAt(q) === 32 || text.charCodeAt(q) === 9)) q++;
    let v = q;
    while (v < end && text.charCodeAt(v) !== 32 && text.charCodeAt(v) !== 9 && text.charCodeAt(v) !== 13) v++;
    if (v === q) continue;
    const value = parseValue(text.slice(q, v));
    if (Number.isNaN(value)) continue;
    visit(name, labels, value);
  }
}

/** Index of the `}` closing a label set that starts at `from`, honouring quoted values with escapes; -1 if none. */
function labelsEnd(text: string, from: number, end: number): number {
  let quoted = false;
  for (let i = from; i < end; i++) {
    const c = text.charCodeAt(i);
    if (quoted) {
      if (c === 92 /* \ */) i++;
      else if (c === 34 /* " */) quoted = false;
    } else if (c === 34) quoted = true;
    else if (c === 125 /* } */) return i;
  }
  return -1;
}

function parseValue(token: string): number {
  switch (token) {
    case '+Inf':
    case 'Inf':
      return Number.POSITIVE_INFINITY;
    case '-Inf':
      return Number.NEGATIVE_INFINITY;
    default: {
      const value = Number(token);
      return token.length > 0 ? value : Number.NaN;
    }
  }
}

/** The value of one label in a raw label text (`a="x",b="y"`), unescaped; undefined when absent. */
export function labelValue(labels: string, name: string): string | undefined {
  let i = 0;
  while (i < labels.length) {
    while (i < labels.length && (labels[i] === ',' || labels[i] === ' ')) i++;
    const eq = labels.indexOf('=', i);
    if (eq < 0) return undefined;
    const key = labels.slice(i, eq).trim();
    let j = labels.indexOf('"', eq) + 1;
    if (j === 0) return undefined;
    let value = '';
    for (; j < labels.length; j++) {
      const c = labels[j] as string;
      if (c === '\\') {
        const next = labels[++j];
        value += next === 'n' ? '\n' : (next ?? '');
      } else if (c === '"') break;
      else value += c;
    }
    if (key === name) return value;
    i = j + 1;
  }
  return undefined;
}

const RUNNING = new Map([
  ['vllm:num_requests_running', 'vllm'],
  ['sglang:num_running_reqs', 'sglang'],
  ['tgi_batch_current_size', 'tgi'],
]);
const WAITING = new Map([
  ['vllm:num_requests_waiting', 'vllm'],
  ['sglang:num_queue_reqs', 'sglang'],
  ['tgi_queue_size', 'tgi'],
]);
const KV_USAGE = new Map([
  ['vllm:kv_cache_usage_perc', 'vllm'],
  // vLLM before 0.10 named it this way
  ['vllm:gpu_cache_usage_perc', 'vllm'],
  ['sglang:token_usage', 'sglang'],
]);
const FAMILY_ORDER = ['vllm', 'sglang', 'tgi'] as const;
const isLoadMetric = (name: string): boolean => RUNNING.has(name) || WAITING.has(name) || KV_USAGE.has(name);

/**
 * The engine's load from its /metrics text: vLLM, SGLang or TGI names. Series of one metric (several served names,
 * data-parallel ranks) are summed; KV usage takes the fullest. When an engine exports several families (a TGI
 * flavour that also speaks vLLM's names), the first of vLLM, SGLang, TGI wins. Undefined when no load is reported.
 */
export function parseEngineLoad(text: string): EngineLoadSample | undefined {
  const running: Record<string, number> = {};
  const waiting: Record<string, number> = {};
  const kv: Record<string, number> = {};
  forEachSample(text, isLoadMetric, (name, _labels, value) => {
    let family = RUNNING.get(name);
    if (family !== undefined) {
      running[family] = (running[family] ?? 0) + value;
      return;
    }
    family = WAITING.get(name);
    if (family !== undefined) {
      waiting[family] = (waiting[family] ?? 0) + value;
      return;
    }
    family = KV_USAGE.get(name) as string;
    kv[family] = Math.max(kv[family] ?? 0, value);
  });
  for (const family of FAMILY_ORDER) {
    if (running[family] === undefined && waiting[family] === undefined) continue;
    const usage = kv[family];
    return {
      running: Math.max(0, running[family] ?? 0),
      waiting: Math.max(0, waiting[family] ?? 0),
      kvUsage: usage === undefined ? undefined : Math.min(1, Math.max(0, usage)),
    };
  }
  return undefined;
}

const LORA_INFO = 'vllm:lora_requests_info';

/**
 * The adapter slots vLLM reports: the `max_lora` label of vllm:lora_requests_info (its value is a timestamp; the newest
 * series wins). Undefined when the engine does not export it (LoRA off, another engine).
 */
export function parseMaxLoras(text: string): number | undefined {
  let newest = Number.NEGATIVE_INFINITY;
  let slots: number | undefined;
  forEachSample(
    text,
    (name) => name === LORA_INFO,
    (_name, labels, value) => {
      const n = Number(labelValue(labels, 'max_lora'));
      if (!Number.isInteger(n) || n < 1 || value < newest) return;
      newest = value;
      slots = n;
    },
  );
  return slots;
}

const CACHE_CONFIG_INFO = 'vllm:cache_config_info';

/**
 * The KV cache's geometry vLLM reports as labels of vllm:cache_config_info: block_size (tokens per block) and
 * num_gpu_blocks (its capacity). Undefined when the engine does not export it.
 */
export function parseCacheConfig(text: string): EngineCacheConfig | undefined {
  let found: EngineCacheConfig | undefined;
  forEachSample(
    text,
    (name) => name === CACHE_CONFIG_INFO,
    (_name, labels) => {
      const positive = (raw: string | undefined): number | undefined => {
        const n = Number(raw);
        return raw !== undefined && raw !== '' && Number.isSafeInteger(n) && n > 0 ? n : undefined;
      };
      found ??= { blockSize: positive(labelValue(labels, 'block_size')), numGpuBlocks: positive(labelValue(labels, 'num_gpu_blocks')) };
    },
  );
  return found;
}

export interface EngineStatsOptions {
  readonly intervalMs: number;
  /** per scrape; default max(1 s, interval) */
  readonly timeoutMs?: number;
  readonly apiKey: string | undefined;
  /** https engines: trust and client certificate, as for requests */
  readonly tls?: EngineTls;
  readonly now?: () => number;
}

/** Scrapes every ready endpoint's /metrics on a timer and stores the result as `endpoint.engineLoad`. */
export class EngineStatsScraper {
  private readonly dispatcher: Agent;
  private readonly scraping = new Set<Endpoint>();
  private readonly now: () => number;
  private readonly timeoutMs: number;
  private timer: NodeJS.Timeout | undefined;
  private unsubscribe: (() => void) | undefined;
  private stopped = false;

  constructor(
    private readonly catalog: ModelCatalog,
    private readonly opts: EngineStatsOptions,
    private readonly log: Logger,
  ) {
    this.now = opts.now ?? Date.now;
    this.dispatcher = new Agent({
      connections: 2,
      pipelining: 1,
      keepAliveTimeout: 10_000,
      ...(opts.tls ? { connect: tlsConnectOptions(opts.tls) } : {}),
    });
    this.timeoutMs = opts.timeoutMs ?? Math.max(1000, opts.intervalMs);
  }

  start(): void {
    // a newly ready endpoint is scraped at once, so it does not stay unknown for a whole interval
    this.unsubscribe = this.catalog.onChange((e: CatalogEvent) => {
      if (e.type === 'endpoint-state' && isRoutable(e.endpoint)) void this.scrape(e.endpoint);
    });
    this.timer = setInterval(() => this.tick(), this.opts.intervalMs);
    this.timer.unref();
    this.tick();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    this.unsubscribe?.();
    await this.dispatcher.destroy().catch(() => undefined);
  }

  private tick(): void {
    for (const e of this.catalog.endpoints()) if (isRoutable(e)) void this.scrape(e);
  }

  private async scrape(endpoint: Endpoint): Promise<void> {
    if (this.stopped || this.scraping.has(endpoint)) return;
    this.scraping.add(endpoint);
    // the engine counts at about the time the scrape reaches it: compare with ours when it was sent
    const ours = endpoint.inFlight;
    try {
      const headers: Record<string, string> = { accept: 'text/plain' };
      if (this.opts.apiKey) headers.authorization = `Bearer ${this.opts.apiKey}`;
      const res = await request(endpoint.probeUrl + '/metrics', {
        method: 'GET',
        headers,
        dispatcher: this.dispatcher,
        headersTimeout: this.timeoutMs,
        bodyTimeout: this.timeoutMs,
        signal: AbortSignal.timeout(this.timeoutMs),
      });
      if (res.statusCode !== 200 || Number(res.headers['content-length'] ?? 0) > MAX_METRICS_BYTES) {
        await res.body.dump();
        this.log.debug({ endpoint: endpoint.url, status: res.statusCode }, 'engine /metrics not usable');
        return;
      }
      const text = await res.body.text();
      if (this.stopped) return;
      const slots = parseMaxLoras(text);
      if (slots !== undefined) this.catalog.recordAdapterSlots(endpoint, slots);
      const cache = parseCacheConfig(text);
      if (cache !== undefined) this.catalog.recordCacheConfig(endpoint, cache);
      const sample = parseEngineLoad(text);
      if (!sample) return;
      this.catalog.recordLoad(endpoint, {
        at: this.now(),
        ...sample,
        otherLoad: otherLoad(sample, ours),
        others: Math.max(0, sample.running + sample.waiting - ours),
        ours,
      });
    } catch (err) {
      // the snapshot ages into "unknown"; the prober, not this scraper, decides about health
      this.log.debug({ endpoint: endpoint.url, err: (err as Error).message }, 'engine /metrics scrape failed');
    } finally {
      this.scraping.delete(endpoint);
    }
  }
}
