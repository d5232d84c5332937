// Fast non-cryptographic hashing for routing decisions: FNV-1a over UTF-16 code units, a murmur3 finaliser, and
// rendezvous weights. Every router replica computes the same numbers from the same inputs: no seeds, no state.
import type { Endpoint } from '../core/endpoint.js';

export const FNV_OFFSET = 0x811c9dc5 | 0;
export const FNV_PRIME = 0x01000193;

/** FNV-1a of a whole string (signed 32-bit; mix it before use). */
export function fnv1a(s: string, h: number = FNV_OFFSET): number {
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), FNV_PRIME);
  return h;
}

/** murmur3's 32-bit finaliser: spreads every input bit over the output; unsigned result. */
export function mix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** An endpoint's identity for rendezvous hashing: its URL, which every replica sees the same. */
function endpointHash(e: Endpoint): number {
  return mix32(fnv1a(e.url));
}

const MIN_INT32 = -2147483648;

/**
 * Rendezvous (highest-random-weight) weight of an endpoint for `key`; the endpoint with the highest wins.
 * Both inputs are already mixed, so one round of lowbias32 (two multiplies) makes the weights independent enough.
 * The result is a signed 32-bit integer (the sign bit flipped, which keeps the order of the unsigned hash):
 * comparing small integers, not doubles, makes a 1,000-endpoint scan about a quarter faster.
 */
function rendezvousWeight(key: number, endpointHash: number): number {
  let x = key ^ endpointHash;
  x ^= x >>> 16;
  x = Math.imul(x, 0x7feb352d);
  x ^= x >>> 15;
  x = Math.imul(x, 0x846ca68b);
  // a literal, not MIN_INT32: a module-level binding costs a check on every read in the hot loop
  return x ^ (x >>> 16) ^ -2147483648;
}

interface HashedCandidates {
  readonly first: Endpoint | undefined;
  readonly last: Endpoint | undefined;
  readonly hashes: Uint32Array;
}

// The catalog hands out one immutable candidate array per model and builds a new one on every change,
// so the endpoint hashes are computed once per array and found with one lookup per request.
const cache = new WeakMap<readonly Endpoint[], HashedCandidates>();

/** Endpoint hashes parallel to `candidates`, cached per array (recognised by identity, length, first and last endpoint). */
function candidateHashes(candidates: readonly Endpoint[]): Uint32Array {
  const n = candidates.length;
  const c = cache.get(candidates);
  if (c !== undefined && c.hashes.length === n && (n === 0 || (c.first === candidates[0] && c.last === candidates[n - 1]))) return c.hashes;
  const hashes = new Uint32Array(n);
  for (let i = 0; i < n; i++) hashes[i] = endpointHash(candidates[i] as Endpoint);
  cache.set(candidates, { first: candidates[0], last: candidates[n - 1], hashes });
  return hashes;
}

/**
 * The candidate with the highest rendezvous weight for `key`, skipping `exclude` and endpoints with `inFlight >= room`;
 * -1 when none is left. Equal weights (practically never) go to the higher endpoint hash, so the answer does not
 * depend on candidate order. The loops stay in this module: a call across modules per candidate costs more than
 * the weight itself when a loader compiles imports to property getters (tsx does).
 */
export function rendezvousIndex(
  candidates: readonly Endpoint[],
  key: number,
  exclude?: ReadonlySet<Endpoint>,
  room = Number.POSITIVE_INFINITY,
): number {
  const hashes = candidateHashes(candidates);
  const n = hashes.length;
  let best = -1;
  let bestWeight = MIN_INT32;
  const filtered = exclude !== undefined || room !== Number.POSITIVE_INFINITY;
  for (let i = 0; i < n; i++) {
    if (filtered) {
      const e = candidates[i] as Endpoint;
      if (e.inFlight >= room || exclude?.has(e)) continue;
    }
    const h = hashes[i] as number;
    const w = rendezvousWeight(key, h);
    if (w > bestWeight || best < 0 || (w === bestWeight && h > (hashes[best] as number))) {
      best = i;
      bestWeight = w;
    }
  }
  return best;
}

// Scratch space for boundedRendezvousIndex (synchronous, so shared): the weights of the last key.
let weightScratch = new Int32Array(64);

/**
 * Rendezvous with bounded loads: the highest-weight candidate for `key` whose in-flight count stays within
 * room = ceil(spread x (total in-flight + 1) / n) after taking this request; -1 when every candidate is excluded.
 * Some candidate always has room (the bound is above the mean), unless failover excluded all that do: then the
 * unbounded winner among the rest.
 */
export function boundedRendezvousIndex(
  candidates: readonly Endpoint[],
  key: number,
  spread: number,
  exclude?: ReadonlySet<Endpoint>,
): number {
  const n = candidates.length;
  if (exclude !== undefined) {
    const winner = rendezvousIndex(candidates, key, exclude);
    if (winner < 0 || (candidates[winner] as Endpoint).inFlight === 0) return winner;
    const room = roomFor(candidates, spread);
    if ((candidates[winner] as Endpoint).inFlight < room) return winner;
    const spill = rendezvousIndex(candidates, key, exclude, room);
    return spill >= 0 ? spill : winner;
  }
  const hashes = candidateHashes(candidates);
  if (weightScratch.length < n) {
    let size = weightScratch.length;
    while (size < n) size *= 2;
    weightScratch = new Int32Array(size);
  }
  const weights = weightScratch;
  let best = -1;
  let bestWeight = MIN_INT32;
  for (let i = 0; i < n; i++) {
    const h = hashes[i] as number;
    const w = rendezvousWeight(key, h);
    weights[i] = w;
    if (w > bestWeight || best < 0 || (w === bestWeight && h > (hashes[best] as number))) {
      best = i;
      bestWeight = w;
    }
  }
  if (best < 0) return best;
  // The winner has room when ceil(spread x (total + 1) / n) > its in-flight count, i.e. once the total in flight
  // exceeds winner x n / spread - 1: stop counting there (an idle winner needs no count at all).
  const winnerInFlight = (candidates[best] as Endpoint).inFlight;
  const enough = (winnerInFlight * n) / spread - 1;
  let total = 0;
  for (let i = 0; i < n && total <= enough; i++) total += (candidates[i] as Endpoint).inFlight;
  if (total > enough) return best;
  // the winner is full: the next in this key's rendezvous order with room
  const room = Math.ceil((spread * (total + 1)) / n);
  let spill = -1;
  let spillWeight = MIN_INT32;
  for (let i = 0; i < n; i++) {
    const w = weights[i] as number;
    if ((w < spillWeight && spill >= 0) || (candidates[i] as Endpoint).inFlight >= room) continue;
    if (w > spillWeight || spill < 0 || (hashes[i] as number) > (hashes[spill] as number)) {
      spill = i;
      spillWeight = w;
    }
  }
  return spill >= 0 ? spill : best;
}

function roomFor(candidates: readonly Endpoint[], spread: number): number {
  let total = 0;
  for (let i = 0; i < candidates.length; i++) total += (candidates[i] as Endpoint).inFlight;
  return Math.ceil((spread * (total + 1)) / candidates.length);
}
