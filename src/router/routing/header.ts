// The per-request override: `x-llm-router-routing: <policy>` picks another configured policy for one request.
// Only built with --allow-routing-header; an unknown value falls back to the configured policy.
import type { Endpoint } from '../core/endpoint.js';
import type { RouteRequest, RoutingPolicy } from './policy.js';

const ROUTING_HEADER = 'x-llm-router-routing';

export class HeaderSelectedPolicy implements RoutingPolicy {
  readonly name: string;

  constructor(
    private readonly configured: RoutingPolicy,
    private readonly byName: ReadonlyMap<string, RoutingPolicy>,
  ) {
    this.name = configured.name;
  }

  pick(candidates: readonly Endpoint[], request: RouteRequest, exclude?: ReadonlySet<Endpoint>): Endpoint | undefined {
    const asked = request.headers[ROUTING_HEADER];
    const policy = typeof asked === 'string' ? (this.byName.get(asked.trim().toLowerCase()) ?? this.configured) : this.configured;
    return policy.pick(candidates, request, exclude);
  }
}
