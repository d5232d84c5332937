// prefixaware: prefix affinity computed statelessly. The key is a hash of the prompt's leading blocks
// (prompt-key.ts); the endpoint is the rendezvous winner for that key among the endpoints that are not overloaded.
// Every router replica sends the same prefix to the same engine, so its prefix cache keeps hitting, with no shared
// state and no memory that grows with traffic.
//
// Bounded load (consistent hashing with bounded loads): an endpoint is skipped when taking this request would lift
// its in-flight count above (1 + epsilon) x the mean in-flight count (the new request included, rounded up to a
// whole request). A hot prefix then spills to the next endpoints in its own rendezvous order, the same order on
// every replica, and no endpoint ever carries more than that bound. Requests with no prompt: least-load.
import type { Endpoint } from '../core/endpoint.js';
import { boundedRendezvousIndex } from './hash.js';
import type { RouteRequest, RoutingPolicy } from './policy.js';
import { promptPrefixKey } from './prompt-key.js';

export interface PrefixAwareOptions {
  /** default 256 */
  readonly blockChars?: number;
  /** default 0.25 */
  readonly balanceEpsilon?: number;
}

export class PrefixAwarePolicy implements RoutingPolicy {
  readonly name = 'prefixaware';
  private readonly blockChars: number;
  private readonly spread: number;

  constructor(
    opts: PrefixAwareOptions,
    private readonly fallback: RoutingPolicy,
  ) {
    this.blockChars = Math.max(1, Math.floor(opts.blockChars ?? 256));
    this.spread = 1 + Math.max(0, opts.balanceEpsilon ?? 0.25);
  }

  pick(candidates: readonly Endpoint[], request: RouteRequest, exclude?: ReadonlySet<Endpoint>): Endpoint | undefined {
    const n = candidates.length;
    if (n === 0) return undefined;
    const key = promptPrefixKey(request.body, this.blockChars);
    if (key === undefined) return this.fallback.pick(candidates, request, exclude);
    const i = boundedRendezvousIndex(candidates, key, this.spread, exclude);
    return i < 0 ? undefined : candidates[i];
  }
}
