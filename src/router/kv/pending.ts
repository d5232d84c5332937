// Where this router has just sent a prompt, until the engine's own events say it holds it. An engine announces a
// prompt's blocks once its prefill has run, so requests that share a prefix and arrive within that time (a burst of
// users of one system prompt, a client that fans out) would each find no holder and spread over several engines,
// each computing and then caching the same prefix. The router knows where it sent the first one: that engine is
// about to hold it. An entry lives `ttlMs` at most (the events take over long before); the map is bounded (least
// recently routed keys go first). Each replica knows only what it routed itself: the events remain the one source
// every replica shares.
import { LRUCache } from 'lru-cache';
import type { BlockKey } from './block-key.js';

interface Sent {
  readonly endpointId: string;
  readonly until: number;
}

export class PendingPrefixes {
  /**
   * Least recently routed first out, in O(1) (lru-cache's linked list). A Map used as the queue (delete its first key)
   * is not O(1) in V8: finding the first key walks every key deleted since the table was rebuilt, and with 12k-token
   * prompts (750 keys each) past the bound each record took over 100 ms.
   */
  private readonly byKey: LRUCache<BlockKey, Sent>;

  constructor(
    private readonly ttlMs: number,
    maxKeys: number,
    private readonly now: () => number = Date.now,
  ) {
    this.byKey = new LRUCache({ max: Math.max(1, maxKeys) });
  }

  /** `keys` were just sent to `endpointId`. */
  record(keys: readonly BlockKey[], endpointId: string): void {
    if (this.ttlMs <= 0) return;
    const sent: Sent = { endpointId, until: this.now() + this.ttlMs };
    // each key becomes the most recently routed; past the bound the least recently routed go
    for (const k of keys) this.byKey.set(k, sent);
  }

  /** The endpoint the leading keys were last sent to, and how many leading keys went there; undefined when none. */
  leading(keys: readonly BlockKey[]): { readonly endpointId: string; readonly length: number } | undefined {
    if (keys.length === 0 || this.byKey.size === 0) return undefined;
    const now = this.now();
    const first = this.byKey.peek(keys[0] as BlockKey);
    if (first === undefined || first.until < now) return undefined;
    let n = 1;
    while (n < keys.length) {
      const s = this.byKey.peek(keys[n] as BlockKey);
      if (s === undefined || s.endpointId !== first.endpointId || s.until < now) break;
      n++;
    }
    return { endpointId: first.endpointId, length: n };
  }

  get size(): number {
    return this.byKey.size;
  }
}
