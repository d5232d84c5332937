// Round robin per model: each model keeps its own counter so that traffic for one model cannot skew another's rotation.
import type { Endpoint } from '../core/endpoint.js';
import type { RouteRequest, RoutingPolicy } from './policy.js';

export class RoundRobinPolicy implements RoutingPolicy {
  readonly name = 'roundrobin';
  private readonly counters = new Map<string, number>();

  pick(candidates: readonly Endpoint[], request: RouteRequest, exclude?: ReadonlySet<Endpoint>): Endpoint | undefined {
    const n = candidates.length;
    if (n === 0) return undefined;
    const start = this.counters.get(request.model) ?? 0;
    this.counters.set(request.model, (start + 1) % 1_000_000_007);
    for (let i = 0; i < n; i++) {
      const e = candidates[(start + i) % n] as Endpoint;
      if (!exclude?.has(e)) return e;
    }
    return undefined;
  }
}
