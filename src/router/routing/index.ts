// Builds the configured routing policy. Policies share one least-load instance for their fallbacks.
import type { RoutingLogic } from '../config/config.js';
import { ROUTING_LOGICS } from '../config/router-flags.js';
import { HeaderSelectedPolicy } from './header.js';
import { LeastLoadPolicy } from './least-load.js';
import type { RoutingPolicy } from './policy.js';
import { PrefixAwarePolicy } from './prefix-aware.js';
import { KvAwarePolicy } from './kv-aware.js';
import type { KvDecisionObserver, KvKeySource } from '../kv/types.js';
import type { KvIndexView } from '../kv/types.js';
import { RoundRobinPolicy } from './roundrobin.js';
import { SessionPolicy } from './session.js';

export interface PolicyOptions {
  /** session: the header carrying the session key (--session-key) */
  readonly sessionKey?: string;
  /** prefixaware: --prefix-block-chars, default 256 */
  readonly prefixBlockChars?: number;
  /** prefixaware: --prefix-balance-epsilon, default 0.25 */
  readonly prefixBalanceEpsilon?: number;
  /** --engine-stats-interval in ms: engine load older than 3 intervals is unknown; default 1 s */
  readonly engineStatsIntervalMs?: number;
  /** --allow-routing-header: honour x-llm-router-routing per request */
  readonly allowRoutingHeader?: boolean;
  /** kvaware: the index of what the engines' caches hold and where a request's block keys come from */
  readonly kv?: KvPolicyDeps;
  readonly now?: () => number;
  readonly random?: () => number;
}

export interface KvPolicyDeps {
  readonly index: KvIndexView;
  readonly keys: KvKeySource;
  readonly observer?: KvDecisionObserver;
  /** how long a prompt just sent counts as held by its engine before its events say so; default 10 s, 0 = never */
  readonly pendingMs?: number;
}

function prefixAwareOf(opts: PolicyOptions, leastLoad: LeastLoadPolicy): PrefixAwarePolicy {
  return new PrefixAwarePolicy({ blockChars: opts.prefixBlockChars, balanceEpsilon: opts.prefixBalanceEpsilon }, leastLoad);
}

/** kvaware over prefixaware; without an index (nothing wired) prefixaware alone */
function kvAwareOf(opts: PolicyOptions, leastLoad: LeastLoadPolicy): RoutingPolicy {
  const prefix = prefixAwareOf(opts, leastLoad);
  if (opts.kv === undefined) return prefix;
  return new KvAwarePolicy(
    {
      index: opts.kv.index,
      keys: opts.kv.keys,
      ...(opts.kv.observer ? { observer: opts.kv.observer } : {}),
      ...(opts.kv.pendingMs !== undefined ? { pendingMs: opts.kv.pendingMs } : {}),
      ...(opts.prefixBalanceEpsilon !== undefined ? { balanceEpsilon: opts.prefixBalanceEpsilon } : {}),
      ...(opts.engineStatsIntervalMs !== undefined ? { engineStatsIntervalMs: opts.engineStatsIntervalMs } : {}),
      ...(opts.now ? { now: opts.now } : {}),
    },
    prefix,
  );
}

function leastLoadOf(opts: PolicyOptions): LeastLoadPolicy {
  return new LeastLoadPolicy({
    ...(opts.engineStatsIntervalMs !== undefined ? { engineStatsIntervalMs: opts.engineStatsIntervalMs } : {}),
    ...(opts.now ? { now: opts.now } : {}),
    ...(opts.random ? { random: opts.random } : {}),
  });
}

/**
 * How a P/D request's prefill endpoint is picked: least load, with prefix affinity when the routing logic is
 * prefixaware, by KV match when it is kvaware (the prefill engine computes the prompt's KV; the decode engine is picked
 * by load).
 */
export function createPrefillPolicy(name: RoutingLogic, opts: PolicyOptions = {}): RoutingPolicy {
  const leastLoad = leastLoadOf(opts);
  if (name === 'kvaware') return kvAwareOf(opts, leastLoad);
  if (name !== 'prefixaware') return leastLoad;
  return prefixAwareOf(opts, leastLoad);
}

export function createPolicy(name: RoutingLogic, opts: PolicyOptions = {}): RoutingPolicy {
  const leastLoad = leastLoadOf(opts);
  const build = (logic: RoutingLogic): RoutingPolicy => {
    switch (logic) {
      case 'roundrobin':
        return new RoundRobinPolicy();
      case 'least-load':
        return leastLoad;
      case 'session':
        return new SessionPolicy(opts.sessionKey, leastLoad);
      case 'prefixaware':
        return prefixAwareOf(opts, leastLoad);
      case 'kvaware':
        return kvAwareOf(opts, leastLoad);
    }
  };
  const configured = build(name);
  if (!opts.allowRoutingHeader) return configured;
  const byName = new Map<string, RoutingPolicy>(ROUTING_LOGICS.map((logic) => [logic, logic === name ? configured : build(logic)]));
  return new HeaderSelectedPolicy(configured, byName);
}
