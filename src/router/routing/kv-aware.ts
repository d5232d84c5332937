// kvaware: send a request where its prompt is already cached, as the engines themselves report it. The index
// (router/kv, built on every replica from the engines' KV-cache events) says how many leading blocks of the
// request's token ids each candidate holds; the candidate that holds the most (GPU blocks over offloaded ones) less a
// small share for its load wins, among those within the same load bound as prefixaware: an endpoint whose in-flight
// count would exceed (1 + epsilon) x the mean is skipped, so one hot prefix cannot pile onto one engine.
//
// The bound stretches by `boundSlack` (2) requests for a holder that holds at least `stretchGain` (half) of the
// prompt more than any endpoint within the bound: sending it elsewhere would compute that half again. At low
// concurrency the bound ceil(1.25 x (total + 1) / n) is 1, so without the stretch one request running on the only
// engine holding a conversation sent its next turn elsewhere to be computed again (on Mooncake's public trace most of
// what kvaware lost against one cache of the engines' combined capacity; bench/kv-model.ts). A prefix several engines
// hold (a shared system prompt) gains too little to stretch, and still spreads. Only in-flight counts differ between
// replicas, as for the bound itself.
//
// No tokens, no match or a tie go to prefixaware's rendezvous order, which every replica computes alike.
import type { Endpoint } from '../core/endpoint.js';
import { isFresh } from '../core/endpoint.js';
import type { TraceSpan } from '../core/trace.js';
import { KV_BLOCKS, KV_FALLBACK, KV_MATCHED_BLOCKS } from '../tracing/attributes.js';
import type { BlockKey } from '../kv/block-key.js';
import type { KvDecisionObserver, KvFallbackReason, KvIndexView, KvKeySource } from '../kv/types.js';
import { PendingPrefixes } from '../kv/pending.js';
import type { RouteRequest, RoutingPolicy } from './policy.js';

export interface KvAwareOptions {
  readonly index: KvIndexView;
  readonly keys: KvKeySource;
  readonly observer?: KvDecisionObserver;
  /** default 0.25, as prefixaware's */
  readonly balanceEpsilon?: number;
  /** how much a block held in an offload tier counts against one on the GPU; default 0.5 */
  readonly offloadWeight?: number;
  /** how much of the prompt (as a fraction) the most loaded candidate gives up against an idle one; default 0.1 */
  readonly loadWeight?: number;
  /** requests over the load bound a holder may go, when it saves `stretchGain` more of the prompt; default 2 */
  readonly boundSlack?: number;
  /** how much more of the prompt (a fraction) a holder over the bound must hold than any endpoint within it; default 0.5 */
  readonly stretchGain?: number;
  readonly engineStatsIntervalMs?: number;
  /**
   * How long a prompt this router just sent counts as held by its engine before the engine's events say so
   * (src/router/kv/pending.ts); 0 = never. Default 10 s.
   */
  readonly pendingMs?: number;
  /** keys remembered for that, at most; default 262,144 */
  readonly pendingMaxKeys?: number;
  readonly now?: () => number;
}

type Prepared = readonly BlockKey[] | KvFallbackReason;

export class KvAwarePolicy implements RoutingPolicy {
  readonly name = 'kvaware';
  private readonly prepared = new WeakMap<RouteRequest, Prepared>();
  private readonly spread: number;
  private readonly offloadWeight: number;
  private readonly loadWeight: number;
  private readonly slack: number;
  private readonly stretchGain: number;
  private readonly statsIntervalMs: number;
  private readonly now: () => number;
  private readonly pending: PendingPrefixes;

  constructor(
    private readonly opts: KvAwareOptions,
    /** prefixaware: the order used without a match and to break ties */
    private readonly fallback: RoutingPolicy,
  ) {
    this.spread = 1 + Math.max(0, opts.balanceEpsilon ?? 0.25);
    this.offloadWeight = Math.min(1, Math.max(0, opts.offloadWeight ?? 0.5));
    this.loadWeight = Math.max(0, opts.loadWeight ?? 0.1);
    this.slack = Math.max(0, Math.round(opts.boundSlack ?? 2));
    this.stretchGain = Math.max(0, opts.stretchGain ?? 0.5);
    this.statsIntervalMs = opts.engineStatsIntervalMs ?? 1000;
    this.now = opts.now ?? Date.now;
    this.pending = new PendingPrefixes(opts.pendingMs ?? 10_000, opts.pendingMaxKeys ?? 262_144, this.now);
  }

  async prepare(candidates: readonly Endpoint[], request: RouteRequest, trace?: TraceSpan): Promise<void> {
    if (this.prepared.has(request)) return;
    let keys: Prepared;
    try {
      keys = await this.opts.keys.keys(request, candidates, trace);
    } catch {
      keys = 'tokenizer-error';
    }
    this.prepared.set(request, keys);
  }

  pick(candidates: readonly Endpoint[], request: RouteRequest, exclude?: ReadonlySet<Endpoint>, trace?: TraceSpan): Endpoint | undefined {
    const n = candidates.length;
    if (n === 0) return undefined;
    const keys = this.prepared.get(request);
    // a failover pick (exclude set) is not a new decision: count each request once
    const count = exclude === undefined;
    if (keys === undefined || typeof keys === 'string')
      return this.fallBack(candidates, request, exclude, keys ?? 'no-prompt', count, trace);
    trace?.set(KV_BLOCKS, keys.length);
    if (keys.length === 0) return this.fallBack(candidates, request, exclude, 'too-short', count, trace);
    const chosen = this.byMatch(candidates, keys, request, exclude, count, trace);
    // the engine chosen is about to hold this prompt, whichever way it was chosen
    if (chosen !== undefined) this.pending.record(keys, chosen.id);
    return chosen;
  }

  private byMatch(
    candidates: readonly Endpoint[],
    keys: readonly BlockKey[],
    request: RouteRequest,
    exclude: ReadonlySet<Endpoint> | undefined,
    count: boolean,
    trace: TraceSpan | undefined,
  ): Endpoint | undefined {
    const n = candidates.length;
    const ids: string[] = [];
    for (const c of candidates) ids.push(c.id);
    const matches = this.opts.index.match(keys, ids);
    // only for a prefix no engine reports yet: once one does, its events (stores and evictions) decide alone
    const sent = matches.size === 0 ? this.pending.leading(keys) : undefined;
    if (matches.size === 0 && sent === undefined) return this.fallBack(candidates, request, exclude, 'no-match', count, trace);

    let total = 0;
    let maxLoad = 0;
    const loads = new Float64Array(n);
    const freshSince = this.now();
    for (let i = 0; i < n; i++) {
      const e = candidates[i] as Endpoint;
      total += e.inFlight;
      const load = e.inFlight + (isFresh(e.engineLoad, freshSince, this.statsIntervalMs) ? (e.engineLoad?.otherLoad ?? 0) : 0);
      loads[i] = load;
      if (load > maxLoad) maxLoad = load;
    }
    // prefixaware's bound, and the stretch a holder that saves enough more than any endpoint within it may go up to
    const room = Math.ceil((this.spread * (total + 1)) / n);
    const stretch = room + this.slack;
    let bestScore = 0;
    let bestMatched = 0;
    let bestHeldInRoom = 0;
    let tied: Endpoint[] = [];
    let overScore = 0;
    let overHeld = 0;
    let overMatched = 0;
    let overTied: Endpoint[] = [];
    for (let i = 0; i < n; i++) {
      const e = candidates[i] as Endpoint;
      const busy = e.inFlight;
      if (exclude?.has(e) || busy >= stretch) continue;
      let m = matches.get(e.id);
      // sent there moments ago: held on its GPU once its prefill has run
      if (sent !== undefined && sent.endpointId === e.id && sent.length > (m?.gpu ?? 0))
        m = { gpu: sent.length, total: Math.max(sent.length, m?.total ?? 0) };
      if (m === undefined) continue;
      const held = m.gpu + this.offloadWeight * (m.total - m.gpu);
      const score = held / keys.length - (maxLoad > 0 ? (this.loadWeight * (loads[i] as number)) / maxLoad : 0);
      if (busy < room) {
        if (held > bestHeldInRoom) bestHeldInRoom = held;
        if (tied.length === 0 || score > bestScore + 1e-9) {
          bestScore = score;
          bestMatched = m.total;
          tied = [e];
        } else if (score >= bestScore - 1e-9) tied.push(e);
      } else if (overTied.length === 0 || held > overHeld + 1e-9 || (held >= overHeld - 1e-9 && score > overScore + 1e-9)) {
        overHeld = held;
        overScore = score;
        overMatched = m.total;
        overTied = [e];
      } else if (held >= overHeld - 1e-9 && score >= overScore - 1e-9) overTied.push(e);
    }
    // over the bound but within the stretch: taken only for a longer prefix, by at least `stretchGain` of the prompt
    if (overTied.length > 0 && overHeld > bestHeldInRoom + 1e-9 && (overHeld - bestHeldInRoom) / keys.length >= this.stretchGain - 1e-9) {
      tied = overTied;
      bestMatched = overMatched;
    }
    // every holder is over the bound (or excluded): the prefix spills as prefixaware would spill it
    if (tied.length === 0) return this.fallBack(candidates, request, exclude, 'overloaded', count, trace);
    if (count) this.opts.observer?.matched(request.model, bestMatched, keys.length);
    trace?.set(KV_MATCHED_BLOCKS, bestMatched);
    if (tied.length === 1) return tied[0];
    return this.fallback.pick(tied, request) ?? tied[0];
  }

  private fallBack(
    candidates: readonly Endpoint[],
    request: RouteRequest,
    exclude: ReadonlySet<Endpoint> | undefined,
    reason: KvFallbackReason,
    count: boolean,
    trace?: TraceSpan,
  ): Endpoint | undefined {
    if (count) this.opts.observer?.fallback(request.model, reason);
    trace?.set(KV_FALLBACK, reason);
    return this.fallback.pick(candidates, request, exclude);
  }
}
