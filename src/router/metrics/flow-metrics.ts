// Metrics of flow control (--flow-control, src/router/flow): what waits per model and priority (requests, bytes), how
// long requests waited (by model, priority and tenant: configured tenants by name, every other `other`, so that a
// client cannot grow the label set), each model pool's saturation, and refusals by reason. Under --workers each worker
// queues its own requests: the queue gauges and counters add up; saturation is read from the same engines in every
// worker, so the primary takes the largest.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

/** What flow control shows at scrape time. */
export interface FlowView {
  /** each model with flow state: its pool's saturation, and per priority band what waits */
  snapshot(): ReadonlyArray<{
    readonly model: string;
    readonly saturation: number;
    readonly bands: ReadonlyArray<{ readonly priority: number; readonly count: number; readonly bytes: number }>;
  }>;
}

export const FLOW_REFUSAL_REASONS = ['overloaded', 'queue_full', 'queue_timeout', 'shutdown'] as const;

const WAIT_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

export class FlowMetrics {
  private readonly wait: Histogram<'model' | 'priority' | 'tenant'>;
  private readonly refusals: Counter<'model' | 'reason'>;
  private tenants: (tenant: string) => boolean = () => false;

  constructor(registry: Registry, view: () => FlowView | undefined) {
    const registers = [registry];
    new Gauge({
      name: 'llm_router_flow_queued_requests',
      help: 'Requests waiting in the router for room on a saturated pool (--flow-control), by model and priority',
      labelNames: ['model', 'priority'],
      registers,
      collect() {
        this.reset();
        for (const m of view()?.snapshot() ?? [])
          for (const b of m.bands) this.set({ model: m.model, priority: String(b.priority) }, b.count);
      },
    });
    new Gauge({
      name: 'llm_router_flow_queued_bytes',
      help: 'Request body bytes waiting in the router (--flow-control), by model and priority',
      labelNames: ['model', 'priority'],
      registers,
      collect() {
        this.reset();
        for (const m of view()?.snapshot() ?? [])
          for (const b of m.bands) this.set({ model: m.model, priority: String(b.priority) }, b.bytes);
      },
    });
    new Gauge({
      name: 'llm_router_flow_pool_saturation',
      help: "A model pool's saturation (--flow-control): the mean of its engines' max(waiting / --flow-queue-depth-threshold, KV-cache use / --flow-kv-cache-threshold); 1 or more is saturated",
      labelNames: ['model'],
      aggregator: 'max',
      registers,
      collect() {
        this.reset();
        for (const m of view()?.snapshot() ?? []) this.set({ model: m.model }, m.saturation);
      },
    });
    this.wait = new Histogram({
      name: 'llm_router_flow_wait_seconds',
      help: 'How long requests waited in the router (--flow-control) before they went on, timed out or their client left, by model, priority and tenant (configured tenants; others: other)',
      labelNames: ['model', 'priority', 'tenant'],
      buckets: WAIT_BUCKETS,
      registers,
    });
    this.refusals = new Counter({
      name: 'llm_router_flow_refusals_total',
      help: 'Requests flow control refused, by model and reason: overloaded (sheddable while saturated), queue_full (over a cap), queue_timeout (waited --flow-queue-timeout), shutdown',
      labelNames: ['model', 'reason'],
      registers,
    });
  }

  /** Tenants named in the configuration get their own label value; every other is `other`. */
  watchTenants(known: (tenant: string) => boolean): void {
    this.tenants = known;
  }

  /** A request left its queue after `ms`. */
  waited(model: string, priority: number, tenant: string, ms: number): void {
    this.wait.observe({ model, priority: String(priority), tenant: this.tenants(tenant) ? tenant : 'other' }, ms / 1000);
  }

  refused(model: string, reason: (typeof FLOW_REFUSAL_REASONS)[number]): void {
    this.refusals.inc({ model, reason });
  }
}
