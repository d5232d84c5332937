// Which tokenizer a kvaware request uses: --tokenizers MODEL=... first, then the llm-router/tokenizer annotation of the
// model's endpoints (Kubernetes), then --tokenizer. The engine here refuses connections, so engine mode cannot give
// ids (engine-error) while a tokenizer directory gives them in process.
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { KvRouting } from '../../src/router/app/kv-routing.js';
import { ModelCatalog } from '../../src/router/catalog/catalog.js';
import type { KvConfig } from '../../src/router/config/kv-config.js';
import type { KvMetrics } from '../../src/router/metrics/kv-metrics.js';
import { createLogger } from '../../src/router/util/log.js';

const DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'tokenizer');
const ENGINE = 'http://127.0.0.1:1';
const routings: KvRouting[] = [];
after(async () => {
  for (const r of routings) await r.stop();
});

function routing(
  annotation: string | undefined,
  tokenizers: Record<string, string> = {},
): { kv: KvRouting; catalog: ModelCatalog; sources: string[] } {
  const catalog = new ModelCatalog();
  catalog.setDeclarations('kubernetes', [{ model: 'm' }]);
  catalog.setEndpoints('kubernetes', [{ id: 'ns/p', url: ENGINE, models: ['m'], ...(annotation ? { tokenizer: annotation } : {}) }]);
  const config: KvConfig = {
    eventsPort: 5557,
    replayPort: undefined,
    topic: '',
    blockSize: 16,
    maxBlocksPerEndpoint: 1000,
    tokenizer: 'engine',
    tokenizers: new Map(Object.entries(tokenizers)),
    tokenizerTimeoutMs: 2000,
    tokenizerMaxChars: 512 * 1024,
    trustRequestChatTemplate: false,
    pendingMs: 0,
  };
  const sources: string[] = [];
  const metrics = { tokenized: (source: string) => sources.push(source) } as unknown as KvMetrics;
  const kv = new KvRouting(
    catalog,
    { kv: config, engineApiKey: undefined, engineTls: undefined },
    metrics,
    createLogger({ level: 'silent', format: 'json' }),
  );
  routings.push(kv);
  kv.start();
  return { kv, catalog, sources };
}

const body = { model: 'm', messages: [{ role: 'user', content: 'the router sends each request where its prompt is cached '.repeat(12) }] };

test('the annotation names a tokenizer directory: ids in process, where --tokenizer engine alone cannot get any', async () => {
  const named = routing(DIR);
  const keys = await named.kv.keys({ model: 'm', body }, named.catalog.endpoints());
  assert.ok(typeof keys === 'object' && keys.keysAt(16).length > 2, String(keys));
  assert.deepEqual(named.sources, ['path']);

  const plain = routing(undefined);
  assert.equal(await plain.kv.keys({ model: 'm', body }, plain.catalog.endpoints()), 'engine-error');
});

test('--tokenizers MODEL=... wins over the annotation; the annotation off turns tokenization off', async () => {
  const flagged = routing(DIR, { m: 'engine' });
  assert.equal(await flagged.kv.keys({ model: 'm', body }, flagged.catalog.endpoints()), 'engine-error');
  const off = routing('off');
  assert.equal(await off.kv.keys({ model: 'm', body }, off.catalog.endpoints()), 'off');
});
