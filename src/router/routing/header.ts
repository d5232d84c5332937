// The per-request override: `x-llm-router-routing: <policy>` picks another configured policy for one request.
// Only built with --allow-routing-header; an unknown value falls back to the configured policy.
import type { Endpoint } from '../core/endpoint.js';
import type { TraceSpan } from '../core/trace.js';
import type { Dispatch, RouteRequest, RoutingPolicy } from './policy.js';

const ROUTING_HEADER = 'x-llm-router-routing';

export class HeaderSelectedPolicy implements RoutingPolicy {
  readonly name: string;

  constructor(
    private readonly configured: RoutingPolicy,
    private readonly byName: ReadonlyMap<string, RoutingPolicy>,
  ) {
    this.name = configured.name;
  }

  prepare(candidates: readonly Endpoint[], request: RouteRequest, trace?: TraceSpan): Promise<void> {
    return this.chosen(request).prepare?.(candidates, request, trace) ?? Promise.resolve();
  }

  pick(candidates: readonly Endpoint[], request: RouteRequest, exclude?: ReadonlySet<Endpoint>, trace?: TraceSpan): Endpoint | undefined {
    const chosen = this.chosen(request);
    if (request.note !== undefined) request.note.policy ??= chosen.name;
    return chosen.pick(candidates, request, exclude, trace);
  }

  dispatched(endpoint: Endpoint, request: RouteRequest): Dispatch | undefined {
    return this.chosen(request).dispatched?.(endpoint, request);
  }

  private chosen(request: RouteRequest): RoutingPolicy {
    const asked = request.headers[ROUTING_HEADER];
    return typeof asked === 'string' ? (this.byName.get(asked.trim().toLowerCase()) ?? this.configured) : this.configured;
  }
}
