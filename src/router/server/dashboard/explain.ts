// Why a model is in its state, in one sentence from the facts the router has: the first thing an operator asks.
import type { Endpoint } from '../../core/endpoint.js';
import type { AdapterView, ModelView } from '../../core/model.js';

const plural = (n: number, word: string): string => `${n} ${word}${n === 1 ? '' : 's'}`;

function probeOf(e: Endpoint): string {
  return e.lastProbe ? e.lastProbe.detail : 'not probed yet';
}

export interface ModelFacts {
  /** requests held for it now */
  readonly held: number;
  /** the stuck-wake alarm is raised */
  readonly stalled: boolean;
  /** an adapter: the state of its base model */
  readonly baseStatus?: ModelView['status'];
}

/** An adapter: where it is loaded, or why its base cannot serve it. */
function explainAdapter(m: ModelView, adapter: AdapterView, facts: ModelFacts): string {
  const base = adapter.parent;
  if (m.status === 'ready')
    return m.readyEndpoints > 0
      ? `adapter of ${base}, loaded on ${plural(m.readyEndpoints, 'ready endpoint')}`
      : `adapter of ${base}, not loaded yet: the first request loads it on an endpoint of ${base}`;
  if (adapter.path === undefined) return `adapter of ${base} that no source declares; the endpoints that list it are not ready`;
  if (facts.baseStatus === 'ready') return `adapter of ${base}: none of its ready endpoints loads adapters at run time`;
  return `adapter of ${base}, which is ${facts.baseStatus ?? 'neither declared nor served'}`;
}

export function explainModel(m: ModelView, endpoints: readonly Endpoint[], facts: ModelFacts): string {
  if (m.adapter) return explainAdapter(m, m.adapter, facts);
  const pd = m.pd;
  if (pd && pd.missing.length > 0) {
    // a P/D model is held back (or served decode-only) by the roles with no ready endpoint: explain those
    const missing = `P/D (${pd.protocol}), no ready ${pd.missing.join(' or ')} endpoint`;
    if (m.status === 'ready') return `${explainModel({ ...m, pd: undefined }, endpoints, facts)}; ${missing}: decode-only`;
    const side = endpoints.filter((e) => pd.missing.includes(e.role === 'prefill' ? 'prefill' : 'decode'));
    return `${missing}: ${explainModel({ ...m, pd: undefined }, side, facts)}`;
  }
  const live = endpoints.filter((e) => !e.draining);
  const waiting = facts.held > 0 ? `; ${plural(facts.held, 'request')} held` : '';
  if (m.status !== 'ready' && m.unreachable) return `unreachable: ${m.unreachable}${waiting}`;
  switch (m.status) {
    case 'ready': {
      const coming = live.filter((e) => e.state === 'discovered' || e.state === 'serving-api').length;
      const failed = live.filter((e) => e.state === 'failed');
      const more = coming > 0 ? `; ${coming} coming up` : '';
      const failing = failed[0] ? `; ${failed[0].url} failed: ${failed[0].lastError ?? probeOf(failed[0])}` : '';
      return `${m.readyEndpoints} of ${plural(m.endpoints, 'endpoint')} ready${more}${failing}`;
    }
    case 'loading': {
      const coming = live.filter((e) => e.state === 'discovered' || e.state === 'serving-api');
      const first = coming[0];
      if (!first) return `replicas are wanted, but no endpoint is discovered yet (no Ready pod)${waiting}`;
      return `${plural(coming.length, 'endpoint')} coming up; ${first.url} is ${first.state}: ${probeOf(first)}${waiting}`;
    }
    case 'unavailable': {
      const renamed = live.find((e) => e.servesInstead !== undefined);
      if (renamed?.servesInstead)
        return `${renamed.url} serves ${renamed.servesInstead.map((n) => JSON.stringify(n)).join(', ')}, not ${JSON.stringify(m.aliasOf ?? m.id)}: declare that name or an alias${waiting}`;
      const failed = live.find((e) => e.state === 'failed');
      if (failed) return `every endpoint failed; ${failed.url}: ${failed.lastError ?? probeOf(failed)}${waiting}`;
      return `only draining endpoints are left, and no source declares it${waiting}`;
    }
    case 'scaled-to-zero': {
      const declared = m.declaredBy.length > 0 ? `declared by ${m.declaredBy.join(', ')}` : 'declared';
      if (facts.stalled)
        return `no endpoint (${declared}); it has had demand past the wake alarm: check its autoscaler and workload${waiting}`;
      return `no endpoint (${declared})${waiting}`;
    }
  }
}
