// Every metric name the router exports, in one place. Gauges over catalog state are computed at scrape time,
// so the request path only touches two counters and one histogram.
import {
  AggregatorRegistry,
  Counter,
  Gauge,
  Histogram,
  Registry,
  collectDefaultMetrics,
  type Metric,
  type MetricObjectWithValues,
  type MetricValue,
} from 'prom-client';
import type { ModelCatalog } from '../catalog/catalog.js';
import type { EndpointState } from '../core/endpoint.js';
import type { ModelState } from '../core/model.js';
import { PdMetrics } from './pd-metrics.js';
import { LoraMetrics } from './lora-metrics.js';
import { KvMetrics, type KvStreamView } from './kv-metrics.js';
import { ScalerMetrics } from './scaler-metrics.js';

/** Label used for model names no source declares, so arbitrary client input cannot create label values. */
export const UNKNOWN_MODEL_LABEL = '__unknown__';

const ENDPOINT_STATES: readonly EndpointState[] = ['discovered', 'serving-api', 'ready', 'draining', 'failed'];
const MODEL_STATES: readonly ModelState[] = ['ready', 'scaled-to-zero', 'loading', 'unavailable'];

/** What the scale-from-zero machinery exposes per model at scrape time. */
export interface ScalingGauges {
  held(model: string): number;
  inFlight(model: string): number;
  oldestHeldSeconds(model: string): number;
  stalled(model: string): boolean;
}

/**
 * prom-client's default metrics include three gauges named *_total (nodejs_active_{handles,requests,resources}_total),
 * which promtool rejects (a _total suffix promises a counter); their per-type siblings carry the same numbers.
 */
const MISNAMED_DEFAULT_GAUGES = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'];

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

const DURATION_BUCKETS: readonly number[] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];
/** a cold start takes seconds (a small model on a warm node) to most of an hour (a large one downloaded first) */
const COLD_START_BUCKETS: number[] = [1, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600];

/** What the request path counts for one model: plain numbers, turned into Prometheus samples only at scrape time. */
interface ModelTally {
  demand: number;
  readonly byStatus: Map<number, number>;
  /** answers the router made itself, by their stable error code */
  readonly byCode: Map<string, number>;
  /** llm_router_request_duration_seconds */
  readonly duration: Tally;
  /** llm_router_time_to_first_byte_seconds */
  readonly firstByte: Tally;
}

/** One histogram's observations: per bucket of DURATION_BUCKETS, plus +Inf (not cumulative), their sum and count. */
interface Tally {
  readonly buckets: Float64Array;
  sum: number;
  count: number;
}

function newTally(): Tally {
  return { buckets: new Float64Array(DURATION_BUCKETS.length + 1), sum: 0, count: 0 };
}

function observe(t: Tally, seconds: number): void {
  let i = 0;
  while (i < DURATION_BUCKETS.length && seconds > (DURATION_BUCKETS[i] as number)) i++;
  (t.buckets[i] as number)++;
  t.sum += seconds;
  t.count++;
}

interface HistogramSample {
  readonly metricName: string;
  readonly labels: Readonly<Record<string, string | number>>;
  readonly value: number;
}

/**
 * A per-model histogram of the request path (llm_router_request_duration_seconds, llm_router_time_to_first_byte_seconds)
 * as a prom-client metric whose samples are computed from the tallies at scrape time: prom-client's Histogram hashes
 * its labels on every observe(), which the request path should not pay for.
 */
class TallyHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly tallies: ReadonlyMap<string, ModelTally>,
    private readonly pick: (t: ModelTally) => Tally,
  ) {}

  get(): { name: string; help: string; type: string; aggregator: string; values: HistogramSample[] } {
    const values: HistogramSample[] = [];
    for (const [model, m] of this.tallies) {
      const t = this.pick(m);
      if (t.count === 0) continue;
      let cumulative = 0;
      for (let i = 0; i <= DURATION_BUCKETS.length; i++) {
        cumulative += t.buckets[i] as number;
        values.push({
          metricName: `${this.name}_bucket`,
          labels: { le: i < DURATION_BUCKETS.length ? (DURATION_BUCKETS[i] as number) : '+Inf', model },
          value: cumulative,
        });
      }
      values.push({ metricName: `${this.name}_sum`, labels: { model }, value: t.sum });
      values.push({ metricName: `${this.name}_count`, labels: { model }, value: t.count });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  reset(): void {
    // the tallies are cumulative by definition; nothing to reset
  }
}

export interface FastPathCounts {
  readonly answered: number;
  readonly handedOver: number;
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
  /** the KEDA scaler's peers and errors (src/router/metrics/scaler-metrics.ts) */
  readonly scaler: ScalerMetrics;
  private readonly upstreamFailures: Counter<'endpoint' | 'kind'>;
  private readonly failovers: Counter<'model'>;
  private readonly discoveryErrors: Counter<'resource' | 'reason'>;
  private readonly coldStarts: Histogram<'model' | 'kind'>;
  /** models with cold-start series, so that they go with the model */
  private readonly coldStartModels = new Set<string>();
  private discoveryHealth: () => Readonly<Record<string, string>> = () => ({});
  private scaling: ScalingGauges = { held: () => 0, inFlight: () => 0, oldestHeldSeconds: () => 0, stalled: () => false };
  /** set in a worker of --workers: the primary sums every worker's metrics */
  private clusterExposition: (() => Promise<string>) | undefined;
  private fastPath: () => FastPathCounts = () => ({ answered: 0, handedOver: 0 });
  /** per model, so that the request path does no label hashing and builds no strings */
  private readonly tallies = new Map<string, ModelTally>();

  constructor(catalog: ModelCatalog, opts: { defaultMetrics?: boolean } = {}) {
    const registers = [this.registry];
    // prom-client's default metrics are named process_* and nodejs_*: llm_router_process_cpu_user_seconds_total
    const prefix = 'llm_router_';
    if (opts.defaultMetrics !== false) {
      collectDefaultMetrics({ register: this.registry, prefix });
      for (const name of MISNAMED_DEFAULT_GAUGES) this.registry.removeSingleMetric(prefix + name);
    }
    this.pd = new PdMetrics(this.registry, catalog);
    this.lora = new LoraMetrics(this.registry, catalog);
    this.kv = new KvMetrics(this.registry, () => this.kvView);
    this.scaler = new ScalerMetrics(this.registry);
    const tallies = this.tallies;
    /** every declared or served model (aliases count as their target): their series exist from the declaration on */
    const declaredModels = (): string[] =>
      catalog
        .models()
        .filter((m) => !m.aliasOf)
        .map((m) => m.id);
    /** the models demand is counted for, from their declaration on: an adapter's demand is its base's */
    const scaledModels = (): string[] =>
      catalog
        .models()
        .filter((m) => !m.aliasOf && !m.adapter)
        .map((m) => m.id);
    // a model neither declared nor served any more loses its series (bounded cardinality)
    catalog.onChange((e) => {
      if (e.type !== 'declarations' && e.type !== 'endpoint-removed' && e.type !== 'adapters') return;
      const keep = new Set(declaredModels());
      for (const model of tallies.keys()) if (model !== '' && model !== UNKNOWN_MODEL_LABEL && !keep.has(model)) tallies.delete(model);
      for (const model of this.coldStartModels) {
        if (keep.has(model)) continue;
        this.coldStartModels.delete(model);
        for (const kind of ['load', 'wake']) this.coldStarts.remove({ model, kind });
      }
    });
    new Counter({
      name: 'llm_router_requests_total',
      help: 'Requests answered, by model and HTTP status',
      labelNames: ['model', 'status'],
      registers,
      collect() {
        this.reset();
        for (const [model, t] of tallies) for (const [status, n] of t.byStatus) this.inc({ model, status: String(status) }, n);
      },
    });
    new Counter({
      name: 'llm_router_errors_total',
      help: 'Inference requests the router answered with its own error, by model and the error code (model_not_found, queue_full, ...)',
      labelNames: ['model', 'code'],
      registers,
      collect() {
        this.reset();
        for (const [model, t] of tallies) for (const [code, n] of t.byCode) this.inc({ model, code }, n);
      },
    });
    this.registry.registerMetric(
      new TallyHistogram(
        'llm_router_request_duration_seconds',
        'Time from request arrival to the end of the response, by model',
        tallies,
        (t) => t.duration,
      ) as unknown as Metric,
    );
    this.registry.registerMetric(
      new TallyHistogram(
        'llm_router_time_to_first_byte_seconds',
        'Time from request admission to the first body byte sent to the client (streams included: their first event), by model',
        tallies,
        (t) => t.firstByte,
      ) as unknown as Metric,
    );
    new Counter({
      name: 'llm_router_model_demand_total',
      help: 'Requests that arrived for a declared model, whatever the answer (503 included): the demand signal for autoscalers',
      labelNames: ['model'],
      registers,
      collect() {
        this.reset();
        // at 0 from the declaration on, so that rate() and increase() count the very first request to a model at zero;
        // an adapter has its own series too (its requests also count under its base, which is what scales)
        for (const model of declaredModels()) this.inc({ model }, tallies.get(model)?.demand ?? 0);
      },
    });
    this.upstreamFailures = new Counter({
      name: 'llm_router_upstream_failures_total',
      help: 'Failed attempts to forward to an engine, by endpoint and kind of failure',
      labelNames: ['endpoint', 'kind'],
      registers,
    });
    // under --workers every worker measures the same cold starts with its own prober: the primary keeps one (max)
    this.coldStarts = new Histogram({
      name: 'llm_router_model_cold_start_seconds',
      help: 'Measured cold starts per model: kind="load" from an endpoint discovered to ready, kind="wake" from the model leaving scaled-to-zero to its first ready endpoint',
      labelNames: ['model', 'kind'],
      buckets: COLD_START_BUCKETS,
      aggregator: 'max',
      registers,
    });
    this.failovers = new Counter({
      name: 'llm_router_failovers_total',
      help: 'Requests retried on another endpoint before any byte reached the client',
      labelNames: ['model'],
      registers,
    });
    this.discoveryErrors = new Counter({
      name: 'llm_router_discovery_errors_total',
      help: 'Failed Kubernetes lists and watches, by resource and reason (forbidden, connection, http-NNN)',
      labelNames: ['resource', 'reason'],
      registers,
    });
    const metrics = this;
    new Counter({
      name: 'llm_router_fast_path_total',
      help: 'Requests the fast path answered (outcome="answered"), and connections it handed to node:http (outcome="handed-over")',
      labelNames: ['outcome'],
      registers,
      collect() {
        this.reset();
        const c = metrics.fastPath();
        this.inc({ outcome: 'answered' }, c.answered);
        this.inc({ outcome: 'handed-over' }, c.handedOver);
      },
    });
    // under --workers each worker has its own catalog and prober: a state is 1 when any worker sees it
    new Gauge({
      name: 'llm_router_discovery_state',
      help: 'State of each Kubernetes informer (1 for the current state: syncing, synced, forbidden, absent, erroring)',
      labelNames: ['resource', 'state'],
      aggregator: 'max',
      registers,
      collect() {
        this.reset();
        for (const [resource, state] of Object.entries(metrics.discoveryHealth())) this.set({ resource, state }, 1);
      },
    });
    new Gauge({
      name: 'llm_router_endpoint_in_flight',
      help: 'Requests this router is forwarding to each endpoint now',
      labelNames: ['endpoint'],
      registers,
      collect() {
        this.reset();
        for (const e of catalog.endpoints()) this.set({ endpoint: e.url }, e.inFlight);
      },
    });
    new Gauge({
      name: 'llm_router_endpoint_state',
      help: 'Lifecycle state of each endpoint (1 for the current state)',
      labelNames: ['endpoint', 'state'],
      aggregator: 'max',
      registers,
      collect() {
        this.reset();
        for (const e of catalog.endpoints())
          for (const s of ENDPOINT_STATES) this.set({ endpoint: e.url, state: s }, e.state === s ? 1 : 0);
      },
    });
    new Gauge({
      name: 'llm_router_model_state',
      help: 'State of each declared or served model (1 for the current state)',
      labelNames: ['model', 'state'],
      aggregator: 'max',
      registers,
      collect() {
        this.reset();
        for (const m of catalog.models()) for (const s of MODEL_STATES) this.set({ model: m.id, state: s }, m.status === s ? 1 : 0);
      },
    });
    new Gauge({
      name: 'llm_router_model_requests_held',
      help: 'Requests held in the cold-start queue now, per model (0 for models with none, so models at zero replicas are present)',
      labelNames: ['model'],
      registers,
      collect() {
        this.reset();
        for (const m of scaledModels()) this.set({ model: m }, metrics.scaling.held(m));
      },
    });
    new Gauge({
      name: 'llm_router_model_requests_in_flight',
      help: 'Requests being forwarded to an engine now, per model (0 for models with none)',
      labelNames: ['model'],
      registers,
      collect() {
        this.reset();
        for (const m of scaledModels()) this.set({ model: m }, metrics.scaling.inFlight(m));
      },
    });
    new Gauge({
      name: 'llm_router_model_oldest_held_seconds',
      help: 'Age of the oldest request held for each model (0 when none is held)',
      labelNames: ['model'],
      aggregator: 'max',
      registers,
      collect() {
        this.reset();
        for (const m of scaledModels()) this.set({ model: m }, metrics.scaling.oldestHeldSeconds(m));
      },
    });
    new Gauge({
      name: 'llm_router_model_wake_stalled',
      help: '1 while a model has had demand longer than --wake-alarm-seconds with no endpoint even discovered',
      labelNames: ['model'],
      aggregator: 'max',
      registers,
      collect() {
        this.reset();
        for (const m of scaledModels()) this.set({ model: m }, metrics.scaling.stalled(m) ? 1 : 0);
      },
    });
    new Gauge({
      name: 'llm_router_model_ready_endpoints',
      help: 'Ready endpoints of each declared or served model',
      labelNames: ['model'],
      aggregator: 'max',
      registers,
      collect() {
        this.reset();
        for (const m of catalog.models()) this.set({ model: m.id }, m.readyEndpoints);
      },
    });
  }

  private tally(model: string): ModelTally {
    let t = this.tallies.get(model);
    if (!t) {
      t = {
        demand: 0,
        byStatus: new Map(),
        byCode: new Map(),
        duration: newTally(),
        firstByte: newTally(),
      };
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
    this.coldStartModels.add(model);
    this.coldStarts.observe({ model, kind }, seconds);
  }

  upstreamFailure(endpointUrl: string, kind: string): void {
    this.upstreamFailures.inc({ endpoint: endpointUrl, kind });
  }

  discoveryError(resource: string, reason: string): void {
    this.discoveryErrors.inc({ resource, reason });
  }

  /** Exposes the KV-cache event streams (counters, blocks indexed) at scrape time. */
  watchKv(view: KvStreamView): void {
    this.kvView = view;
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
  watchDiscovery(health: () => Readonly<Record<string, string>>): void {
    this.discoveryHealth = health;
  }

  failover(model: string): void {
    this.failovers.inc({ model });
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
