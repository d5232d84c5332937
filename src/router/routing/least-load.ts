// least-load: the endpoint with the least load, where load is this router's live in-flight count plus what the
// engine's scraped /metrics say it carries beyond that. A snapshot older than 3 scrape intervals is unknown load:
// such an endpoint is scored as loaded as the busiest endpoint with fresh metrics, never as idle. Among the best
// (within one request of the least loaded) two are drawn at random and the lesser wins, so that routers acting on
// the same, equal or slightly old numbers do not all herd onto one engine.
import type { Endpoint, EngineLoad } from '../core/endpoint.js';
import { staleAfterMs } from '../core/endpoint.js';
import type { RouteRequest, RoutingPolicy } from './policy.js';

export interface LeastLoadOptions {
  /** the engine-stats scrape interval; default 1 s */
  readonly engineStatsIntervalMs?: number;
  readonly now?: () => number;
  /** uniform in [0, 1); default Math.random */
  readonly random?: () => number;
}

// Scratch space shared by every pick (pick is synchronous): indices of the candidates that may be among the best,
// and of those whose engine load is unknown.
let nearScratch = new Int32Array(64);
let unknownScratch = new Int32Array(64);

function ensureScratch(n: number): void {
  if (nearScratch.length >= n) return;
  let size = nearScratch.length;
  while (size < n) size *= 2;
  nearScratch = new Int32Array(size);
  unknownScratch = new Int32Array(size);
}

export class LeastLoadPolicy implements RoutingPolicy {
  readonly name = 'least-load';
  private readonly staleMs: number;
  private readonly now: () => number;
  private readonly random: () => number;

  constructor(opts: LeastLoadOptions = {}) {
    this.staleMs = staleAfterMs(opts.engineStatsIntervalMs ?? 1000);
    this.now = opts.now ?? Date.now;
    this.random = opts.random ?? Math.random;
  }

  pick(candidates: readonly Endpoint[], _request: RouteRequest, exclude?: ReadonlySet<Endpoint>): Endpoint | undefined {
    const n = candidates.length;
    if (n === 0) return undefined;
    if (n === 1) {
      const only = candidates[0] as Endpoint;
      return exclude?.has(only) ? undefined : only;
    }
    ensureScratch(n);
    // locals: module-level bindings cost a check on every access in the loops
    const near = nearScratch;
    const unknown = unknownScratch;
    const freshSince = this.now() - this.staleMs;
    // one pass over the endpoints: known scores, keeping every index within one request of the lowest so far
    let minKnown = Infinity;
    let maxOther = 0;
    let nearCount = 0;
    let unknownCount = 0;
    for (let i = 0; i < n; i++) {
      const e = candidates[i] as Endpoint;
      if (exclude?.has(e)) continue;
      const load = e.engineLoad;
      if (load === undefined || load.at < freshSince) {
        unknown[unknownCount++] = i;
        continue;
      }
      const other = load.otherLoad;
      if (other > maxOther) maxOther = other;
      const s = e.inFlight + other;
      if (s < minKnown + 1) {
        near[nearCount++] = i;
        if (s < minKnown) minKnown = s;
      }
    }
    // unknown engines count as loaded as the busiest known one; with nothing known, in-flight alone decides
    const unknownBase = nearCount > 0 ? maxOther : 0;
    let best = minKnown;
    for (let k = 0; k < unknownCount; k++) {
      const s = (candidates[unknown[k] as number] as Endpoint).inFlight + unknownBase;
      if (s < best) best = s;
    }
    if (best === Infinity) return undefined;
    // the band: every candidate within one request of the best
    const limit = best + 1;
    let m = 0;
    for (let k = 0; k < nearCount; k++) {
      const i = near[k] as number;
      const e = candidates[i] as Endpoint;
      if (e.inFlight + (e.engineLoad as EngineLoad).otherLoad < limit) near[m++] = i;
    }
    for (let k = 0; k < unknownCount; k++) {
      const i = unknown[k] as number;
      if ((candidates[i] as Endpoint).inFlight + unknownBase < limit) near[m++] = i;
    }
    if (m === 1) return candidates[near[0] as number];
    // power of two choices within the band
    const r = this.random() * m * (m - 1);
    const first = Math.floor(r / (m - 1));
    const a = candidates[near[first] as number] as Endpoint;
    const b = candidates[near[(first + 1 + (Math.floor(r) % (m - 1))) % m] as number] as Endpoint;
    return this.score(b, freshSince, unknownBase) < this.score(a, freshSince, unknownBase) ? b : a;
  }

  private score(e: Endpoint, freshSince: number, unknownBase: number): number {
    const load = e.engineLoad;
    return e.inFlight + (load === undefined || load.at < freshSince ? unknownBase : load.otherLoad);
  }
}
