// Admission limits for inference requests: a token bucket per client (its API key, else its address), and a cap on
// requests in flight.

export class TokenBuckets {
  /** in order of last use, oldest first (a Map keeps insertion order): evicting the least recently used is O(1) */
  private readonly buckets = new Map<string, { tokens: number; at: number }>();

  constructor(
    private readonly ratePerSecond: number,
    private readonly burst: number,
    private readonly now: () => number = Date.now,
    private readonly maxKeys = 100_000,
  ) {}

  /** Takes one token for `key`; returns 0 when allowed, else the seconds until a token is available. */
  take(key: string): number {
    const now = this.now();
    let b = this.buckets.get(key);
    if (!b) {
      // the least recently used bucket goes: the one most likely to have refilled, so forgetting it costs the least
      if (this.buckets.size >= this.maxKeys) this.buckets.delete(this.buckets.keys().next().value as string);
      b = { tokens: this.burst, at: now };
    } else {
      this.buckets.delete(key);
      b.tokens = Math.min(this.burst, b.tokens + ((now - b.at) / 1000) * this.ratePerSecond);
      b.at = now;
    }
    this.buckets.set(key, b);
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
  constructor(readonly max: number) {}

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
