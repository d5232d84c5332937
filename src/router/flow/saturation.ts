// How full a model's pool of engines is, from what the engines say (their scraped waiting queue and KV-cache use) and
// what this router did since: the Gateway API Inference Extension's utilization detector, with this router's own
// requests since each scrape folded in so that a burst between two scrapes is seen at once.
//
// An endpoint's score is max(waiting / queueDepth, kvUsage / kvCache) (GIE's "roofline": the most constrained
// resource), its metrics older than `stalenessMs` counting as 1 (saturated, never idle). The pool's saturation is the
// mean of its ready endpoints' scores, plus the requests released to it that have not reached an endpoint yet. At 1 or
// more the pool is saturated: requests wait in the router instead of in the engines.
//
// Since a scrape, this router knows what it added and what ended on each endpoint (its in-flight count then and now):
// a request added counts both as waiting and as taking the KV cache of an average running request (whichever fills the
// engine first decides: conservative, since it can only be one); one that ended gives back its place, from the waiting
// queue first, then from the running batch (whose KV-cache use shrinks in proportion).
// Pure: no I/O, no clock of its own.
import type { Endpoint } from '../core/endpoint.js';

export interface SaturationThresholds {
  /** waiting requests at which an engine counts as full (GIE: 5) */
  readonly queueDepth: number;
  /** KV-cache use 0..1 at which an engine counts as full (GIE: 0.8) */
  readonly kvCache: number;
  /** metrics older than this count as full, ms (GIE: 200) */
  readonly stalenessMs: number;
}

/** One endpoint's score: 1 or more is full. */
export function endpointScore(e: Endpoint, now: number, t: SaturationThresholds): number {
  const load = e.engineLoad;
  if (load === undefined || now - load.at > t.stalenessMs) return 1;
  // what this router added (+) or saw end (-) there since the scrape
  const delta = e.inFlight - load.ours;
  let waiting = load.waiting;
  let running = load.running;
  let kv = load.kvUsage ?? 0;
  if (delta > 0) {
    // it waits there, or it runs and takes what a running request takes of the KV cache: either may fill it first
    waiting += delta;
    if (running > 0) kv += (delta * kv) / running;
  } else if (delta < 0) {
    const ended = -delta;
    const fromWaiting = Math.min(waiting, ended);
    waiting -= fromWaiting;
    running = Math.max(0, running - (ended - fromWaiting));
  }
  if (load.running > 0 && running < load.running) kv *= running / load.running;
  return Math.max(waiting / t.queueDepth, kv / t.kvCache);
}

/**
 * The pool's saturation: the mean score of `endpoints` (the model's ready ones) plus `inTransit` requests released to
 * it and not yet forwarded (as waiting requests, or as running ones taking the pool's average share of a KV cache,
 * whichever fills it more), spread over them. No endpoint: 1 (nothing can take a request).
 */
export function poolSaturation(endpoints: readonly Endpoint[], inTransit: number, now: number, t: SaturationThresholds): number {
  const n = endpoints.length;
  if (n === 0) return 1;
  let sum = 0;
  // what a running request takes of an engine's KV cache, on average over the engines that say
  let kvPerRequest = 0;
  let kvSamples = 0;
  for (let i = 0; i < n; i++) {
    const e = endpoints[i] as Endpoint;
    sum += endpointScore(e, now, t);
    const load = e.engineLoad;
    if (inTransit > 0 && load !== undefined && load.running > 0 && load.kvUsage !== undefined) {
      kvPerRequest += load.kvUsage / load.running;
      kvSamples++;
    }
  }
  if (inTransit > 0) {
    // requests on their way: waiting somewhere, or running and taking an average request's KV cache
    const kv = kvSamples > 0 ? (inTransit * kvPerRequest) / kvSamples / t.kvCache : 0;
    sum += Math.max(inTransit / t.queueDepth, kv);
  }
  return sum / n;
}
