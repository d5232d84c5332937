// The request path's metrics: per model, plain numbers counted on each request (no label hashing, no strings built),
// turned into Prometheus samples only at scrape time: requests by status, the router's own errors by code, request
// duration and time to first byte (histograms), demand; and the fast path's counts.
import { Counter, type Metric, type Registry } from 'prom-client';

const DURATION_BUCKETS: readonly number[] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

/** What the request path counts for one model: plain numbers, turned into Prometheus samples only at scrape time. */
export interface ModelTally {
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

export function observe(t: Tally, seconds: number): void {
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

/** A model's tallies, all at zero. */
export function newModelTally(): ModelTally {
  return {
    demand: 0,
    byStatus: new Map(),
    byCode: new Map(),
    duration: newTally(),
    firstByte: newTally(),
  };
}

/**
 * Registers the request metrics computed from `tallies` at scrape time: llm_router_requests_total,
 * llm_router_errors_total, llm_router_request_duration_seconds, llm_router_time_to_first_byte_seconds and
 * llm_router_model_demand_total (at 0 for each of `demandModels()` from its declaration on).
 */
export function registerRequestMetrics(
  registry: Registry,
  tallies: ReadonlyMap<string, ModelTally>,
  demandModels: () => readonly string[],
): void {
  const registers = [registry];
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
  registry.registerMetric(
    new TallyHistogram(
      'llm_router_request_duration_seconds',
      'Time from request arrival to the end of the response, by model',
      tallies,
      (t) => t.duration,
    ) as unknown as Metric,
  );
  registry.registerMetric(
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
      for (const model of demandModels()) this.inc({ model }, tallies.get(model)?.demand ?? 0);
    },
  });
}

export interface FastPathCounts {
  readonly answered: number;
  readonly handedOver: number;
}

/** Registers llm_router_fast_path_total, read from `counts()` at scrape time. */
export function registerFastPathCounter(registry: Registry, counts: () => FastPathCounts): void {
  new Counter({
    name: 'llm_router_fast_path_total',
    help: 'Requests the fast path answered (outcome="answered"), and connections it handed to node:http (outcome="handed-over")',
    labelNames: ['outcome'],
    registers: [registry],
    collect() {
      this.reset();
      const c = counts();
      this.inc({ outcome: 'answered' }, c.answered);
      this.inc({ outcome: 'handed-over' }, c.handedOver);
    },
  });
}
