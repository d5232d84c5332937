// One keep-alive engine client per engine origin (src/router/proxy/engine-client.ts), closed gracefully when the endpoint leaves.
import type { TimeoutConfig } from '../config/config.js';
import type { EngineClient } from './engine-client.js';
import type { EngineTls } from '../config/engine-tls.js';
import { H1Pool } from './h1/pool.js';
import { UndiciEngineClient } from './undici-client.js';
import type { EngineClientKind, EngineClientStats } from '../core/engine.js';

/** idle engine connections are closed after this (engines' own keep-alive timeouts are usually 5 s or more) */
const KEEP_ALIVE_MS = 4_000;

/** which implementation carries requests: the router's own (h1) or undici's Pool (for the benchmark's comparison) */

export interface UpstreamOptions {
  readonly timeouts: TimeoutConfig;
  /** connections per engine at most; 0 = no cap */
  readonly maxConnections: number;
  readonly tls: EngineTls;
  readonly kind: EngineClientKind;
}

export class UpstreamPools {
  private readonly pools = new Map<string, EngineClient>();

  constructor(private readonly opts: UpstreamOptions) {}

  get(origin: string): EngineClient {
    let pool = this.pools.get(origin);
    if (!pool) {
      const o = this.opts;
      const clientOpts = {
        connectTimeoutMs: o.timeouts.connectMs,
        keepAliveTimeoutMs: KEEP_ALIVE_MS,
        maxConnections: o.maxConnections,
        tls: o.tls,
      };
      pool = o.kind === 'undici' ? new UndiciEngineClient(origin, clientOpts) : new H1Pool(origin, clientOpts);
      this.pools.set(origin, pool);
    }
    return pool;
  }

  /** The pool's connections and queue; undefined when no request has gone to the origin yet (or it was closed). */
  stats(origin: string): EngineClientStats | undefined {
    return this.pools.get(origin)?.stats();
  }

  /** Lets in-flight requests finish, then closes the connections. */
  close(origin: string): void {
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
