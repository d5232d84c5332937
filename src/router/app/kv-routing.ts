// KV-cache-aware routing assembled: the engines' event streams followed for every endpoint that names one (the catalog
// says which, level-triggered: every catalog change reconciles the whole set), the request tokenizer, and the key
// source the kvaware policy asks for each request's block keys.
import type { ModelCatalog } from '../catalog/catalog.js';
import type { KvConfig } from '../config/kv-config.js';
import type { EngineTls } from '../config/engine-tls.js';
import type { Endpoint } from '../core/endpoint.js';
import type { TraceSpan } from '../core/trace.js';
import { requestBlocks } from '../kv/block-key.js';
import { KvEvents } from '../kv/kv-events.js';
import { RequestTokenizer } from '../kv/request-tokens.js';
import type { KvEndpointStatus, KvSource } from '../kv/subscriber.js';
import type { KvMetrics, KvStreamView } from '../metrics/kv-metrics.js';
import type { KvFallbackReason, KvKeySource, KvRequest, RequestBlocks } from '../kv/types.js';
import type { Logger } from '../util/log.js';

export interface KvRoutingOptions {
  readonly kv: KvConfig;
  readonly engineApiKey: string | undefined;
  readonly engineTls: EngineTls | undefined;
}

export class KvRouting implements KvKeySource, KvStreamView {
  readonly events: KvEvents;
  private readonly tokenizer: RequestTokenizer;
  private unsubscribe: (() => void) | undefined;
  private reconcileQueued = false;
  /** which ready endpoint answers the next engine-mode /tokenize: spread over the model's endpoints */
  private nextTarget = 0;
  /** tokenizer directories named by endpoints' sources, loaded (or tried) once each */
  private readonly preloaded = new Set<string>();
  private readonly log: Logger;

  constructor(
    private readonly catalog: ModelCatalog,
    private readonly opts: KvRoutingOptions,
    private readonly metrics: KvMetrics,
    log: Logger,
  ) {
    this.log = log;
    this.events = new KvEvents({ log, maxCapacity: opts.kv.maxBlocksPerEndpoint, topic: opts.kv.topic });
    this.tokenizer = new RequestTokenizer({
      mode: opts.kv.tokenizer,
      models: Object.fromEntries(opts.kv.tokenizers),
      timeoutMs: opts.kv.tokenizerTimeoutMs,
      maxPromptChars: opts.kv.tokenizerMaxChars,
      trustRequestChatTemplate: opts.kv.trustRequestChatTemplate,
      onWorkerTrouble: (why) =>
        log.warn(
          { why },
          'in-process tokenizer worker restarted (its caches are lost) or cannot run: requests meanwhile go by prefixaware',
        ),
      ...(opts.engineApiKey ? { apiKey: opts.engineApiKey } : {}),
      ...(opts.engineTls ? { tls: opts.engineTls } : {}),
    });
  }

  start(): void {
    this.unsubscribe = this.catalog.onChange(() => this.queueReconcile());
    this.reconcile();
    // a tokenizer directory loads now, so a missing or broken one is said at start-up, not on the first request
    const dirs = new Set([this.opts.kv.tokenizer, ...this.opts.kv.tokenizers.values()].filter((m) => m !== 'engine' && m !== 'off'));
    for (const dir of dirs) this.preloadNamed(dir, '--tokenizer/--tokenizers');
  }

  async stop(): Promise<void> {
    this.unsubscribe?.();
    await Promise.all([this.events.close(), this.tokenizer.close()]);
  }

  /** The kvaware policy's question: this request's tokens (its keys at each endpoint's block size), or why there are none. */
  async keys(request: KvRequest, candidates: readonly Endpoint[], trace?: TraceSpan): Promise<RequestBlocks | KvFallbackReason> {
    const started = performance.now();
    const target = candidates.length > 0 ? candidates[this.nextTarget++ % candidates.length] : undefined;
    const outcome = await this.tokenizer.tokenize(request.model, request.body, target, trace, this.modeFor(request.model, candidates));
    if (outcome.fallback !== undefined) return outcome.fallback;
    const source = outcome.source === 'engine' && outcome.cached ? 'engine-cached' : outcome.source;
    this.metrics.tokenized(source, (performance.now() - started) / 1000);
    const adapter = this.catalog.model(request.model)?.adapter;
    return requestBlocks(outcome.tokens, adapter ? request.model : undefined);
  }

  /**
   * Tokens per KV-cache block of an endpoint's engine: what its vllm:cache_config_info says, else what its own events
   * declared, else --kv-block-size. One endpoint's events never set another's.
   */
  blockSizeOf(endpoint: Endpoint): number {
    return endpoint.cacheConfig?.blockSize ?? this.events.index.blockSize(endpoint.id) ?? this.opts.kv.blockSize;
  }

  /**
   * How the model's prompts are tokenized: --tokenizers MODEL=... first, then what the candidates' source names (the
   * llm-router/tokenizer annotation; endpoints mid-rollout that disagree: the smallest value, so every replica picks
   * the same), then --tokenizer.
   */
  private modeFor(model: string, candidates: readonly Endpoint[]): string | undefined {
    if (this.opts.kv.tokenizers.has(model)) return undefined;
    let named: string | undefined;
    for (const e of candidates) if (e.tokenizer !== undefined && (named === undefined || e.tokenizer < named)) named = e.tokenizer;
    return named;
  }

  /** GET /engines: the endpoint's event stream, when it has one. */
  statusOf(endpointId: string): KvEndpointStatus | undefined {
    return this.events.statusOf(endpointId);
  }

  counters(): ReturnType<KvEvents['counters']> {
    return this.events.counters();
  }

  blocks(): number {
    return this.events.kvIndex.stats().total;
  }

  tokenizerRestarts(): number {
    return this.tokenizer.workerRestarts;
  }

  endpoints(): { followed: number; connected: number } {
    const all = this.events.status();
    return { followed: all.length, connected: all.filter((s) => s.connected).length };
  }

  /**
   * A tokenizer directory loads when it is first named (the flags at start, an endpoint's annotation when discovered),
   * not on the first request; one that does not load is said once, with who named it.
   */
  private preloadNamed(mode: string, namedBy: string): void {
    if (mode === 'engine' || mode === 'off' || this.preloaded.has(mode)) return;
    this.preloaded.add(mode);
    void this.tokenizer.preload(mode).then((ok) => {
      if (!ok)
        this.log.warn(
          { tokenizer: mode, namedBy },
          'tokenizer directory does not load (no readable tokenizer.json there?): its models fall back to prefixaware (reason tokenizer-error)',
        );
    });
  }

  private queueReconcile(): void {
    if (this.reconcileQueued) return;
    this.reconcileQueued = true;
    setImmediate(() => {
      this.reconcileQueued = false;
      this.reconcile();
    });
  }

  /** Every endpoint that names an event stream is followed, whatever its state: its cache outlives a failed probe. */
  private reconcile(): void {
    const sources: KvSource[] = [];
    for (const e of this.catalog.endpoints()) {
      if (e.tokenizer !== undefined) this.preloadNamed(e.tokenizer, `the llm-router/tokenizer annotation of ${e.id}`);
      if (e.kvEvents === undefined) continue;
      const capacity = e.cacheConfig?.numGpuBlocks;
      const blockSize = e.cacheConfig?.blockSize;
      sources.push({
        endpointId: e.id,
        eventsUrls: e.kvEvents.eventsUrls,
        replayUrls: e.kvEvents.replayUrls,
        ...(capacity !== undefined ? { capacity } : {}),
        ...(blockSize !== undefined ? { blockSize } : {}),
      });
    }
    this.events.reconcile(sources);
  }
}
