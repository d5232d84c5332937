// Metrics of prefill/decode disaggregation: calls per role and their latency, prefill failures, decode-only
// fallbacks, and the ready endpoints of each role of a P/D model. Labels are bounded: models are the catalog's
// (a P/D request has resolved to one), roles, kinds and reasons are fixed sets, and a model's series go with it.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { ModelCatalog } from '../catalog/catalog.js';
import type { FailureKind } from '../core/forward.js';
import type { DecodeOnlyReason, PdObserver, PdRole, PrefillFailure } from '../core/pd.js';

const ROLES: readonly PdRole[] = ['prefill', 'decode'];
const FAILURE_KINDS: readonly PrefillFailure[] = [
  ...([
    'connect',
    'reset',
    'engine-5xx',
    'engine-busy',
    'model-missing',
    'headers-timeout',
    'idle-timeout',
    'total-timeout',
    'protocol',
    'other',
  ] satisfies FailureKind[]),
  'engine-4xx',
  'invalid-answer',
];
const DECODE_ONLY_REASONS: readonly DecodeOnlyReason[] = ['prefill-failed', 'no-prefill', 'short-prompt'];

const BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

export class PdMetrics implements PdObserver {
  private readonly calls: Counter<'model' | 'role'>;
  private readonly durations: Histogram<'model' | 'role'>;
  private readonly failures: Counter<'model' | 'kind'>;
  private readonly fallbacks: Counter<'model' | 'reason'>;
  /** models with P/D series, so that a model that goes away takes them along */
  private readonly seen = new Set<string>();

  constructor(registry: Registry, catalog: ModelCatalog) {
    const registers = [registry];
    this.calls = new Counter({
      name: 'llm_router_pd_requests_total',
      help: 'Calls the router made to prefill and decode endpoints for requests of P/D models, by model and role',
      labelNames: ['model', 'role'],
      registers,
    });
    this.durations = new Histogram({
      name: 'llm_router_pd_request_duration_seconds',
      help: 'Time of each call to a prefill or decode endpoint for a P/D request (decode: until the end of its answer), by model and role',
      labelNames: ['model', 'role'],
      buckets: BUCKETS,
      registers,
    });
    this.failures = new Counter({
      name: 'llm_router_pd_prefill_failures_total',
      help: 'Prefill calls that did not give a usable answer, by model and kind (engine-4xx is passed to the client)',
      labelNames: ['model', 'kind'],
      registers,
    });
    this.fallbacks = new Counter({
      name: 'llm_router_pd_decode_only_total',
      help: 'Requests of P/D models sent to a decode endpoint alone, by model and reason (prefill-failed, no-prefill, short-prompt)',
      labelNames: ['model', 'reason'],
      registers,
    });
    new Gauge({
      name: 'llm_router_model_role_ready_endpoints',
      help: 'Ready endpoints of each role of a P/D model (decode counts decode and both endpoints)',
      labelNames: ['model', 'role'],
      aggregator: 'max',
      registers,
      collect() {
        this.reset();
        for (const m of catalog.models()) {
          if (!m.pd || m.aliasOf) continue;
          this.set({ model: m.id, role: 'prefill' }, m.pd.prefill.ready);
          this.set({ model: m.id, role: 'decode' }, m.pd.decode.ready);
        }
      },
    });
    catalog.onChange((e) => {
      if (e.type !== 'declarations' && e.type !== 'endpoint-removed') return;
      for (const model of this.seen) if (catalog.model(model) === undefined) this.forget(model);
    });
  }

  call(model: string, role: PdRole, seconds: number): void {
    this.seen.add(model);
    this.calls.inc({ model, role });
    this.durations.observe({ model, role }, seconds);
  }

  prefillFailed(model: string, kind: PrefillFailure): void {
    this.seen.add(model);
    this.failures.inc({ model, kind });
  }

  decodeOnly(model: string, reason: DecodeOnlyReason): void {
    this.seen.add(model);
    this.fallbacks.inc({ model, reason });
  }

  private forget(model: string): void {
    this.seen.delete(model);
    for (const role of ROLES) {
      this.calls.remove({ model, role });
      this.durations.remove({ model, role });
    }
    for (const kind of FAILURE_KINDS) this.failures.remove({ model, kind });
    for (const reason of DECODE_ONLY_REASONS) this.fallbacks.remove({ model, reason });
  }
}
