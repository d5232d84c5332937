// kvaware: send a request where it costs the least to serve, counted in prompt tokens, from what the engines say.
//
// A candidate's cost is what it would have to compute, the prompt's tokens its KV cache does not hold (the index built
// on every replica from the engines' KV-cache events says how many leading blocks it holds; a block in an offload tier
// counts half), plus the work already queued on it, in the same tokens:
//  - the prefills this router has sent there whose answer has not begun (each with the tokens it left to compute when
//    it was sent; the forwarders report the answer's first byte through `dispatched`), and
//  - the requests other clients run or queue there beyond their usual share, from the engine's scraped metrics: other
//    replicas (and other --workers) send where this router sends as often as not, so what they run on an engine in
//    proportion to what this router ran there at the scrape is already weighed by this router's own work; counting it
//    again from a snapshot up to seconds old sent every replica away from where the others had been. What exceeds that
//    proportion (a client of its own, a replica routing otherwise) counts, each request as this router's own in-flight
//    requests leave prefill work on average.
// Computing again what only one other engine holds weighs `copyWeight` (3) a token, not 1: the second copy takes room
// in a cache that then holds less of everything else, and the conversation's later turns could have gone to one place.
// A prefix two or more engines hold (a shared system prompt) weighs `sharedWeight` (0.1): copying it further is how its
// load spreads, so an engine without it is taken as soon as the holders have a little more queued.
// The cheapest candidate wins: a conversation stays on the engine that holds it until that engine's queue costs more
// than computing it elsewhere, and a prompt whose cached part is a prefix several engines hold goes to the least loaded
// engine, so no engine sits idle while others queue. Equal costs (idle engines holding the same) go to the fewest
// requests in flight there, then by prefixaware's rendezvous order, which every replica computes alike; an engine whose
// metrics are stale counts as loaded as the busiest fresh one, never as idle. Replicas given the same events and
// metrics differ only by their own work in flight.
//
// Each endpoint's keys are computed at its own block size (engines of one model may differ mid-rollout); an engine's
// events change only its own matches. Between sending a prompt and the engine's BlockStored for it,
// src/router/kv/pending.ts remembers where this router sent it, so a burst sharing a new prefix follows the first.
//
// No tokens (the tokenizer's fallback reasons): prefixaware decides. One candidate: it is taken and nothing is
// tokenized (`one-endpoint`). Each request is counted once: matched (the chosen engine holds part of the prompt),
// `no-match` (no engine holds any of it: routed by load), `overloaded` (the holders cost more than computing it
// elsewhere: routed by load) or `too-short` (shorter than a block, nothing to match: routed by load; by prefixaware's
// hash, 38 % of the generated trace's requests waited behind long prefills on engines that happened to be busy).
import type { Endpoint } from '../core/endpoint.js';
import { isFresh } from '../core/endpoint.js';
import type { TraceSpan } from '../core/trace.js';
import { KV_BLOCKS, KV_FALLBACK, KV_MATCHED_BLOCKS } from '../tracing/attributes.js';
import type { BlockKey } from '../kv/block-key.js';
import type { KvDecisionObserver, KvFallbackReason, KvIndexView, KvKeySource, KvMatch, RequestBlocks } from '../kv/types.js';
import { PendingPrefixes } from '../kv/pending.js';
import type { Dispatch, RouteRequest, RoutingNote, RoutingPolicy } from './policy.js';

export interface KvAwareOptions {
  readonly index: KvIndexView;
  readonly keys: KvKeySource;
  readonly observer?: KvDecisionObserver;
  /** how much a block held in an offload tier counts against one on the GPU; default 0.5 */
  readonly offloadWeight?: number;
  /**
   * What a prompt token weighs, in tokens of queued work, when the candidate would compute it again although one other
   * engine alone holds it: its prefill, and the second copy it leaves in a cache that then holds less of everything
   * else. Default 3 (bench/kv-model.ts: 2 kept too few conversations where they were, 4 starved engines of a shared
   * prefix). A prefix two or more engines hold weighs 1 a token: copying it further spreads a hot prefix.
   */
  readonly copyWeight?: number;
  /**
   * What a prompt token weighs that two or more other engines hold and the candidate would compute: a copy of a prefix
   * several engines hold (a shared system prompt) is how its load spreads. Default 0.1: an engine without it is taken
   * as soon as the holders have a little more queued (at 1, with two replicas each seeing half the queues, an engine
   * that missed a shared system prompt's first requests got 9-16 % of them on the generated trace; at 0.1, 21-23 %);
   * idle holders still win over idle engines that would compute it.
   */
  readonly sharedWeight?: number;
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

type Prepared = RequestBlocks | KvFallbackReason;

/** Prefills this router has under way on one endpoint: sent, no answer yet. */
interface Work {
  tokens: number;
  count: number;
}

/** One block size among the candidates: their keys at it and what the index (or the pending map) says they hold. */
interface SizeGroup {
  readonly ids: string[];
  keys: readonly BlockKey[];
  matches: ReadonlyMap<string, KvMatch>;
  sent: { readonly endpointId: string; readonly length: number } | undefined;
}

/** how fast the mean of the tokens this router's requests leave to compute follows new ones */
const MEAN_ALPHA = 0.05;

export class KvAwarePolicy implements RoutingPolicy {
  readonly name = 'kvaware';
  private readonly prepared = new WeakMap<RouteRequest, Prepared>();
  /** the last pick of each request: where, and the prompt tokens it expected that engine to compute */
  private readonly decided = new WeakMap<RouteRequest, { readonly endpointId: string; readonly miss: number }>();
  /** endpoint id -> this router's prefills under way there */
  private readonly work = new Map<string, Work>();
  /** prompt tokens a request of this router left its engine to compute, on average */
  private meanMiss = 0;
  private readonly offloadWeight: number;
  private readonly copyWeight: number;
  private readonly sharedWeight: number;
  private readonly statsIntervalMs: number;
  private readonly now: () => number;
  private readonly pending: PendingPrefixes;

  constructor(
    private readonly opts: KvAwareOptions,
    /** prefixaware: the order used without tokens and to break ties */
    private readonly fallback: RoutingPolicy,
  ) {
    this.offloadWeight = Math.min(1, Math.max(0, opts.offloadWeight ?? 0.5));
    this.copyWeight = Math.max(1, opts.copyWeight ?? 3);
    this.sharedWeight = Math.min(1, Math.max(0, opts.sharedWeight ?? 0.1));
    this.statsIntervalMs = opts.engineStatsIntervalMs ?? 1000;
    this.now = opts.now ?? Date.now;
    this.pending = new PendingPrefixes(opts.pendingMs ?? 10_000, opts.pendingMaxKeys ?? 262_144, this.now);
  }

  async prepare(candidates: readonly Endpoint[], request: RouteRequest, trace?: TraceSpan): Promise<void> {
    if (this.prepared.has(request)) return;
    // nothing to decide: no tokenization either
    if (candidates.length <= 1) {
      this.prepared.set(request, 'one-endpoint');
      return;
    }
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
    const blocks = this.prepared.get(request);
    // a failover pick (exclude set) is not a new decision: count each request once
    const count = exclude === undefined;
    if (blocks === undefined || typeof blocks === 'string')
      return this.fallBack(candidates, request, exclude, blocks ?? 'no-prompt', count, trace);
    return this.byCost(candidates, blocks, request, exclude, count, trace);
  }

  dispatched(endpoint: Endpoint, request: RouteRequest): Dispatch {
    const decided = this.decided.get(request);
    let miss: number;
    if (decided !== undefined && decided.endpointId === endpoint.id) {
      miss = decided.miss;
      this.meanMiss = this.meanMiss === 0 ? miss : this.meanMiss + MEAN_ALPHA * (miss - this.meanMiss);
    } else {
      // routed without a decision of ours (no tokens), or a failover to an endpoint not scored: an average request
      const blocks = this.prepared.get(request);
      miss = typeof blocks === 'object' ? blocks.tokens : this.meanMiss;
    }
    let w = this.work.get(endpoint.id);
    if (w === undefined) {
      w = { tokens: 0, count: 0 };
      this.work.set(endpoint.id, w);
    }
    w.tokens += miss;
    w.count++;
    const work = w;
    const id = endpoint.id;
    let open = true;
    const close = (): void => {
      if (!open) return;
      open = false;
      work.count--;
      work.tokens -= miss;
      if (work.count <= 0 && this.work.get(id) === work) this.work.delete(id);
    };
    return { firstByte: close, ended: close };
  }

  /** Prefill tokens this router has under way on the endpoint (for tests and the bench's model). */
  workOf(endpointId: string): number {
    return this.work.get(endpointId)?.tokens ?? 0;
  }

  private byCost(
    candidates: readonly Endpoint[],
    blocks: RequestBlocks,
    request: RouteRequest,
    exclude: ReadonlySet<Endpoint> | undefined,
    count: boolean,
    trace: TraceSpan | undefined,
  ): Endpoint | undefined {
    const n = candidates.length;
    const sizes = new Int32Array(n);
    const P = blocks.tokens;
    // the candidates' block sizes: one group each (almost always one in all)
    const groups = new Map<number, SizeGroup>();
    let longest = 0;
    for (let i = 0; i < n; i++) {
      const e = candidates[i] as Endpoint;
      const size = this.opts.keys.blockSizeOf(e);
      sizes[i] = size;
      let g = groups.get(size);
      if (g === undefined) {
        const keys = blocks.keysAt(size);
        if (keys.length > longest) longest = keys.length;
        g = { ids: [], keys, matches: new Map(), sent: undefined };
        groups.set(size, g);
      }
      g.ids.push(e.id);
    }
    for (const g of groups.values()) {
      if (g.keys.length === 0) continue;
      g.matches = this.opts.index.match(g.keys, g.ids);
      // only for a prefix no engine reports yet: once one does, its events (stores and evictions) decide alone
      if (g.matches.size === 0) {
        const sent = this.pending.leading(g.keys);
        if (sent !== undefined && g.ids.includes(sent.endpointId)) g.sent = sent;
      }
    }

    // other clients' requests on each candidate, from its engine's fresh metrics; unknown: as many as the busiest
    const freshSince = this.now();
    const others = new Float64Array(n);
    const ours = new Float64Array(n);
    let sumOthers = 0;
    let sumOurs = 0;
    let ownWork = 0;
    let ownInFlight = 0;
    for (let i = 0; i < n; i++) {
      const e = candidates[i] as Endpoint;
      const load = e.engineLoad;
      const fresh = load !== undefined && isFresh(load, freshSince, this.statsIntervalMs);
      others[i] = fresh ? load.others : Number.NaN;
      ours[i] = fresh ? load.ours : 0;
      if (fresh) {
        sumOthers += load.others;
        sumOurs += load.ours;
      }
      ownWork += this.work.get(e.id)?.tokens ?? 0;
      ownInFlight += e.inFlight;
    }
    // what other clients run beyond their share of this router's (see the file's header)
    const ratio = sumOurs > 0 ? sumOthers / sumOurs : 0;
    let maxExcess = 0;
    for (let i = 0; i < n; i++) {
      const o = others[i] as number;
      if (Number.isNaN(o)) continue;
      const excess = Math.max(0, o - ratio * (ours[i] as number));
      others[i] = excess;
      if (excess > maxExcess) maxExcess = excess;
    }
    const perOther = ownInFlight > 0 ? ownWork / ownInFlight : this.meanMiss > 0 ? this.meanMiss : P;

    const misses = new Float64Array(n);
    const matched = new Int32Array(n);
    const helds = new Float64Array(n);
    // the longest prefix any candidate holds, and the longest held by two or more (a shared prefix)
    let h1 = 0;
    let h2 = 0;
    for (let i = 0; i < n; i++) {
      const e = candidates[i] as Endpoint;
      if (exclude?.has(e)) continue;
      const size = sizes[i] as number;
      const g = groups.get(size) as SizeGroup;
      let m = g.matches.get(e.id);
      // sent there moments ago: held on its GPU once its prefill has run
      const sent = g.sent;
      if (sent !== undefined && sent.endpointId === e.id && sent.length > (m?.gpu ?? 0))
        m = { gpu: sent.length, total: Math.max(sent.length, m?.total ?? 0) };
      const held = m === undefined ? 0 : Math.min(P, (m.gpu + this.offloadWeight * (m.total - m.gpu)) * size);
      helds[i] = held;
      misses[i] = P - held;
      matched[i] = m?.total ?? 0;
      if (held > h1) {
        h2 = h1;
        h1 = held;
      } else if (held > h2) h2 = held;
    }
    let best: Endpoint[] = [];
    let bestCost = Number.POSITIVE_INFINITY;
    for (let i = 0; i < n; i++) {
      const e = candidates[i] as Endpoint;
      if (exclude?.has(e)) continue;
      const held = helds[i] as number;
      // computing again what only one other engine holds makes a second copy of it: weighed beyond its prefill
      const copied = held >= h1 ? 0 : Math.max(0, h1 - Math.max(held, h2));
      const o = Number.isNaN(others[i] as number) ? maxExcess : (others[i] as number);
      const queued = (this.work.get(e.id)?.tokens ?? 0) + o * perOther;
      // what two or more others hold: a copy spreads a hot prefix (sharedWeight a token)
      const spread = Math.max(0, h2 - held);
      const cost = P - h1 + this.sharedWeight * spread + this.copyWeight * copied + queued;
      const tolerance = 1e-9 * Math.max(1, Math.abs(bestCost));
      if (best.length === 0 || cost < bestCost - tolerance) {
        bestCost = cost;
        best = [e];
      } else if (cost <= bestCost + tolerance) best.push(e);
    }
    const anyHeld = h1 > 0;
    if (best.length === 0) return undefined;
    // equal costs: the fewest requests in flight there (decoding ones too), then prefixaware's order among those
    if (best.length > 1) {
      let least = Number.POSITIVE_INFINITY;
      for (const e of best) if (e.inFlight < least) least = e.inFlight;
      best = best.filter((e) => e.inFlight === least);
    }
    const chosen = best.length === 1 ? best[0] : (this.fallback.pick(best, request) ?? best[0]);
    if (chosen === undefined) return undefined;
    const at = candidates.indexOf(chosen);
    const g = groups.get(sizes[at] as number) as SizeGroup;
    const chosenMatched = matched[at] as number;
    this.decided.set(request, { endpointId: chosen.id, miss: misses[at] as number });
    trace?.set(KV_BLOCKS, g.keys.length);
    if (chosenMatched > 0) {
      if (count) {
        this.opts.observer?.matched(request.model, chosenMatched, g.keys.length);
        noteOf(request, { matchedBlocks: chosenMatched, blocks: g.keys.length });
      }
      trace?.set(KV_MATCHED_BLOCKS, chosenMatched);
    } else {
      // shorter than a block: nothing can be cached, so by load alone (prefixaware's hash would queue it behind long prefills)
      const reason: KvFallbackReason = longest === 0 ? 'too-short' : anyHeld ? 'overloaded' : 'no-match';
      if (count) {
        this.opts.observer?.fallback(request.model, reason);
        noteOf(request, { fallback: reason, blocks: g.keys.length });
      }
      trace?.set(KV_FALLBACK, reason);
    }
    // the engine chosen is about to hold this prompt
    this.pending.record(g.keys, chosen.id);
    return chosen;
  }

  private fallBack(
    candidates: readonly Endpoint[],
    request: RouteRequest,
    exclude: ReadonlySet<Endpoint> | undefined,
    reason: KvFallbackReason,
    count: boolean,
    trace?: TraceSpan,
  ): Endpoint | undefined {
    if (count) {
      this.opts.observer?.fallback(request.model, reason);
      noteOf(request, { fallback: reason });
    }
    trace?.set(KV_FALLBACK, reason);
    return this.fallback.pick(candidates, request, exclude);
  }
}

/** The request's routing note (its access-log line), when someone reads it. */
function noteOf(request: RouteRequest, what: Omit<RoutingNote, 'policy'>): void {
  const note = request.note;
  if (note === undefined) return;
  note.policy = 'kvaware';
  Object.assign(note, what);
}
