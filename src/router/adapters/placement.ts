// Where an adapter goes: which endpoint loads it, which adapter gives up its slot, when it spills onto one more
// endpoint. Pure functions over endpoints and numbers the caller hands in (unit-tested).
import type { Endpoint } from '../core/endpoint.js';
import { isFresh } from '../core/endpoint.js';
import { fnv1a, mix32 } from '../routing/hash.js';
import { isRoutable } from '../catalog/catalog.js';

/** An endpoint's load as least-load sees it: this router's requests in flight, plus what a fresh scrape says beyond them. */
export function loadOf(e: Endpoint, now: number, statsIntervalMs: number): number {
  return e.inFlight + (isFresh(e.engineLoad, now, statsIntervalMs) ? (e.engineLoad?.otherLoad ?? 0) : 0);
}

export interface LoaderFacts {
  /** slots of an engine that reports none (--max-loras-per-engine) */
  readonly defaultSlots: number;
  /** loads under way on it, counted as taken slots */
  readonly reserved: (e: Endpoint) => number;
  /** it holds an adapter the router may unload for this one */
  readonly evictable: (e: Endpoint) => boolean;
  /** not to be asked (a recent failure of this adapter there) */
  readonly excluded: (e: Endpoint) => boolean;
  readonly load: (e: Endpoint) => number;
}

export function freeSlots(e: Endpoint, f: Pick<LoaderFacts, 'defaultSlots' | 'reserved'>): number {
  return (e.adapterSlots ?? f.defaultSlots) - e.adapters.size - f.reserved(e);
}

/**
 * The endpoint of `pool` that loads `adapter`: one with a free slot first, then one with an adapter the router may
 * unload, then any (the engine then holds more adapters than it runs at once, and swaps them); within a tier the least
 * loaded (loads under way count), then the one with the most free slots, then a hash of adapter and URL, so that router replicas with the same
 * view pick the same endpoint. Endpoints that are not ready (any more), hold it, refuse loads at run time or are excluded
 * are never chosen.
 */
export function chooseLoader(adapter: string, pool: readonly Endpoint[], f: LoaderFacts): Endpoint | undefined {
  let best: Endpoint | undefined;
  let bestKey: readonly number[] = [];
  for (const e of pool) {
    if (!isRoutable(e) || e.adapters.has(adapter) || e.canLoadAdapters === false || f.excluded(e)) continue;
    const free = freeSlots(e, f);
    const tier = free > 0 ? 0 : f.evictable(e) ? 1 : 2;
    // a load under way there counts as load too: concurrent loads spread over the endpoints instead of queueing on one
    const key = [tier, f.load(e) + f.reserved(e), -free, -mix32(fnv1a(`${adapter} ${e.url}`))];
    if (best === undefined || less(key, bestKey)) {
      best = e;
      bestKey = key;
    }
  }
  return best;
}

function less(a: readonly number[], b: readonly number[]): boolean {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return (a[i] as number) < (b[i] as number);
  return false;
}

/** One adapter the router loaded on an endpoint, with its use there. */
export interface AdapterUse {
  readonly name: string;
  /** requests of it on that endpoint now */
  readonly inFlight: number;
  /** ms since epoch of its last request start or end there (its load, before any) */
  readonly lastUsed: number;
}

/** The adapter that gives up its slot: the least recently used idle one; undefined when every one is busy. */
export function chooseVictim(uses: readonly AdapterUse[]): string | undefined {
  let victim: AdapterUse | undefined;
  for (const u of uses) {
    if (u.inFlight > 0) continue;
    if (!victim || u.lastUsed < victim.lastUsed || (u.lastUsed === victim.lastUsed && u.name < victim.name)) victim = u;
  }
  return victim?.name;
}

/** Every holder carries at least `threshold` requests: the adapter should be loaded on one more endpoint. */
export function shouldSpill(holders: readonly Endpoint[], threshold: number, load: (e: Endpoint) => number): boolean {
  return threshold > 0 && holders.length > 0 && holders.every((e) => load(e) >= threshold);
}
