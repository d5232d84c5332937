// Metrics of things that happen, counted when they happen: failed attempts on an engine, failovers, mid-stream
// migrations, failed Kubernetes lists and watches, measured cold starts.
import { Counter, Histogram, type Registry } from 'prom-client';
import type { MigrationOutcome } from '../core/forward.js';

/** a cold start takes seconds (a small model on a warm node) to most of an hour (a large one downloaded first) */
const COLD_START_BUCKETS: number[] = [1, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600];

export class EventMetrics {
  private readonly upstreamFailures: Counter<'endpoint' | 'kind'>;
  private readonly coldStarts: Histogram<'model' | 'kind'>;
  /** models with cold-start series, so that they go with the model */
  private readonly coldStartModels = new Set<string>();
  private readonly failovers: Counter<'model'>;
  private readonly migrations: Counter<'model' | 'outcome'>;
  private readonly discoveryErrors: Counter<'resource' | 'reason'>;

  constructor(registry: Registry) {
    const registers = [registry];
    this.upstreamFailures = new Counter({
      name: 'llm_router_upstream_failures_total',
      help: 'Failed attempts to forward to an engine, by endpoint and kind of failure',
      labelNames: ['endpoint', 'kind'],
      registers,
    });
    // under --workers every worker measures the same cold starts with its own prober: the primary keeps one (max)
    this.coldStarts = new Histogram({
      name: 'llm_router_model_cold_start_seconds',
      help: 'Measured cold starts per model: kind="load" from an endpoint discovered to ready (one the router saw loading), kind="wake" from the model leaving scaled-to-zero to its first ready endpoint',
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
    this.migrations = new Counter({
      name: 'llm_router_migrations_total',
      help: 'Streams whose engine failed after the first byte (--migration-limit), by model and outcome: migrated (continued on another endpoint), completed (a continuation reached the end), failed (a continuation got no stream), refused (must not be continued: n, logprobs, echo, seed, tool calls, ...), limit, no-endpoint',
      labelNames: ['model', 'outcome'],
      registers,
    });
    this.discoveryErrors = new Counter({
      name: 'llm_router_discovery_errors_total',
      help: 'Failed Kubernetes lists and watches, by resource and reason (forbidden, connection, http-NNN)',
      labelNames: ['resource', 'reason'],
      registers,
    });
  }

  coldStart(model: string, kind: 'load' | 'wake', seconds: number): void {
    this.coldStartModels.add(model);
    this.coldStarts.observe({ model, kind }, seconds);
  }

  /** Removes the cold-start series of every model not in `keep` (bounded cardinality). */
  forgetColdStarts(keep: ReadonlySet<string>): void {
    for (const model of this.coldStartModels) {
      if (keep.has(model)) continue;
      this.coldStartModels.delete(model);
      for (const kind of ['load', 'wake']) this.coldStarts.remove({ model, kind });
    }
  }

  upstreamFailure(endpointUrl: string, kind: string): void {
    this.upstreamFailures.inc({ endpoint: endpointUrl, kind });
  }

  discoveryError(resource: string, reason: string): void {
    this.discoveryErrors.inc({ resource, reason });
  }

  failover(model: string): void {
    this.failovers.inc({ model });
  }

  migration(model: string, outcome: MigrationOutcome): void {
    this.migrations.inc({ model, outcome });
  }
}
