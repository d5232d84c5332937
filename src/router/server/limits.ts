// Admission limits for inference requests: a token bucket per client key, and a cap on requests in flight.

export class TokenBuckets {
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
      if (this.buckets.size >= this.maxKeys) this.evictFull(now);
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

  /** Forgets buckets that have refilled completely: they hold no information (memory stays bounded). */
  private evictFull(now: number): void {
    for (const [k, b] of this.buckets) {
      if (b.tokens + ((now - b.at) / 1000) * this.ratePerSecond >= this.burst) this.buckets.delete(k);
    }
  }
}

export class ConcurrencyLimit {
  private current = 0;
  constructor(readonly max: number) {}

  /** Returns a release function, or undefined when the limit is reached. */
  acquire(): (() => void) | undefined {
    if (this.max > 0 && this.current >= this.max) return undefined;
    this.current++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.current--;
    };
  }

  get inFlight(): number {
    return this.current;
  }
}
