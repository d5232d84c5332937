// Gauges of state, computed at scrape time: the discovery informers, each endpoint (requests in flight, lifecycle
// state), each model (state, ready endpoints) and the scale-from-zero machinery per model (held, in flight, oldest
// held, wake stalled). Under --workers each worker has its own catalog and prober: a state is 1 when any worker sees it.
import { Gauge, type Registry } from 'prom-client';
import type { ModelCatalog } from '../catalog/catalog.js';
import type { EndpointState } from '../core/endpoint.js';
import type { ModelState } from '../core/model.js';

const ENDPOINT_STATES: readonly EndpointState[] = ['discovered', 'serving-api', 'ready', 'draining', 'failed'];
const MODEL_STATES: readonly ModelState[] = ['ready', 'scaled-to-zero', 'loading', 'unavailable'];

/** What the scale-from-zero machinery exposes per model at scrape time. */
export interface ScalingGauges {
  held(model: string): number;
  inFlight(model: string): number;
  oldestHeldSeconds(model: string): number;
  stalled(model: string): boolean;
}

/** llm_router_discovery_state, from `health()` at scrape time. */
export function registerDiscoveryState(registry: Registry, health: () => Readonly<Record<string, string>>): void {
  new Gauge({
    name: 'llm_router_discovery_state',
    help: 'State of each Kubernetes informer (1 for the current state: syncing, synced, forbidden, absent, erroring)',
    labelNames: ['resource', 'state'],
    aggregator: 'max',
    registers: [registry],
    collect() {
      this.reset();
      for (const [resource, state] of Object.entries(health())) this.set({ resource, state }, 1);
    },
  });
}

/** llm_router_endpoint_in_flight and llm_router_endpoint_state, from the catalog. */
export function registerEndpointGauges(registry: Registry, catalog: ModelCatalog): void {
  const registers = [registry];
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
      for (const e of catalog.endpoints()) for (const s of ENDPOINT_STATES) this.set({ endpoint: e.url, state: s }, e.state === s ? 1 : 0);
    },
  });
}

/** llm_router_model_state, from the catalog. */
export function registerModelStateGauge(registry: Registry, catalog: ModelCatalog): void {
  new Gauge({
    name: 'llm_router_model_state',
    help: 'State of each declared or served model (1 for the current state)',
    labelNames: ['model', 'state'],
    aggregator: 'max',
    registers: [registry],
    collect() {
      this.reset();
      for (const m of catalog.models()) for (const s of MODEL_STATES) this.set({ model: m.id, state: s }, m.status === s ? 1 : 0);
    },
  });
}

/**
 * The scale-from-zero gauges per model of `scaledModels()` (0 for a model with nothing, so models at zero replicas are
 * present), read from `gauges()` at scrape time.
 */
export function registerScalingGauges(registry: Registry, scaledModels: () => readonly string[], gauges: () => ScalingGauges): void {
  const registers = [registry];
  new Gauge({
    name: 'llm_router_model_requests_held',
    help: 'Requests held in the cold-start queue now, per model (0 for models with none, so models at zero replicas are present)',
    labelNames: ['model'],
    registers,
    collect() {
      this.reset();
      for (const m of scaledModels()) this.set({ model: m }, gauges().held(m));
    },
  });
  new Gauge({
    name: 'llm_router_model_requests_in_flight',
    help: 'Requests being forwarded to an engine now, per model (0 for models with none)',
    labelNames: ['model'],
    registers,
    collect() {
      this.reset();
      for (const m of scaledModels()) this.set({ model: m }, gauges().inFlight(m));
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
      for (const m of scaledModels()) this.set({ model: m }, gauges().oldestHeldSeconds(m));
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
      for (const m of scaledModels()) this.set({ model: m }, gauges().stalled(m) ? 1 : 0);
    },
  });
}

/** llm_router_model_ready_endpoints, from the catalog. */
export function registerReadyEndpointsGauge(registry: Registry, catalog: ModelCatalog): void {
  new Gauge({
    name: 'llm_router_model_ready_endpoints',
    help: 'Ready endpoints of each declared or served model',
    labelNames: ['model'],
    aggregator: 'max',
    registers: [registry],
    collect() {
      this.reset();
      for (const m of catalog.models()) this.set({ model: m.id }, m.readyEndpoints);
    },
  });
}
