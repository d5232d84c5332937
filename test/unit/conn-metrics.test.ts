// The router's own connections on /metrics: per endpoint the engine pool's open and busy connections and the requests
// waiting for one under --max-connections-per-engine (both engine clients, against a local server that holds its
// answers), gone with the endpoint; and the dashboard's /events streams.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { ModelCatalog } from '../../src/router/catalog/catalog.js';
import { DEFAULT_ENGINE_TLS } from '../../src/router/config/engine-tls.js';
import type { EngineClientKind } from '../../src/router/core/engine.js';
import { RouterMetrics } from '../../src/router/metrics/metrics.js';
import type { EngineHandler } from '../../src/router/proxy/engine-client.js';
import { UpstreamPools } from '../../src/router/proxy/pools.js';
import { until } from '../support/within.js';

/** A handler that only notes the request's end. */
function handler(onEnd: () => void): EngineHandler {
  return {
    onConnect: () => undefined,
    onHeaders: () => true,
    onData: () => true,
    onComplete: () => onEnd(),
    onError: () => onEnd(),
  };
}

const line = (text: string, name: string, endpoint: string): string | undefined =>
  new RegExp(`^${name}\\{endpoint="${endpoint.replace(/[.]/g, '\\.')}"\\} (\\d+)$`, 'm').exec(text)?.[1];

for (const kind of ['h1', 'undici'] as EngineClientKind[])
  test(`engine pool metrics (${kind}): open, busy and queued per endpoint; 0 before any request; gone with the endpoint`, async (t) => {
    const held: http.ServerResponse[] = [];
    const server = http.createServer((_req, res) => held.push(res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const other = 'http://127.0.0.2:9';
    const catalog = new ModelCatalog();
    const metrics = new RouterMetrics(catalog, { defaultMetrics: false });
    const pools = new UpstreamPools({
      timeouts: { connectMs: 5_000, headersMs: 5_000, idleMs: 5_000, totalMs: 0 },
      maxConnections: 2,
      tls: DEFAULT_ENGINE_TLS,
      kind,
    });
    metrics.connections.watch({ pools, dashboard: { clients: 3, dropped: 1 } });
    t.after(async () => {
      for (const res of held) res.destroy();
      await pools.closeAll();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    });
    catalog.setEndpoints('static', [
      { id: url, url, models: ['m'] },
      { id: other, url: other, models: ['m'] },
    ]);
    const text = async (): Promise<string> => (await metrics.exposition()).body;

    let t0 = await text();
    assert.equal(line(t0, 'llm_router_engine_connections_open', other), '0', 'present at 0 before any request');
    assert.equal(line(t0, 'llm_router_engine_requests_queued', other), '0');
    assert.match(t0, /^llm_router_dashboard_clients 3$/m);
    assert.match(t0, /^llm_router_dashboard_clients_dropped_total 1$/m);

    let ended = 0;
    const pool = pools.get(url);
    for (let i = 0; i < 5; i++)
      pool.dispatch(
        { method: 'GET', path: `/${i}`, headers: [], body: undefined, headersTimeout: 0, bodyTimeout: 0 },
        handler(() => ended++),
      );
    await until('two requests at the server', () => held.length === 2, 5_000);
    t0 = await text();
    assert.equal(line(t0, 'llm_router_engine_connections_open', url), '2');
    assert.equal(line(t0, 'llm_router_engine_connections_busy', url), '2');
    assert.equal(line(t0, 'llm_router_engine_requests_queued', url), '3', 'three wait for a connection under the cap');

    // answered one by one: the waiting ones take the freed connections, then the connections stay open, idle
    while (ended < 5) {
      for (const res of held.splice(0)) res.end('ok');
      await until('an answer', () => held.length > 0 || ended === 5, 5_000);
    }
    await until('the pool idle', async () => line(await text(), 'llm_router_engine_connections_busy', url) === '0', 5_000);
    t0 = await text();
    assert.equal(line(t0, 'llm_router_engine_requests_queued', url), '0');
    assert.ok(Number(line(t0, 'llm_router_engine_connections_open', url)) >= 1, 'kept alive');

    catalog.setEndpoints('static', [{ id: other, url: other, models: ['m'] }]);
    pools.close(url);
    t0 = await text();
    assert.doesNotMatch(t0, new RegExp(url.replace(/[.]/g, '\\.')), 'the endpoint gone, its series gone');
    assert.equal(line(t0, 'llm_router_engine_connections_open', other), '0');
  });
