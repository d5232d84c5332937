// The engine client on undici's Pool: the reference the router's own client (./h1/) is measured and tested against,
// and the client the benchmark runs the router with for comparison (docs/benchmarks.md).
import { Pool, type Dispatcher } from 'undici';
import type { EngineClient, EngineClientOptions, EngineDispatchOptions, EngineHandler } from './engine-client.js';
import type { EngineClientStats } from '../core/engine.js';
import { tlsConnectOptions } from '../config/engine-tls.js';

export class UndiciEngineClient implements EngineClient {
  private readonly pool: Pool;

  constructor(origin: string, opts: EngineClientOptions) {
    this.pool = new Pool(origin, {
      // one request per connection: a request queued behind a long stream would wait for all of it
      pipelining: 1,
      connections: opts.maxConnections > 0 ? opts.maxConnections : null,
      keepAliveTimeout: opts.keepAliveTimeoutMs,
      connect: { timeout: opts.connectTimeoutMs, noDelay: true, ...tlsConnectOptions(opts.tls) },
    });
  }

  dispatch(o: EngineDispatchOptions, handler: EngineHandler): void {
    this.pool.dispatch(
      {
        method: o.method as Dispatcher.HttpMethod,
        path: o.path,
        headers: o.headers as string[],
        body: o.body,
        headersTimeout: o.headersTimeout,
        bodyTimeout: o.bodyTimeout,
      },
      handler as unknown as Dispatcher.DispatchHandler,
    );
  }

  stats(): EngineClientStats {
    const s = this.pool.stats;
    return { open: s.connected, busy: s.connected - s.free, queued: s.queued };
  }

  close(): Promise<void> {
    return this.pool.close();
  }

  destroy(): Promise<void> {
    return this.pool.destroy();
  }
}
