// Metrics of LoRA adapters: loads by result and how long they took, unloads, requests per adapter (and whether they
// waited for a load), and on how many endpoints each adapter is loaded. Labels are bounded: an adapter label is a name
// the catalog knows (declared or listed by an engine), results and reasons are fixed sets, and an adapter's series go
// with it when it is neither declared nor served any more.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { ModelCatalog } from '../catalog/catalog.js';
import type { AdapterObserver, LoadResult, UnloadReason } from '../core/lora.js';

const RESULTS: readonly LoadResult[] = ['loaded', 'already-loaded', 'failed', 'unsupported'];
const REASONS: readonly UnloadReason[] = ['evicted'];
/** a load reads weights from disk or downloads them: from a tenth of a second to minutes */
const LOAD_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

export class LoraMetrics implements AdapterObserver {
  private readonly loads: Counter<'adapter' | 'result'>;
  private readonly loadSeconds: Histogram<'adapter'>;
  private readonly unloads: Counter<'adapter' | 'reason'>;
  private readonly requests: Counter<'adapter' | 'waited'>;
  /** adapters with series, so that one that goes away takes them along */
  private readonly seen = new Set<string>();

  constructor(
    registry: Registry,
    private readonly catalog: ModelCatalog,
  ) {
    const registers = [registry];
    this.loads = new Counter({
      name: 'llm_router_adapter_loads_total',
      help: 'Adapter load calls the router made, by adapter and result (loaded, already-loaded: another router had loaded it, failed, unsupported: the engine does not load adapters at run time)',
      labelNames: ['adapter', 'result'],
      registers,
    });
    this.loadSeconds = new Histogram({
      name: 'llm_router_adapter_load_duration_seconds',
      help: 'Time of each adapter load call that loaded the adapter, by adapter',
      labelNames: ['adapter'],
      buckets: LOAD_BUCKETS,
      registers,
    });
    this.unloads = new Counter({
      name: 'llm_router_adapter_unloads_total',
      help: 'Adapters the router unloaded, by adapter and reason (evicted: its slot was needed by another adapter)',
      labelNames: ['adapter', 'reason'],
      registers,
    });
    this.requests = new Counter({
      name: 'llm_router_adapter_requests_total',
      help: 'Requests for each adapter forwarded to an engine, by whether they waited for a load of it first',
      labelNames: ['adapter', 'waited'],
      registers,
    });
    new Gauge({
      name: 'llm_router_adapter_loaded_endpoints',
      help: 'Endpoints that list each declared or served adapter as loaded',
      labelNames: ['adapter'],
      aggregator: 'max',
      registers,
      collect() {
        this.reset();
        for (const m of catalog.models()) if (m.adapter && !m.aliasOf) this.set({ adapter: m.id }, m.adapter.loadedEndpoints);
      },
    });
    catalog.onChange((e) => {
      if (e.type !== 'declarations' && e.type !== 'endpoint-removed' && e.type !== 'adapters') return;
      for (const adapter of this.seen) if (catalog.model(adapter) === undefined) this.forget(adapter);
    });
  }

  loaded(e: { adapter: string; result: LoadResult; seconds: number }): void {
    if (!this.known(e.adapter)) return;
    this.loads.inc({ adapter: e.adapter, result: e.result });
    if (e.result === 'loaded') this.loadSeconds.observe({ adapter: e.adapter }, e.seconds);
  }

  unloaded(e: { adapter: string; reason: UnloadReason }): void {
    if (this.known(e.adapter)) this.unloads.inc({ adapter: e.adapter, reason: e.reason });
  }

  request(adapter: string, waited: boolean): void {
    if (this.known(adapter)) this.requests.inc({ adapter, waited: String(waited) });
  }

  /** Only names the catalog knows become label values. */
  private known(adapter: string): boolean {
    if (this.catalog.model(adapter)?.adapter === undefined) return false;
    this.seen.add(adapter);
    return true;
  }

  private forget(adapter: string): void {
    this.seen.delete(adapter);
    for (const result of RESULTS) this.loads.remove({ adapter, result });
    this.loadSeconds.remove({ adapter });
    for (const reason of REASONS) this.unloads.remove({ adapter, reason });
    for (const waited of ['true', 'false']) this.requests.remove({ adapter, waited });
  }
}
