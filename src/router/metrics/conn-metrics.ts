// The router's own connections: to the engines (its keep-alive pool per endpoint: connections open and busy, requests
// waiting for a free one under --max-connections-per-engine) and from operators (the dashboard's /events streams).
// Everything is read at scrape time. The pool series are one per endpoint URL the catalog lists (0 before the first
// request), so they are bounded by the catalog and go with the endpoint. Under --workers each worker has its own pools
// and streams: the primary sums them (prom-client's default aggregator).
import { Counter, Gauge, type Registry } from 'prom-client';
import type { ModelCatalog } from '../catalog/catalog.js';
import type { EngineClientStats } from '../core/engine.js';

/** What the metrics read at scrape time. */
export interface ConnectionSources {
  /** the engine pools (src/router/proxy/pools.ts): undefined for an endpoint no request has gone to yet */
  readonly pools: { stats(url: string): EngineClientStats | undefined };
  /** the /events streams (src/router/server/dashboard/) */
  readonly dashboard: { readonly clients: number; readonly dropped: number };
}

export class ConnectionMetrics {
  private sources: ConnectionSources | undefined;

  constructor(registry: Registry, catalog: ModelCatalog) {
    const registers = [registry];
    const metrics = this;
    /** each endpoint URL once, with its pool's figures */
    const perEndpoint = (set: (endpoint: string, s: EngineClientStats) => void): void => {
      const pools = metrics.sources?.pools;
      const seen = new Set<string>();
      for (const e of catalog.endpoints()) {
        if (seen.has(e.url)) continue;
        seen.add(e.url);
        set(e.url, pools?.stats(e.url) ?? { open: 0, busy: 0, queued: 0 });
      }
    };
    new Gauge({
      name: 'llm_router_engine_connections_open',
      help: 'Connections this router has open to each endpoint now (connecting, busy and idle keep-alive ones)',
      labelNames: ['endpoint'],
      registers,
      collect() {
        this.reset();
        perEndpoint((endpoint, s) => this.set({ endpoint }, s.open));
      },
    });
    new Gauge({
      name: 'llm_router_engine_connections_busy',
      help: 'Connections to each endpoint carrying a request now (one request per connection)',
      labelNames: ['endpoint'],
      registers,
      collect() {
        this.reset();
        perEndpoint((endpoint, s) => this.set({ endpoint }, s.busy));
      },
    });
    new Gauge({
      name: 'llm_router_engine_requests_queued',
      help: 'Requests waiting in this router for a connection to each endpoint, at --max-connections-per-engine',
      labelNames: ['endpoint'],
      registers,
      collect() {
        this.reset();
        perEndpoint((endpoint, s) => this.set({ endpoint }, s.queued));
      },
    });
    new Gauge({
      name: 'llm_router_dashboard_clients',
      help: 'Dashboard event streams (GET /events) open now',
      registers,
      collect() {
        this.set(metrics.sources?.dashboard.clients ?? 0);
      },
    });
    new Counter({
      name: 'llm_router_dashboard_clients_dropped_total',
      help: 'Dashboard event streams (GET /events) disconnected for reading too slowly',
      registers,
      collect() {
        this.reset();
        this.inc(metrics.sources?.dashboard.dropped ?? 0);
      },
    });
  }

  /** Exposes the engine pools and the dashboard's streams at scrape time. */
  watch(sources: ConnectionSources): void {
    this.sources = sources;
  }
}
