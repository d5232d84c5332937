// One keep-alive connection pool per engine origin (our own HTTP/1.1 client, src/proxy/h1), closed gracefully when the
// endpoint leaves.
import type { TimeoutConfig } from '../config/config.js';
import { H1Pool } from './h1/pool.js';

/** idle engine connections are closed after this (engines' own keep-alive timeouts are usually 5 s or more) */
const KEEP_ALIVE_MS = 4_000;

export class UpstreamPools {
  private readonly pools = new Map<string, H1Pool>();

  constructor(private readonly timeouts: TimeoutConfig) {}

  get(origin: string): H1Pool {
    let pool = this.pools.get(origin);
    if (!pool) {
      pool = new H1Pool(origin, { connectTimeoutMs: this.timeouts.connectMs, keepAliveTimeoutMs: KEEP_ALIVE_MS });
      this.pools.set(origin, pool);
    }
    return pool;
  }

  /** Lets in-flight requests finish, then closes the connections. */
  release(origin: string): void {
    const pool = this.pools.get(origin);
    if (!pool) return;
    this.pools.delete(origin);
    pool.close().catch(() => undefined);
  }

  async closeAll(): Promise<void> {
    const all = [...this.pools.values()];
    this.pools.clear();
    await Promise.all(all.map((p) => p.destroy().catch(() => undefined)));
  }
}
