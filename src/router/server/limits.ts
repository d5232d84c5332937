// Admission limits for inference requests: a token bucket per client (its API key, else its address), and a cap on
// requests in flight.
import { LRUCache } from 'lru-cache';

export class TokenBuckets {
  /**
   * Least recently used first out, in O(1): lru-cache's linked list. (A Map used as the queue, deleting its first key,
   * is not O(1) in V8: each lookup of the first key walks over every key deleted since the table was last rebuilt, and
   * 200,000 made-up keys past a bound of 100,000 took seconds.)
   */
  private readonly buckets: LRUCache<string, { tokens: number; at: number }>;

  constructor(
    private readonly ratePerSecond: number,
    private readonly burst: number,
    private readonly now: () => number = Date.now,
    maxKeys = 100_000,
  ) {
    this.buckets = new LRUCache({ max: maxKeys });
  }

  /** Takes one token for `key`; returns 0 when allowed, else the seconds until a token is available. */
  take(key: string): number {
    const now = this.now();
    let b = this.buckets.get(key);
    if (!b) {
      // past the bound the least recently used bucket goes: the one most likely to have refilled, so forgetting it
      // costs the least
      b = { tokens: this.burst, at: now };
      this.buckets.set(key, b);
    } else {
      b.tokens = Math.min(this.burst, b.tokens + ((now - b.at) / 1000) * this.ratePerSecond);
      b.at = now;
    }
    if (b.tokens >= 1) {
      b.tokens -= 1;
      return 0;
    }
    return (1 - b.tokens) / this.ratePerSecond;
  }

  /** buckets held now (at most maxKeys) */
  get size(): number {
    return this.buckets.size;
  }
}

export class ConcurrencyLimit {
  private current = 0;
  /** 0 = no limit; may change while requests are in flight (those over a lower one finish, no new one starts) */
  constructor(public max: number) {}

  /** Returns the function that frees the slot, or undefined when the limit is reached. */
  acquire(): (() => void) | undefined {
    if (this.max > 0 && this.current >= this.max) return undefined;
    this.current++;
    let freed = false;
    return () => {
      if (freed) return;
      freed = true;
      this.current--;
    };
  }

  get inFlight(): number {
    return this.current;
  }
}
