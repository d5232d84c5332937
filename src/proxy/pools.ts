// One undici Pool per engine origin, kept alive across requests and closed gracefully when the endpoint leaves.
import { Pool } from 'undici';
import type { TimeoutConfig } from '../config/config.js';

export class UpstreamPools {
  private readonly pools = new Map<string, Pool>();

  constructor(private readonly timeouts: TimeoutConfig) {}

  get(origin: string): Pool {
    let pool = this.pools.get(origin);
    if (!pool) {
      pool = new Pool(origin, {
        connect: { timeout: this.timeouts.connectMs, noDelay: true },
        headersTimeout: this.timeouts.headersMs,
        bodyTimeout: this.timeouts.idleMs,
        keepAliveTimeout: 4_000,
        pipelining: 1,
      });
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
