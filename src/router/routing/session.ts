// session: requests carrying the same value of the --session-key header go to the same endpoint while it is ready,
// by rendezvous (highest-random-weight) hashing over the ready endpoints. Every router replica computes the same
// winner with no shared state, and when an endpoint leaves only the sessions it held move. No key: least-load.
import type { Endpoint } from '../core/endpoint.js';
import { fnv1a, mix32, rendezvousIndex } from './hash.js';
import type { RouteRequest, RoutingPolicy } from './policy.js';

export class SessionPolicy implements RoutingPolicy {
  readonly name = 'session';
  private readonly header: string;

  constructor(
    header: string | undefined,
    private readonly fallback: RoutingPolicy,
  ) {
    // node:http lower-cases incoming header names; an empty name matches nothing
    this.header = (header ?? '').toLowerCase();
  }

  pick(candidates: readonly Endpoint[], request: RouteRequest, exclude?: ReadonlySet<Endpoint>): Endpoint | undefined {
    let value = this.header === '' ? undefined : request.headers[this.header];
    if (Array.isArray(value)) value = value[0];
    if (typeof value !== 'string' || value === '') return this.fallback.pick(candidates, request, exclude);
    const i = rendezvousIndex(candidates, mix32(fnv1a(value)), exclude);
    return i < 0 ? undefined : candidates[i];
  }
}
