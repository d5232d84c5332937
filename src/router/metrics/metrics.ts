// The router's metrics: RouterMetrics registers every family (each part in its own module: request-metrics.ts,
// event-metrics.ts, state-gauges.ts, and the P/D, LoRA, KV, scaler and connection ones) and is the one surface the app
// uses; plus combining the metrics of --workers. Gauges over catalog state are computed at scrape time, so the request
// path only touches plain per-model numbers.
import { AggregatorRegistry, Registry, collectDefaultMetrics, type MetricObjectWithValues, type MetricValue } from 'prom-client';
import type { ModelCatalog } from '../catalog/catalog.js';
import { PdMetrics } from './pd-metrics.js';
import { LoraMetrics } from './lora-metrics.js';
import { KvMetrics, type KvStreamView } from './kv-metrics.js';
import { FlowMetrics, type FlowView } from './flow-metrics.js';
import { ScalerMetrics } from './scaler-metrics.js';
import { ConnectionMetrics } from './conn-metrics.js';
import { EventMetrics } from './event-metrics.js';
import type { MigrationOutcome } from '../core/forward.js';
import {
  newModelTally,
  observe,
  registerFastPathCounter,
  registerRequestMetrics,
  type FastPathCounts,
  type ModelTally,
} from './request-metrics.js';
import { registerSpanDrops, type SpanDrops } from './otel-metrics.js';
import {
  registerDiscoveryState,
  registerEndpointGauges,
  registerModelStateGauge,
  registerReadyEndpointsGauge,
  registerScalingGauges,
  type ScalingGauges,
} from './state-gauges.js';

/** Label used for model names no source declares, so arbitrary client input cannot create label values. */
export const UNKNOWN_MODEL_LABEL = '__unknown__';

export type { FastPathCounts } from './request-metrics.js';
export type { ScalingGauges } from './state-gauges.js';

/**
 * prom-client's default metrics include three gauges named *_total (nodejs_active_{handles,requests,resources}_total),
 * which promtool rejects (a _total suffix promises a counter); their per-type siblings carry the same numbers.
 */
const MISNAMED_DEFAULT_GAUGES = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'];

/**
 * prom-client's process and Node.js metrics (named process_* and nodejs_*), prefixed llm_router_
 * (llm_router_process_cpu_user_seconds_total), minus the misnamed gauges.
 */
function registerProcessMetrics(registry: Registry): void {
  const prefix = 'llm_router_';
  collectDefaultMetrics({ register: registry, prefix });
  for (const name of MISNAMED_DEFAULT_GAUGES) registry.removeSingleMetric(prefix + name);
}

/**
 * The models series exist for: every declared or served one (aliases count as their target), from the declaration on;
 * and the ones demand is counted for (an adapter's demand is its base's).
 */
function modelLists(catalog: ModelCatalog): { declaredModels: () => string[]; scaledModels: () => string[] } {
  return {
    declaredModels: () =>
      catalog
        .models()
        .filter((m) => !m.aliasOf)
        .map((m) => m.id),
    scaledModels: () =>
      catalog
        .models()
        .filter((m) => !m.aliasOf && !m.adapter)
        .map((m) => m.id),
  };
}

/** What the primary of --workers is asked (combined) and gathers from each worker (local). */
export const METRICS_TOPICS = { combined: 'metrics:combined', local: 'metrics:local' } as const;

/** One worker's metrics, as the primary of --workers gathers them to sum (prom-client's cluster format). */
export type WorkerMetrics = MetricObjectWithValues<MetricValue<string>>[];

/** Pure: the exposition of several workers' metrics, each family combined by its `aggregator` (sum unless set). */
export async function aggregateExposition(workers: readonly WorkerMetrics[]): Promise<string> {
  return AggregatorRegistry.aggregate(workers as WorkerMetrics[]).metrics();
}

/**
 * Pure: the counter families (counters and histograms: their samples only grow) of several parts combined into one,
 * each by its `aggregator` as the exposition combines them. Under --workers the primary keeps the counts of workers that
 * are gone this way, so that a worker's restart never takes its counts out of the instance's (Prometheus would read
 * the drop as a counter reset). Gauges are left out: a gone worker holds nothing.
 */
export function retainedCounters(parts: readonly WorkerMetrics[]): WorkerMetrics {
  const families = new Map<string, { family: WorkerMetrics[number]; values: Map<string, MetricValue<string>> }>();
  for (const part of parts)
    for (const family of part) {
      const type = String(family.type);
      if (type !== 'counter' && type !== 'histogram') continue;
      const max = (family as { aggregator?: string }).aggregator === 'max';
      let f = families.get(family.name);
      if (!f) {
        f = { family, values: new Map() };
        families.set(family.name, f);
      }
      for (const v of family.values) {
        const labels = Object.entries(v.labels)
          .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
          .map(([k, x]) => `${k}=${String(x)}`)
          .join(',');
        const key = `${(v as { metricName?: string }).metricName ?? ''}{${labels}}`;
        const prev = f.values.get(key);
        const value = prev === undefined ? v.value : max ? Math.max(prev.value, v.value) : prev.value + v.value;
        f.values.set(key, { ...v, value });
      }
    }
  return [...families.values()].map(({ family, values }) => ({ ...family, values: [...values.values()] }));
}

export class RouterMetrics {
  readonly registry = new Registry();
  /** prefill/decode disaggregation (src/router/metrics/pd-metrics.ts) */
  readonly pd: PdMetrics;
  /** LoRA adapters (src/router/metrics/lora-metrics.ts) */
  readonly lora: LoraMetrics;
  /** KV-cache events and kvaware decisions (src/router/metrics/kv-metrics.ts) */
  readonly kv: KvMetrics;
  private kvView: KvStreamView | undefined;
  /** flow control: queues, saturation, waits, refusals (src/router/metrics/flow-metrics.ts) */
  readonly flow: FlowMetrics;
  private flowView: FlowView | undefined;
  /** the KEDA scaler's peers and errors (src/router/metrics/scaler-metrics.ts) */
  readonly scaler: ScalerMetrics;
  /** engine pools' connections and dashboard streams (src/router/metrics/conn-metrics.ts) */
  readonly connections: ConnectionMetrics;
  /** failures, failovers, discovery errors, cold starts (src/router/metrics/event-metrics.ts) */
  private readonly events: EventMetrics;
  private discoveryHealth: () => Readonly<Record<string, string>> = () => ({});
  private scaling: ScalingGauges = { held: () => 0, inFlight: () => 0, oldestHeldSeconds: () => 0, stalled: () => false };
  /** set in a worker of --workers: the primary sums every worker's metrics */
  private clusterExposition: (() => Promise<string>) | undefined;
  private fastPath: () => FastPathCounts = () => ({ answered: 0, handedOver: 0 });
  /** tracing's dropped spans, when tracing is on */
  private spanDrops: () => SpanDrops | undefined = () => undefined;
  /** per model, so that the request path does no label hashing and builds no strings */
  private readonly tallies = new Map<string, ModelTally>();

  /** Registers every family, in the order the exposition lists them. */
  constructor(catalog: ModelCatalog, opts: { defaultMetrics?: boolean } = {}) {
    if (opts.defaultMetrics !== false) registerProcessMetrics(this.registry);
    this.pd = new PdMetrics(this.registry, catalog);
    this.lora = new LoraMetrics(this.registry, catalog);
    this.kv = new KvMetrics(this.registry, () => this.kvView);
    this.flow = new FlowMetrics(this.registry, () => this.flowView);
    this.scaler = new ScalerMetrics(this.registry);
    this.connections = new ConnectionMetrics(this.registry, catalog);
    const { declaredModels, scaledModels } = modelLists(catalog);
    // a model neither declared nor served any more loses its series (bounded cardinality)
    catalog.onChange((e) => {
      if (e.type !== 'declarations' && e.type !== 'endpoint-removed' && e.type !== 'adapters') return;
      const keep = new Set(declaredModels());
      for (const model of this.tallies.keys())
        if (model !== '' && model !== UNKNOWN_MODEL_LABEL && !keep.has(model)) this.tallies.delete(model);
      this.events.forgetColdStarts(keep);
    });
    registerRequestMetrics(this.registry, this.tallies, declaredModels);
    this.events = new EventMetrics(this.registry);
    registerFastPathCounter(this.registry, () => this.fastPath());
    registerSpanDrops(this.registry, () => this.spanDrops());
    registerDiscoveryState(this.registry, () => this.discoveryHealth());
    registerEndpointGauges(this.registry, catalog);
    registerModelStateGauge(this.registry, catalog);
    registerScalingGauges(this.registry, scaledModels, () => this.scaling);
    registerReadyEndpointsGauge(this.registry, catalog);
  }

  private tally(model: string): ModelTally {
    let t = this.tallies.get(model);
    if (!t) {
      t = newModelTally();
      this.tallies.set(model, t);
    }
    return t;
  }

  /** Counts an arrival for a model the catalog knows (any answer). */
  demanded(model: string): void {
    this.tally(model).demand++;
  }

  /**
   * Records a finished request; `model` is the canonical name, '' when the request named none, or UNKNOWN_MODEL_LABEL;
   * `code` is the stable code of an error the router answered itself.
   */
  answered(model: string, status: number, seconds: number, code?: string): void {
    const t = this.tally(model);
    t.byStatus.set(status, (t.byStatus.get(status) ?? 0) + 1);
    if (code !== undefined) t.byCode.set(code, (t.byCode.get(code) ?? 0) + 1);
    observe(t.duration, seconds);
  }

  /** The first body byte of a request's answer went to the client, `seconds` after its admission (labels as answered()). */
  firstByte(model: string, seconds: number): void {
    observe(this.tally(model).firstByte, seconds);
  }

  /** A cold start was measured (src/router/scaling/cold-start.ts). */
  coldStart(model: string, kind: 'load' | 'wake', seconds: number): void {
    this.events.coldStart(model, kind, seconds);
  }

  upstreamFailure(endpointUrl: string, kind: string): void {
    this.events.upstreamFailure(endpointUrl, kind);
  }

  discoveryError(resource: string, reason: string): void {
    this.events.discoveryError(resource, reason);
  }

  /** Exposes the KV-cache event streams (counters, blocks indexed) at scrape time. */
  watchKv(view: KvStreamView): void {
    this.kvView = view;
  }

  /** Exposes flow control's queues and pools' saturation at scrape time. */
  watchFlow(view: FlowView): void {
    this.flowView = view;
  }

  /** Exposes hold-queue and wake-alarm state per model at scrape time. */
  watchScaling(gauges: ScalingGauges): void {
    this.scaling = gauges;
  }

  /** Exposes the fast path's counts at scrape time. */
  watchFastPath(counts: () => FastPathCounts): void {
    this.fastPath = counts;
  }

  /** Exposes the state of each discovery informer at scrape time. */
  /** Tracing's dropped spans (llm_router_otel_spans_dropped_total). */
  watchSpanDrops(drops: () => SpanDrops): void {
    this.spanDrops = drops;
  }

  watchDiscovery(health: () => Readonly<Record<string, string>>): void {
    this.discoveryHealth = health;
  }

  failover(model: string): void {
    this.events.failover(model);
  }

  /** A stream broken mid-way, migrated or not (llm_router_migrations_total). */
  migration(model: string, outcome: MigrationOutcome): void {
    this.events.migration(model, outcome);
  }

  /** In a worker of --workers: /metrics answers with every worker's metrics combined (by the primary). */
  useClusterExposition(fetch: () => Promise<string>): void {
    this.clusterExposition = fetch;
  }

  /** This process's metrics in prom-client's cluster format, for the primary to combine. */
  workerMetrics(): Promise<WorkerMetrics> {
    return this.registry.getMetricsAsJSON() as Promise<WorkerMetrics>;
  }

  async exposition(): Promise<{ contentType: string; body: string }> {
    const body = this.clusterExposition ? await this.clusterExposition() : await this.registry.metrics();
    return { contentType: this.registry.contentType, body };
  }
}
