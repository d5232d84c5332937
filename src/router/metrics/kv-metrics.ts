// Metrics of KV-cache-aware routing: the engines' event streams as this router follows them (events by type, gaps,
// replays, rebuilds, restarts, malformed messages, blocks indexed), and each kvaware decision (how much of the prompt
// the chosen engine held, fallbacks by reason, tokenization time). Labels are fixed sets.
//
// Under --workers every worker follows the same streams and holds the same index, so the stream series are the same
// in each: the primary takes the largest (aggregator max), not the sum, which would count each event once per worker.
// Decisions are per request and add up.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { KvCounters } from '../kv/subscriber.js';
import { MALFORMED_REASONS } from '../kv/decode.js';
import { KV_FALLBACK_REASONS, type KvDecisionObserver, type KvFallbackReason } from '../kv/types.js';

/** What the metrics read at scrape time. */
export interface KvStreamView {
  counters(): KvCounters;
  /** blocks indexed over every endpoint */
  blocks(): number;
  /** endpoints followed, and those whose every stream is connected */
  endpoints(): { readonly followed: number; readonly connected: number };
  /** times the in-process tokenizer's worker thread was restarted */
  tokenizerRestarts(): number;
}

const RATIO_BUCKETS = [0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1];
const TOKENIZE_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1];

/** A counter whose value is read from elsewhere at scrape time (the subscribers keep the totals). */
function readCounter<L extends string>(
  registry: Registry,
  name: string,
  help: string,
  labelNames: readonly L[],
  read: (set: (labels: Partial<Record<L, string>>, value: number) => void) => void,
): void {
  new Counter({
    name,
    help,
    labelNames,
    aggregator: 'max',
    registers: [registry],
    collect() {
      this.reset();
      read((labels, value) => this.inc(labels, Math.max(0, value)));
    },
  });
}

export class KvMetrics implements KvDecisionObserver {
  private readonly matchedRatio: Histogram;
  private readonly fallbacks: Counter<'reason'>;
  private readonly tokenizeSeconds: Histogram<'source'>;

  constructor(registry: Registry, view: () => KvStreamView | undefined) {
    const registers = [registry];
    const counters = (): KvCounters | undefined => view()?.counters();
    readCounter(registry, 'llm_router_kv_events_total', 'KV-cache events applied from the engines, by type', ['type'], (set) => {
      const c = counters();
      set({ type: 'BlockStored' }, c?.stored ?? 0);
      set({ type: 'BlockRemoved' }, c?.removed ?? 0);
      set({ type: 'AllBlocksCleared' }, c?.cleared ?? 0);
    });
    readCounter(registry, 'llm_router_kv_event_gaps_total', "Sequence gaps seen in the engines' KV-cache event streams", [], (set) =>
      set({}, counters()?.gaps ?? 0),
    );
    readCounter(
      registry,
      'llm_router_kv_event_replays_total',
      "Replays asked of the engines to fill a gap, by result (failed: the gap could not be filled and the endpoint's blocks were rebuilt from the live stream)",
      ['result'],
      (set) => {
        const c = counters();
        set({ result: 'filled' }, Math.max(0, (c?.replays ?? 0) - (c?.replayFailures ?? 0)));
        set({ result: 'failed' }, c?.replayFailures ?? 0);
      },
    );
    readCounter(
      registry,
      'llm_router_kv_event_rebuilds_total',
      "Times an endpoint's indexed blocks were dropped to rebuild from the live stream, by reason (gap: a gap replay could not fill; restart: its sequence went back, the engine restarted)",
      ['reason'],
      (set) => {
        const c = counters();
        set({ reason: 'gap' }, c?.rebuilds ?? 0);
        set({ reason: 'restart' }, c?.restarts ?? 0);
      },
    );
    readCounter(
      registry,
      'llm_router_kv_events_malformed_total',
      'KV-cache event messages or events refused, by reason (logged once per reason and endpoint)',
      ['reason'],
      (set) => {
        const m = counters()?.malformed;
        for (const reason of MALFORMED_REASONS) set({ reason }, m?.[reason] ?? 0);
      },
    );
    // per process, not the same in every worker: the sum
    new Counter({
      name: 'llm_router_kvaware_tokenizer_restarts_total',
      help: "Times the in-process tokenizer's worker thread was restarted: a job's step ran far past its deadline (a template that loops, a pathological text), or the thread died; its caches were lost",
      registers,
      collect() {
        this.reset();
        this.inc(view()?.tokenizerRestarts() ?? 0);
      },
    });
    new Gauge({
      name: 'llm_router_kv_index_blocks',
      help: 'KV-cache blocks indexed over every endpoint (a block held by two endpoints counts twice)',
      aggregator: 'max',
      registers,
      collect() {
        this.set(view()?.blocks() ?? 0);
      },
    });
    new Gauge({
      name: 'llm_router_kv_event_endpoints',
      help: 'Endpoints whose KV-cache events the router follows, by whether every stream of theirs is connected',
      labelNames: ['connected'],
      aggregator: 'max',
      registers,
      collect() {
        const e = view()?.endpoints() ?? { followed: 0, connected: 0 };
        this.set({ connected: 'true' }, e.connected);
        this.set({ connected: 'false' }, e.followed - e.connected);
      },
    });
    this.matchedRatio = new Histogram({
      name: 'llm_router_kvaware_matched_ratio',
      help: "kvaware decisions by KV match: the leading blocks the chosen endpoint held / the prompt's blocks",
      buckets: RATIO_BUCKETS,
      registers,
    });
    this.fallbacks = new Counter({
      name: 'llm_router_kvaware_fallback_total',
      help: 'kvaware requests routed by prefixaware instead, by reason (no token ids, no endpoint holding the first block, every holder over the load bound, ...)',
      labelNames: ['reason'],
      registers,
    });
    for (const reason of KV_FALLBACK_REASONS) this.fallbacks.inc({ reason }, 0);
    this.tokenizeSeconds = new Histogram({
      name: 'llm_router_kvaware_tokenize_seconds',
      help: "Time to get a request's token ids, by source (engine: its /tokenize, engine-cached: a cached answer, engine-resumed: its /tokenize for the text after an earlier prompt's, path: the in-process tokenizer of a directory, hub: the in-process tokenizer fetched from the Hugging Face Hub, request: ids the request carried)",
      labelNames: ['source'],
      buckets: TOKENIZE_BUCKETS,
      registers,
    });
  }

  matched(_model: string, matched: number, blocks: number): void {
    this.matchedRatio.observe(blocks > 0 ? matched / blocks : 0);
  }

  fallback(_model: string, reason: KvFallbackReason): void {
    this.fallbacks.inc({ reason });
  }

  tokenized(source: 'engine' | 'engine-cached' | 'engine-resumed' | 'path' | 'hub' | 'request', seconds: number): void {
    this.tokenizeSeconds.observe({ source }, seconds);
  }
}
