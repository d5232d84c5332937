// Which tokenizer a kvaware request uses: --tokenizers MODEL=... first, then the llm-router/tokenizer annotation of the
// model's endpoints (Kubernetes), then --tokenizer, then (auto) what the engines say they serve the model from. The
// engine here refuses connections, so engine mode cannot give ids (engine-error) while a tokenizer in process gives
// them. Hub repos come from the project's stand-in for the Hub on 127.0.0.1 into a temporary cache.
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { KvRouting } from '../../src/router/app/kv-routing.js';
import { ModelCatalog } from '../../src/router/catalog/catalog.js';
import type { HubConfig, KvConfig } from '../../src/router/config/kv-config.js';
import { parseTokenizerValue, type TokenizerSpec } from '../../src/router/core/tokenizer.js';
import type { KvMetrics } from '../../src/router/metrics/kv-metrics.js';
import { createLogger } from '../../src/router/util/log.js';
import { FakeHub } from '../support/fake-hub.js';

const DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'tokenizer');
const ENGINE = 'http://127.0.0.1:1';
const routings: KvRouting[] = [];
let hub: FakeHub;
let cacheDir: string;

before(async () => {
  cacheDir = await mkdtemp(path.join(tmpdir(), 'llm-router-kvtok-'));
  hub = await FakeHub.start({
    'org/small': {
      files: {
        'tokenizer.json': await readFile(path.join(DIR, 'tokenizer.json')),
        'tokenizer_config.json': await readFile(path.join(DIR, 'tokenizer_config.json')),
      },
    },
  });
});

after(async () => {
  for (const r of routings) await r.stop();
  await hub.stop();
  await rm(cacheDir, { recursive: true, force: true });
});

const spec = (value: string): TokenizerSpec => {
  const p = parseTokenizerValue(value, { allowAuto: true });
  if (!p.ok) throw new Error(p.why);
  return p.spec;
};

interface Setup {
  /** the llm-router/tokenizer annotation of the endpoint */
  readonly annotation?: string;
  /** --tokenizers */
  readonly tokenizers?: Record<string, string>;
  /** --tokenizer (default auto) */
  readonly tokenizer?: string;
  /** what the engine says it serves `m` from, per endpoint */
  readonly roots?: readonly string[];
  readonly hub?: Partial<HubConfig>;
  readonly kvawarePolicy?: boolean;
  readonly declared?: readonly string[];
}

function routing(s: Setup = {}): { kv: KvRouting; catalog: ModelCatalog; sources: string[] } {
  const catalog = new ModelCatalog();
  catalog.setDeclarations(
    'kubernetes',
    (s.declared ?? ['m']).map((model) => ({ model })),
  );
  const roots = s.roots ?? [];
  catalog.setEndpoints(
    'kubernetes',
    (roots.length > 0 ? roots : [undefined]).map((_, i) => ({
      id: `ns/p${i}`,
      url: ENGINE,
      models: ['m'],
      ...(s.annotation ? { tokenizer: s.annotation } : {}),
    })),
  );
  catalog.endpoints().forEach((e, i) => {
    const root = roots[Number(e.id.slice('ns/p'.length))] ?? roots[i];
    if (root !== undefined) catalog.recordModelRoots(e, new Map([['m', root]]));
  });
  const config: KvConfig = {
    eventsPort: 5557,
    replayPort: undefined,
    topic: '',
    blockSize: 16,
    maxBlocksPerEndpoint: 1000,
    tokenizer: spec(s.tokenizer ?? 'auto'),
    tokenizers: new Map(Object.entries(s.tokenizers ?? {}).map(([m, v]) => [m, spec(v)])),
    tokenizerTimeoutMs: 2000,
    tokenizerMaxChars: 512 * 1024,
    trustRequestChatTemplate: false,
    hub: { endpoint: hub.url, token: undefined, cacheDir, offline: false, ...s.hub },
    pendingMs: 0,
  };
  const sources: string[] = [];
  const metrics = { tokenized: (source: string) => sources.push(source) } as unknown as KvMetrics;
  const kv = new KvRouting(
    catalog,
    { kv: config, engineApiKey: undefined, engineTls: undefined, kvawarePolicy: s.kvawarePolicy ?? false },
    metrics,
    createLogger({ level: 'silent', format: 'json' }),
  );
  routings.push(kv);
  kv.start();
  return { kv, catalog, sources };
}

const body = { model: 'm', messages: [{ role: 'user', content: 'the router sends each request where its prompt is cached '.repeat(12) }] };

test('the annotation names a tokenizer directory: the engine while it loads, then ids in process', async () => {
  const named = routing({ annotation: DIR, tokenizer: 'engine' });
  assert.equal(await named.kv.keys({ model: 'm', body }, named.catalog.endpoints()), 'engine-error', 'loading: the engine serves');
  assert.equal(named.kv.tokenizerOf('m')?.source, 'engine');
  await named.kv.tokenizersSettled();
  const keys = await named.kv.keys({ model: 'm', body }, named.catalog.endpoints());
  assert.ok(typeof keys === 'object' && keys.keysAt(16).length > 2, String(keys));
  assert.deepEqual(named.sources, ['path']);
  assert.deepEqual(named.kv.tokenizerOf('m'), { source: 'path', name: DIR, namedBy: 'llm-router/tokenizer' });

  const plain = routing({ tokenizer: 'engine' });
  assert.equal(await plain.kv.keys({ model: 'm', body }, plain.catalog.endpoints()), 'engine-error');
  assert.deepEqual(plain.kv.tokenizerOf('m'), { source: 'engine', namedBy: '--tokenizer' });
});

test('--tokenizers MODEL=... wins over the annotation; the annotation off turns tokenization off', async () => {
  const flagged = routing({ annotation: DIR, tokenizers: { m: 'engine' } });
  await flagged.kv.tokenizersSettled();
  assert.equal(await flagged.kv.keys({ model: 'm', body }, flagged.catalog.endpoints()), 'engine-error');
  const off = routing({ annotation: 'off', roots: ['org/small'] });
  assert.equal(await off.kv.keys({ model: 'm', body }, off.catalog.endpoints()), 'off');
  assert.equal(off.kv.tokenizerOf('m')?.source, 'off');
});

test('auto: the repo the engine serves is fetched from the Hub, then tokenizes in process (metric source hub)', async () => {
  const auto = routing({ roots: ['org/small'] });
  await auto.kv.tokenizersSettled();
  const keys = await auto.kv.keys({ model: 'm', body }, auto.catalog.endpoints());
  assert.ok(typeof keys === 'object' && keys.keysAt(16).length > 2, String(keys));
  assert.deepEqual(auto.sources, ['hub']);
  const status = auto.kv.tokenizerOf('m');
  assert.equal(status?.source, 'hub');
  assert.equal(status?.name, 'org/small');
  assert.equal(status?.namedBy, 'engines');
  assert.match(status?.revision ?? '', /^[0-9a-f]{40}$/);
  assert.deepEqual(auto.kv.warnings(), []);
});

test('auto: a served name that names no repo, or no root yet, goes by the engine and says why; a root path is a directory', async () => {
  const named = routing({ roots: ['qwen3'] });
  await named.kv.tokenizersSettled();
  assert.equal(await named.kv.keys({ model: 'm', body }, named.catalog.endpoints()), 'engine-error');
  assert.match(named.kv.tokenizerOf('m')?.reason ?? '', /"qwen3", which names no Hub repo/);
  assert.deepEqual(hub.asked('qwen3'), [], 'only org/name is looked up');

  const unprobed = routing();
  assert.match(unprobed.kv.tokenizerOf('m')?.reason ?? '', /no engine of it has said/);

  const dir = routing({ roots: [DIR] });
  await dir.kv.tokenizersSettled();
  assert.deepEqual(dir.kv.tokenizerOf('m'), { source: 'path', name: DIR, namedBy: 'engines' });
});

test('endpoints that disagree: the smallest root, so that every replica picks the same', async () => {
  const a = routing({ roots: ['zzz/other', 'org/small'] });
  const b = routing({ roots: ['org/small', 'zzz/other'] });
  assert.equal(a.kv.tokenizerOf('m')?.name, 'org/small');
  assert.equal(b.kv.tokenizerOf('m')?.name, 'org/small');
  await Promise.all([a.kv.tokenizersSettled(), b.kv.tokenizersSettled()]);
});

test('a tokenizer that cannot be had (offline and not cached, a repo missing): the engine, the reason in status and warnings', async () => {
  const offline = routing({ roots: ['org/not-cached'], hub: { offline: true } });
  await offline.kv.tokenizersSettled();
  assert.equal(await offline.kv.keys({ model: 'm', body }, offline.catalog.endpoints()), 'engine-error');
  const status = offline.kv.tokenizerOf('m');
  assert.equal(status?.source, 'engine');
  assert.equal(status?.name, 'org/not-cached');
  assert.match(status?.reason ?? '', /HF_HUB_OFFLINE/);
  assert.deepEqual(
    offline.kv.warnings().map((w) => w.kind),
    ['tokenizer-unavailable'],
  );

  const missing = routing({ tokenizer: 'hf:org/missing@v1' });
  await missing.kv.tokenizersSettled();
  assert.equal(missing.kv.tokenizerOf('m')?.revision, 'v1');
  assert.match(missing.kv.tokenizerOf('m')?.reason ?? '', /404/);
});

test('warnings: kvaware with no event source for a model; --tokenizers for a model nothing declares or serves', async () => {
  const r = routing({ kvawarePolicy: true, tokenizers: { ghost: 'engine' }, tokenizer: 'engine' });
  assert.deepEqual(
    r.kv
      .warnings()
      .map((w) => `${w.kind} ${w.model}`)
      .sort(),
    ['no-kv-events m', 'tokenizers-unknown-model ghost'],
  );
  // a per-request choice of kvaware (--allow-routing-header) is not warned of, and a declared model is known
  const quiet = routing({ kvawarePolicy: false, tokenizers: { m: 'engine' }, tokenizer: 'engine' });
  assert.deepEqual(quiet.kv.warnings(), []);
});
