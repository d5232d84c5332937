// Where this router has just sent a prompt, until the engine's own events say it holds it. An engine announces a
// prompt's blocks once its prefill has run, so requests that share a prefix and arrive within that time (a burst of
// users of one system prompt, a client that fans out) would each find no holder and spread over several engines,
// each computing and then caching the same prefix. The router knows where it sent the first one: that engine is
// about to hold it. An entry lives `ttlMs` at most (the events take over long before); the map is bounded (least
// recently routed keys go first). Each replica knows only what it routed itself: the events remain the one source
// every replica shares.
import type { BlockKey } from './block-key.js';

interface Sent {
  readonly endpointId: string;
  readonly until: number;
}

export class PendingPrefixes {
  private readonly byKey = new Map<BlockKey, Sent>();

  constructor(
    private readonly ttlMs: number,
    private readonly maxKeys: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** `keys` were just sent to `endpointId`. */
  record(keys: readonly BlockKey[], endpointId: string): void {
    if (this.ttlMs <= 0) return;
    const sent: Sent = { endpointId, until: this.now() + this.ttlMs };
    const map = this.byKey;
    for (const k of keys) {
      // re-inserted at the end: the map's order is the order keys were last routed in
      map.delete(k);
      map.set(k, sent);
    }
    while (map.size > this.maxKeys) {
      const oldest = map.keys().next();
      if (oldest.done) break;
      map.delete(oldest.value);
    }
  }

  /** The endpoint the leading keys were last sent to, and how many leading keys went there; undefined when none. */
  leading(keys: readonly BlockKey[]): { readonly endpointId: string; readonly length: number } | undefined {
    if (keys.length === 0 || this.byKey.size === 0) return undefined;
    const now = this.now();
    const first = this.byKey.get(keys[0] as BlockKey);
    if (first === undefined || first.until < now) return undefined;
    let n = 1;
    while (n < keys.length) {
      const s = this.byKey.get(keys[n] as BlockKey);
      if (s === undefined || s.endpointId !== first.endpointId || s.until < now) break;
      n++;
    }
    return { endpointId: first.endpointId, length: n };
  }

  get size(): number {
    return this.byKey.size;
  }
}
