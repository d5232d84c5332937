// KV-cache-aware routing assembled: the engines' event streams followed for every endpoint that names one (the catalog
// says which, level-triggered: every catalog change reconciles the whole set), each model's tokenizer (found and
// loaded by ModelTokenizers, src/router/kv/tokenizer-source.ts), the request tokenizer, the key source the kvaware
// policy asks for each request's block keys, and what is said out loud about a set-up that cannot work as meant.
import type { ModelCatalog } from '../catalog/catalog.js';
import type { KvConfig } from '../config/kv-config.js';
import type { EngineTls } from '../config/engine-tls.js';
import type { Endpoint } from '../core/endpoint.js';
import type { TraceSpan } from '../core/trace.js';
import { requestBlocks } from '../kv/block-key.js';
import { KvEvents } from '../kv/kv-events.js';
import { RequestTokenizer } from '../kv/request-tokens.js';
import type { KvEndpointStatus, KvSource } from '../kv/subscriber.js';
import { ModelTokenizers, type TokenizerStatus } from '../kv/tokenizer-source.js';
import { kvWarnings, type KvWarning } from '../kv/warnings.js';
import type { KvMetrics, KvStreamView } from '../metrics/kv-metrics.js';
import type { KvFallbackReason, KvKeySource, KvRequest, RequestBlocks } from '../kv/types.js';
import type { Logger } from '../util/log.js';

export interface KvRoutingOptions {
  readonly kv: KvConfig;
  readonly engineApiKey: string | undefined;
  readonly engineTls: EngineTls | undefined;
  /** kvaware is the routing logic (not only a per-request choice): a model without any event source is warned of */
  readonly kvawarePolicy?: boolean;
}

export class KvRouting implements KvKeySource, KvStreamView {
  readonly events: KvEvents;
  private readonly tokenizer: RequestTokenizer;
  private unsubscribe: (() => void) | undefined;
  private reconcileQueued = false;
  /** which ready endpoint answers the next engine-mode /tokenize: spread over the model's endpoints */
  private nextTarget = 0;
  /** each model's tokenizer: which one, and whether it has loaded */
  readonly tokenizers: ModelTokenizers;
  /** the warnings said so far (kind and model), each said once */
  private readonly warned = new Set<string>();
  /** every discovery source has listed once: before, a model may only not be listed yet */
  private synced: () => boolean = () => true;
  private readonly log: Logger;

  constructor(
    private readonly catalog: ModelCatalog,
    private readonly opts: KvRoutingOptions,
    private readonly metrics: KvMetrics,
    log: Logger,
  ) {
    this.log = log;
    this.events = new KvEvents({ log, maxCapacity: opts.kv.maxBlocksPerEndpoint, topic: opts.kv.topic });
    // every request names its mode (ModelTokenizers' choice): the tokenizer's own default is never used
    this.tokenizer = new RequestTokenizer({
      timeoutMs: opts.kv.tokenizerTimeoutMs,
      maxPromptChars: opts.kv.tokenizerMaxChars,
      trustRequestChatTemplate: opts.kv.trustRequestChatTemplate,
      onWorkerTrouble: (why) =>
        log.warn(
          { why },
          'in-process tokenizer worker restarted (its caches are lost) or cannot run: requests meanwhile go by prefixaware',
        ),
      onResumeMismatch: (model) =>
        log.warn(
          { model },
          "the engine's /tokenize gave a prompt that continues an earlier one other ids than the earlier ones plus its new text's: its prompts are tokenized whole from now on",
        ),
      ...(opts.engineApiKey ? { apiKey: opts.engineApiKey } : {}),
      ...(opts.engineTls ? { tls: opts.engineTls } : {}),
    });
    this.tokenizers = new ModelTokenizers({
      settings: { tokenizer: opts.kv.tokenizer, tokenizers: opts.kv.tokenizers },
      hub: opts.kv.hub,
      load: (dir) => this.tokenizer.preload(dir),
      log,
    });
  }

  /** `synced`: every discovery source has listed once (the warnings about what is missing wait for it). */
  start(synced?: () => boolean): void {
    if (synced) this.synced = synced;
    this.unsubscribe = this.catalog.onChange(() => this.queueReconcile());
    // the tokenizers the flags name load now, so that a missing or broken one is said at start-up
    this.tokenizers.start();
    this.reconcile();
  }

  async stop(): Promise<void> {
    this.unsubscribe?.();
    this.tokenizers.close();
    await Promise.all([this.events.close(), this.tokenizer.close()]);
  }

  /** The kvaware policy's question: this request's tokens (its keys at each endpoint's block size), or why there are none. */
  async keys(request: KvRequest, candidates: readonly Endpoint[], trace?: TraceSpan): Promise<RequestBlocks | KvFallbackReason> {
    const started = performance.now();
    // engine mode asks the model's endpoints in turn, starting one further each request (the next after a failure)
    const n = candidates.length;
    const first = n > 0 ? this.nextTarget++ % n : 0;
    const targets = n <= 1 ? candidates : [...candidates.slice(first), ...candidates.slice(0, first)];
    const adapter = this.catalog.model(request.model)?.adapter;
    // an adapter is tokenized as its base model
    const use = this.tokenizers.use(adapter ? adapter.parent : request.model);
    const outcome = await this.tokenizer.tokenize(request.model, request.body, targets, trace, use.mode);
    if (outcome.fallback !== undefined) return outcome.fallback;
    const source =
      outcome.source === 'engine'
        ? outcome.cached
          ? 'engine-cached'
          : outcome.resumedChars !== undefined
            ? 'engine-resumed'
            : 'engine'
        : outcome.source === 'path' && use.hub
          ? 'hub'
          : outcome.source;
    this.metrics.tokenized(source, (performance.now() - started) / 1000);
    return requestBlocks(outcome.tokens, adapter ? request.model : undefined);
  }

  /**
   * Tokens per KV-cache block of an endpoint's engine: what its vllm:cache_config_info says, else what its own events
   * declared, else --kv-block-size. One endpoint's events never set another's.
   */
  blockSizeOf(endpoint: Endpoint): number {
    return endpoint.cacheConfig?.blockSize ?? this.events.index.blockSize(endpoint.id) ?? this.opts.kv.blockSize;
  }

  /** A model's tokenizer as /engines, /v1/models and the dashboard show it (an alias's or adapter's: its model's). */
  tokenizerOf(model: string): TokenizerStatus | undefined {
    const view = this.catalog.model(model);
    return this.tokenizers.status(view?.aliasOf ?? view?.adapter?.parent ?? model);
  }

  /** What cannot work as meant now (src/router/kv/warnings.ts); the same list /engines and the dashboard show. */
  warnings(): KvWarning[] {
    return kvWarnings({
      models: this.modelEndpoints(),
      kvawarePolicy: this.opts.kvawarePolicy ?? false,
      synced: this.synced(),
      tokenizerModels: this.opts.kv.tokenizers.keys(),
      known: (name) => this.catalog.model(name) !== undefined,
      unavailable: this.tokenizers.failures(),
    });
  }

  /** Resolves once every tokenizer load started so far has ended (tests, and tools that wait for it). */
  tokenizersSettled(): Promise<void> {
    return this.tokenizers.settled();
  }

  /** Every model (not an alias or an adapter) with its endpoints, any state. */
  private modelEndpoints(): Map<string, Endpoint[]> {
    const out = new Map<string, Endpoint[]>();
    for (const m of this.catalog.models()) if (m.aliasOf === undefined && m.adapter === undefined) out.set(m.id, []);
    for (const e of this.catalog.endpoints()) for (const m of e.models) out.get(m)?.push(e);
    return out;
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

  /** Each warning once, as a WARN line (a tokenizer that cannot be had is said by ModelTokenizers, with its reason). */
  private sayWarnings(): void {
    for (const w of this.warnings()) {
      const key = `${w.kind} ${w.model}`;
      if (w.kind === 'tokenizer-unavailable' || this.warned.has(key)) continue;
      this.warned.add(key);
      this.log.warn({ model: w.model, warning: w.kind }, `kvaware: ${w.message}`);
    }
  }

  private queueReconcile(): void {
    if (this.reconcileQueued) return;
    this.reconcileQueued = true;
    setImmediate(() => {
      this.reconcileQueued = false;
      this.reconcile();
    });
  }

  /**
   * Every endpoint that names an event stream is followed, whatever its state: its cache outlives a failed probe. Each
   * model's tokenizer is chosen again (its endpoints' annotations and roots may have changed), and what cannot work is
   * said once.
   */
  private reconcile(): void {
    this.tokenizers.update(this.modelEndpoints());
    this.sayWarnings();
    const sources: KvSource[] = [];
    for (const e of this.catalog.endpoints()) {
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
