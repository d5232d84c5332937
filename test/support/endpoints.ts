// Endpoints as the catalog holds them, built directly, for unit tests of what takes endpoints (policies, placement,
// model state): a ready `both` endpoint of model `m` unless the test says otherwise.
import type { Endpoint } from '../../src/router/core/endpoint.js';

/** Tests change the endpoints they hand to pure functions themselves (the catalog alone does so in the router). */
export type WritableEndpoint = { -readonly [K in keyof Endpoint]: Endpoint[K] };

export function testEndpoint(url: string, fields: Partial<WritableEndpoint> = {}): WritableEndpoint {
  return {
    id: url,
    source: 'static',
    url,
    models: ['m'],
    role: 'both',
    probeUrl: url,
    bootstrapPort: undefined,
    pdProtocol: undefined,
    kvEvents: undefined,
    tokenizer: undefined,
    modelRoots: new Map(),
    state: 'ready',
    since: 0,
    discoveredAt: 0,
    everReady: true,
    firstReadyAt: 0,
    loadWatched: false,
    draining: false,
    lastProbe: undefined,
    lastError: undefined,
    lastErrorAt: undefined,
    unreachable: undefined,
    servesInstead: undefined,
    inFlight: 0,
    adapters: new Map(),
    adapterSlots: undefined,
    cacheConfig: undefined,
    canLoadAdapters: undefined,
    ...fields,
  };
}
