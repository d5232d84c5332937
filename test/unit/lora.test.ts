// Issue 16, the pure parts: the --lora-adapters flag and the llm-router/lora-adapters annotation, the catalog's answer
// for an adapter, which endpoint loads it and which adapter gives up its slot, what a load call's answer means, and the
// adapter manager over a fake engine admin (one load, eviction order, spill, cooldown).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ModelCatalog } from '../../src/router/catalog/catalog.js';
import { loadRouterConfig } from '../../src/router/config/config.js';
import type { Endpoint } from '../../src/router/core/endpoint.js';
import { parseAdapterAnnotation, parseAdapterFlag, type AdapterObserver, type LoadResult } from '../../src/router/core/lora.js';
import type { AdapterRoute, Resolution } from '../../src/router/core/model.js';
import { desiredState } from '../../src/router/discovery/kubernetes/desired.js';
import type { AdapterAdmin } from '../../src/router/adapters/engine-admin.js';
import {
  adapterApi,
  classifyLoad,
  classifySglangLoad,
  engineMessage,
  sglangSlots,
  sglangUnloadDone,
  unloadDone,
} from '../../src/router/adapters/engine-apis.js';
import { AdapterManager, parseAdapterUses, type AdapterUses } from '../../src/router/adapters/manager.js';
import { chooseLoader, chooseVictim, shouldSpill, type LoaderFacts } from '../../src/router/adapters/placement.js';
import { parseMaxLoras } from '../../src/router/health/engine-stats.js';
import { listedAdapters, sglangListedAdapters } from '../../src/router/health/rules.js';
import { createLogger } from '../../src/router/util/log.js';
import { testEndpoint } from '../support/endpoints.js';

test('--lora-adapters: NAME@BASE=PATH; paths keep their = and @; bad entries are refused with why', () => {
  assert.deepEqual(parseAdapterFlag('sql@llama=/a/sql'), { ok: true, value: { name: 'sql', base: 'llama', path: '/a/sql' } });
  assert.deepEqual(parseAdapterFlag(' x@org/m-7b = s3://b/k=v@2 '), {
    ok: true,
    value: { name: 'x', base: 'org/m-7b', path: 's3://b/k=v@2' },
  });
  for (const bad of ['sql=/a', '@llama=/a', 'sql@=/a', 'sql@llama=', 'sql@llama', 'a b@llama=/p'])
    assert.equal(parseAdapterFlag(bad).ok, false, bad);

  const config = loadRouterConfig(
    ['--static-backends', 'http://e:8000', '--static-models', 'llama', '--lora-adapters', 'a@llama=/p/a,b@other=/p/b'],
    {},
  );
  assert.deepEqual(config.lora.adapters, [
    { name: 'a', base: 'llama', path: '/p/a' },
    { name: 'b', base: 'other', path: '/p/b' },
  ]);
  assert.deepEqual([config.lora.maxLorasPerEngine, config.lora.spillThreshold, config.lora.loadCooldownMs], [1, 32, 30_000]);
  const refuses = (flags: string[], why: RegExp): void =>
    assert.throws(() => loadRouterConfig(['--static-backends', 'http://e:8000', '--static-models', 'llama', ...flags], {}), why);
  refuses(['--lora-adapters', 'a@llama=/1,a@llama=/2'], /a is given twice/);
  refuses(['--lora-adapters', 'llama@m=/1'], /also a model or alias name/);
  refuses(['--lora-adapters', 'nobase=/1'], /must look like NAME@BASE=PATH/);
  // env and YAML like every flag
  assert.equal(loadRouterConfig([], { LLM_ROUTER_LORA_ADAPTERS: 'e@m=/e' }).lora.adapters[0]?.name, 'e');
});

test('the llm-router/lora-adapters annotation: NAME=PATH pairs of the workload model; bad entries are reported, the rest kept', () => {
  assert.deepEqual(parseAdapterAnnotation('sql=/a/sql, chat = hf://org/chat-lora,,', 'llama'), {
    adapters: [
      { name: 'sql', base: 'llama', path: '/a/sql' },
      { name: 'chat', base: 'llama', path: 'hf://org/chat-lora' },
    ],
    invalid: [],
  });
  const deployment = (name: string, annotation: string, on: 'workload' | 'template') => ({
    kind: 'Deployment',
    metadata: {
      name,
      namespace: 'ns',
      annotations: {
        'llm-router/models': `${name}-base,${name}-alias`,
        ...(on === 'workload' ? { 'llm-router/lora-adapters': annotation } : {}),
      },
    },
    spec: {
      replicas: 0,
      template: { metadata: on === 'template' ? { annotations: { 'llm-router/lora-adapters': annotation } } : {} },
    },
  });
  const d = desiredState([], [deployment('w', 'b=/p/b,a=/p/a,broken', 'workload'), deployment('t', 'c=/p/c', 'template')], {
    port: 8000,
    scheme: 'http',
    modelLabel: 'model',
  });
  assert.deepEqual(d.adapters, [
    { name: 'a', base: 'w-base', path: '/p/a' },
    { name: 'b', base: 'w-base', path: '/p/b' },
    { name: 'c', base: 't-base', path: '/p/c' },
  ]);
  assert.equal(d.invalid.length, 1);
  assert.match(d.invalid[0]?.why ?? '', /llm-router\/lora-adapters: "broken" must look like NAME=PATH/);
});

/** A catalog with base `llama` on endpoints a and b (ready), an adapter declared for it, and `zero` at zero. */
function catalog(): ModelCatalog {
  const c = new ModelCatalog();
  c.setDeclarations('static', ['llama']);
  c.setEndpoints('static', [
    { id: 'a', url: 'http://a:8000', models: ['llama'] },
    { id: 'b', url: 'http://b:8000', models: ['llama'] },
  ]);
  c.setAdapterDeclarations('lora-adapters', [
    { name: 'sql', base: 'llama', path: '/p/sql' },
    { name: 'zad', base: 'zero', path: '/p/zad' },
  ]);
  for (const e of c.endpoints()) c.setState(e, 'ready');
  return c;
}

function ep(c: ModelCatalog, id: string): Endpoint {
  const e = c.endpoints().find((x) => x.id === id);
  assert.ok(e);
  return e;
}

const ids = (list: readonly Endpoint[] | undefined): string[] => (list ?? []).map((e) => e.id);

test('catalog: a declared adapter follows its base; holders are the candidates; engines list what they hold', () => {
  const c = catalog();
  const sql = c.resolve('sql') as Extract<Resolution, { kind: 'routable' }>;
  assert.equal(sql.kind, 'routable', 'no holder, base ready: ready, the first request loads it');
  assert.deepEqual([ids(sql.candidates), ids(sql.adapter?.endpoints), sql.base, sql.adapter?.path], [[], ['a', 'b'], 'llama', '/p/sql']);
  // the base of a declared adapter is declared: at zero, the adapter is too
  assert.deepEqual(c.resolve('zad'), { kind: 'unavailable', requested: 'zad', model: 'zad', state: 'scaled-to-zero', base: 'zero' });
  assert.equal(c.model('zero')?.status, 'scaled-to-zero');
  assert.deepEqual(c.resolve('nope'), { kind: 'unknown', requested: 'nope' });

  c.recordAdapters(
    ep(c, 'b'),
    new Map([
      ['sql', 'llama'],
      ['own', 'llama'],
    ]),
    0,
  );
  const held = c.resolve('sql') as Extract<Resolution, { kind: 'routable' }>;
  assert.deepEqual([ids(held.candidates), ids(held.adapter?.endpoints)], [['b'], ['b', 'a']]);
  assert.deepEqual(c.model('sql')?.adapter, { parent: 'llama', path: '/p/sql', loadedEndpoints: 1 });
  // an adapter only an engine lists is served there, and unknown once no engine lists it
  assert.equal(c.resolve('own').kind, 'routable');
  assert.deepEqual(c.model('own')?.adapter, { parent: 'llama', loadedEndpoints: 1 });
  c.setState(ep(c, 'b'), 'failed');
  assert.equal((c.resolve('own') as { state?: string }).state, 'unavailable');
  c.setState(ep(c, 'b'), 'ready');
  c.recordAdapters(ep(c, 'b'), new Map(), 0);
  assert.equal(c.resolve('own').kind, 'unknown');

  // no ready endpoint of the base loads adapters at run time: a declared adapter nobody holds is unavailable
  c.recordAdapterLoading(ep(c, 'a'), false);
  c.recordAdapterLoading(ep(c, 'b'), false);
  assert.equal((c.resolve('sql') as { state?: string }).state, 'unavailable');
});

test('catalog: a load the router made survives a listing from a probe sent before it; a later listing is the truth', () => {
  const c = catalog();
  const a = ep(c, 'a');
  const before = Date.now() - 1_000;
  c.adapterLoaded(a, 'sql', 'llama');
  c.recordAdapters(a, new Map(), before);
  assert.deepEqual([...a.adapters.keys()], ['sql'], 'the older listing did not see the load');
  c.recordAdapters(a, new Map(), Date.now() + 1);
  assert.deepEqual([...a.adapters.keys()], [], 'the engine restarted without it: learned, not assumed');
  c.recordAdapters(a, new Map([['sql', 'llama']]), Date.now() + 2);
  c.adapterGone(a, 'sql');
  c.recordAdapters(a, new Map([['sql', 'llama']]), before);
  assert.deepEqual([...a.adapters.keys()], [], 'an unload is not undone by an older listing either');
});

test('catalog: the same declarations and listings in another order give the same answers', () => {
  const build = (order: number[]): ModelCatalog => {
    // one clock for both: endpoints carry the times they were discovered
    const c = new ModelCatalog({ now: () => 1_000 });
    const steps = [
      () => c.setAdapterDeclarations('lora-adapters', [{ name: 'x', base: 'm', path: '/1' }]),
      () => c.setAdapterDeclarations('kubernetes', [{ name: 'x', base: 'm', path: '/2' }]),
      () => c.setEndpoints('static', [{ id: 'e', url: 'http://e', models: ['m'] }]),
      () => c.setDeclarations('static', ['m']),
    ];
    for (const i of order) steps[i]?.();
    for (const e of c.endpoints()) c.setState(e, 'ready');
    c.recordAdapters(ep(c, 'e'), new Map([['y', 'm']]), 0);
    return c;
  };
  const one = build([0, 1, 2, 3]);
  const two = build([3, 2, 1, 0]);
  assert.deepEqual(JSON.stringify(one.models()), JSON.stringify(two.models()));
  for (const m of ['x', 'y', 'm']) assert.deepEqual(JSON.stringify(one.resolve(m)), JSON.stringify(two.resolve(m)));
  assert.equal(one.model('x')?.adapter?.path, '/2', 'the first source in name order declares it');
});

function fakeEndpoint(id: string, o: { adapters?: string[]; slots?: number; inFlight?: number; canLoad?: boolean } = {}): Endpoint {
  return testEndpoint(`http://${id}:8000`, {
    id,
    inFlight: o.inFlight ?? 0,
    adapters: new Map((o.adapters ?? []).map((n) => [n, 'm'])),
    adapterSlots: o.slots,
    canLoadAdapters: o.canLoad,
  });
}

test('placement: a free slot first, then an endpoint with an adapter to unload, then the least loaded; never one that refuses loads', () => {
  const facts = (o: Partial<LoaderFacts> = {}): LoaderFacts => ({
    defaultSlots: 1,
    reserved: () => 0,
    evictable: () => false,
    excluded: () => false,
    load: (e) => e.inFlight,
    ...o,
  });
  const full = fakeEndpoint('full', { adapters: ['x'], slots: 1 });
  const busy = fakeEndpoint('busy', { slots: 4, inFlight: 9 });
  const idle = fakeEndpoint('idle', { slots: 2 });
  assert.equal(chooseLoader('a', [full, busy, idle], facts())?.id, 'idle');
  assert.equal(chooseLoader('a', [full, busy], facts())?.id, 'busy', 'a free slot beats a lower load');
  assert.equal(chooseLoader('a', [full, busy], facts({ reserved: (e) => (e === busy ? 4 : 0) }))?.id, 'full', 'loads under way take slots');
  const other = fakeEndpoint('other', { adapters: ['y'], slots: 1, inFlight: 3 });
  assert.equal(chooseLoader('a', [full, other], facts({ evictable: (e) => e === other }))?.id, 'other', 'one with an adapter to unload');
  assert.equal(chooseLoader('a', [fakeEndpoint('no', { canLoad: false }), full], facts())?.id, 'full');
  assert.equal(chooseLoader('x', [full], facts()), undefined, 'it holds it already');
  assert.equal(chooseLoader('a', [idle], facts({ excluded: () => true })), undefined);
  // equal in every way: the same pick for the same adapter whatever the order (every replica agrees)
  const p = fakeEndpoint('p', { slots: 2 });
  const q = fakeEndpoint('q', { slots: 2 });
  for (const name of ['a', 'b', 'c', 'd']) assert.equal(chooseLoader(name, [p, q], facts())?.id, chooseLoader(name, [q, p], facts())?.id);

  assert.equal(
    chooseVictim([
      { name: 'old-busy', inFlight: 1, lastUsed: 1 },
      { name: 'new', inFlight: 0, lastUsed: 30 },
      { name: 'old', inFlight: 0, lastUsed: 20 },
    ]),
    'old',
  );
  assert.equal(chooseVictim([{ name: 'busy', inFlight: 2, lastUsed: 0 }]), undefined);
  assert.equal(
    shouldSpill([busy, idle], 5, (e) => e.inFlight),
    false,
  );
  assert.equal(
    shouldSpill([busy], 5, (e) => e.inFlight),
    true,
  );
  assert.equal(
    shouldSpill([busy], 0, (e) => e.inFlight),
    false,
    '0: never',
  );
});

test('load answers: 200 and 400 "already loaded" are loads, 404 Not Found of a missing route is no runtime loading, the rest failures', () => {
  assert.equal(classifyLoad(200, "Success: LoRA adapter 'x' added successfully.").result, 'loaded');
  const already = JSON.stringify({
    error: { message: "The lora adapter 'x' has already been loaded.", type: 'BadRequestError', code: 400 },
  });
  assert.equal(classifyLoad(400, already).result, 'already-loaded');
  assert.equal(
    classifyLoad(400, JSON.stringify({ object: 'error', message: 'The lora adapter x has already been loaded' })).result,
    'already-loaded',
  );
  assert.equal(classifyLoad(404, '{"detail":"Not Found"}').result, 'unsupported');
  assert.equal(classifyLoad(405, '{"detail":"Method Not Allowed"}').result, 'unsupported');
  const missing = JSON.stringify({
    error: { message: 'Loading lora x failed: No adapter found for /p', type: 'NotFoundError', code: 404 },
  });
  assert.deepEqual(classifyLoad(404, missing), { result: 'failed', detail: 'Loading lora x failed: No adapter found for /p' });
  assert.deepEqual(classifyLoad(500, 'boom\n  trace'), { result: 'failed', detail: 'boom trace' });
  assert.equal(engineMessage('x'.repeat(1000)).length, 303, 'cut');
  assert.equal(unloadDone(404, JSON.stringify({ error: { message: "The lora adapter 'x' cannot be found." } })), true);
  assert.equal(unloadDone(404, '{"detail":"Not Found"}'), false);
});

test('SGLang load answers: success, "already exists" is a load, "LoRA is not enabled" and a missing route are no runtime loading', () => {
  const ok = JSON.stringify({ success: true, error_message: null, loaded_adapters: { x: '/p' } });
  const fail = (message: string): string => JSON.stringify({ success: false, error_message: message, loaded_adapters: null });
  assert.equal(classifySglangLoad(200, ok).result, 'loaded');
  assert.equal(classifySglangLoad(400, fail("LoRA with name x already exists. Loaded LoRAs: dict_keys(['x'])")).result, 'already-loaded');
  assert.equal(classifySglangLoad(400, fail('LoRA is not enabled. Please set `--enable-lora` to enable LoRA.')).result, 'unsupported');
  assert.equal(classifySglangLoad(404, '{"detail":"Not Found"}').result, 'unsupported');
  const full = 'Cannot load LoRA adapter x at path /p. Maximum number of loaded LoRA adapters is 1.';
  assert.deepEqual(classifySglangLoad(400, fail(full)), { result: 'failed', detail: full });
  assert.equal(classifySglangLoad(200, fail('no weights')).result, 'failed', 'success:false fails whatever the status');
  assert.equal(sglangUnloadDone(200, ok), true);
  assert.equal(sglangUnloadDone(400, fail('LoRA with name x does not exist. Loaded LoRAs: dict_keys([])')), true, 'it never held it');
  assert.equal(sglangUnloadDone(400, fail('dp_size must be 1 for dynamic lora loading')), false);
  assert.equal(sglangUnloadDone(404, '{"detail":"Not Found"}'), false);
});

test('per engine kind: SGLang names an adapter BASE:ADAPTER and tells its slots in its server info; vLLM and the others as vLLM', () => {
  const sglang = adapterApi('sglang');
  assert.deepEqual([sglang.loadPath, sglang.unloadPath], ['/load_lora_adapter', '/unload_lora_adapter']);
  assert.equal(sglang.requestModel('llama', 'sql'), 'llama:sql');
  assert.deepEqual(sglang.infoPaths, ['/server_info', '/get_server_info']);
  assert.equal(sglangSlots({ max_loaded_loras: 3, max_loras_per_batch: 8 }), 3);
  assert.equal(sglangSlots({ max_loaded_loras: null, max_loras_per_batch: 8 }), 8);
  assert.equal(sglangSlots({ enable_lora: false }), undefined);
  for (const kind of ['vllm', 'openai', 'tgi'] as const) {
    const api = adapterApi(kind);
    assert.deepEqual([api.loadPath, api.requestModel('llama', 'sql'), api.infoPaths.length], ['/v1/load_lora_adapter', 'sql', 0]);
  }
  // SGLang's /v1/models speaks of adapters only in releases whose cards carry `parent` (null for the base)
  const card = (id: string, parent?: string | null): object => ({ id, object: 'model', ...(parent === undefined ? {} : { parent }) });
  assert.equal(sglangListedAdapters({ data: [card('llama')] }), undefined);
  assert.deepEqual([...(sglangListedAdapters({ data: [card('llama', null)] }) ?? [1])], []);
  assert.deepEqual([...(sglangListedAdapters({ data: [card('llama', null), card('sql', 'llama')] }) ?? [])], [['sql', 'llama']]);
});

test('engine signals: max_lora of the newest vllm:lora_requests_info, and the adapters /v1/models lists with a parent', () => {
  const text = [
    '# TYPE vllm:lora_requests_info gauge',
    'vllm:lora_requests_info{max_lora="2",running_lora_adapters="",waiting_lora_adapters=""} 100.0',
    'vllm:lora_requests_info{max_lora="4",running_lora_adapters="a",waiting_lora_adapters="b,c"} 200.5',
  ].join('\n');
  assert.equal(parseMaxLoras(text), 4);
  assert.equal(parseMaxLoras('vllm:num_requests_running 1'), undefined);
  const listing = {
    data: [
      { id: 'llama', parent: null },
      { id: 'sql', parent: 'llama', root: '/p' },
      { id: 7, parent: 'x' },
    ],
  };
  assert.deepEqual([...listedAdapters(listing)], [['sql', 'llama']]);
});

/** An engine admin that loads after a tick and records what it was asked, with answers chosen per endpoint. */
class FakeAdmin implements AdapterAdmin {
  readonly asked: string[] = [];
  constructor(private readonly answer: (e: Endpoint, name: string) => LoadResult = () => 'loaded') {}
  async load(e: Endpoint, name: string): Promise<{ result: LoadResult; detail: string }> {
    this.asked.push(`load ${name} on ${e.id}`);
    await new Promise((r) => setTimeout(r, 5));
    const result = this.answer(e, name);
    return { result, detail: result === 'failed' ? `no adapter ${name}` : 'ok' };
  }
  async unload(e: Endpoint, name: string): Promise<{ ok: boolean; detail: string }> {
    this.asked.push(`unload ${name} on ${e.id}`);
    return { ok: true, detail: 'ok' };
  }
  async close(): Promise<void> {}
}

const quiet: AdapterObserver = { loaded: () => undefined, unloaded: () => undefined, request: () => undefined };
const log = createLogger({ level: 'silent', format: 'json' });

function manager(c: ModelCatalog, admin: AdapterAdmin, o: { slots?: number; spill?: number } = {}): AdapterManager {
  return new AdapterManager(
    c,
    admin,
    quiet,
    { defaultSlots: o.slots ?? 1, spillThreshold: o.spill ?? 0, cooldownMs: 60_000, statsIntervalMs: 1_000 },
    log,
  );
}

function routeOf(c: ModelCatalog, name: string): AdapterRoute {
  const r = c.resolve(name);
  assert.ok(r.kind === 'routable' && r.adapter, `${name} is routable`);
  return r.adapter;
}

test('manager: concurrent requests share one load; a full endpoint unloads its least recently used idle adapter', async () => {
  const c = new ModelCatalog();
  c.setEndpoints('static', [{ id: 'a', url: 'http://a:8000', models: ['m'] }]);
  c.setAdapterDeclarations(
    'lora-adapters',
    ['x', 'y', 'z'].map((n) => ({ name: n, base: 'm', path: `/p/${n}` })),
  );
  c.setState(ep(c, 'a'), 'ready');
  c.recordAdapters(ep(c, 'a'), new Map([['own', 'm']]), 0);
  const admin = new FakeAdmin();
  const m = manager(c, admin, { slots: 3 });
  const ready = await Promise.all([1, 2, 3].map(() => m.prepare(routeOf(c, 'x'), undefined)));
  assert.deepEqual(
    ready,
    [1, 2, 3].map(() => ({ kind: 'ready', waited: true })),
  );
  assert.deepEqual(admin.asked, ['load x on a']);
  await m.prepare(routeOf(c, 'y'), undefined);
  // x is in use now: y is the one to go, though x was loaded first; `own` (the engine's) never goes
  const a = ep(c, 'a');
  m.ledger('x').requestStarted(a);
  await m.prepare(routeOf(c, 'z'), undefined);
  assert.deepEqual(admin.asked, ['load x on a', 'load y on a', 'unload y on a', 'load z on a']);
  assert.deepEqual([...a.adapters.keys()].sort(), ['own', 'x', 'z']);
  // every adapter busy or the engine's own: the engine is asked to hold one more
  m.ledger('z').requestStarted(a);
  await m.prepare(routeOf(c, 'y'), undefined);
  assert.deepEqual(admin.asked.slice(4), ['load y on a']);
  await m.stop();
});

test('manager: an adapter another replica or worker loaded (400 already loaded) is never unloaded by this one', async () => {
  const c = new ModelCatalog();
  c.setEndpoints('static', [{ id: 'a', url: 'http://a:8000', models: ['m'] }]);
  c.setAdapterDeclarations(
    'lora-adapters',
    ['theirs', 'mine', 'next'].map((n) => ({ name: n, base: 'm', path: `/p/${n}` })),
  );
  c.setState(ep(c, 'a'), 'ready');
  const admin = new FakeAdmin((_e, name) => (name === 'theirs' ? 'already-loaded' : 'loaded'));
  const m = manager(c, admin, { slots: 2 });
  await m.prepare(routeOf(c, 'theirs'), undefined);
  await m.prepare(routeOf(c, 'mine'), undefined);
  // slots full: `theirs` is the least recently used, but only `mine` is this router's to unload
  await m.prepare(routeOf(c, 'next'), undefined);
  assert.deepEqual(admin.asked, ['load theirs on a', 'load mine on a', 'unload mine on a', 'load next on a']);
  assert.deepEqual([...ep(c, 'a').adapters.keys()].sort(), ['next', 'theirs']);
  await m.stop();
});

test('manager under --workers: an adapter another worker streams on, or used last, is not unloaded; unasked workers: nothing unloaded', async () => {
  const setup = () => {
    const c = new ModelCatalog();
    c.setEndpoints('static', [{ id: 'a', url: 'http://a:8000', models: ['m'] }]);
    c.setAdapterDeclarations(
      'lora-adapters',
      ['x', 'y', 'z'].map((n) => ({ name: n, base: 'm', path: `/p/${n}` })),
    );
    c.setState(ep(c, 'a'), 'ready');
    return c;
  };
  // another worker: a request on x at a now (its stream), y idle there
  let others: AdapterUses[] = [
    {
      uses: [
        { endpoint: 'http://a:8000', adapter: 'x', inFlight: 1, lastUsed: 0 },
        { endpoint: 'http://a:8000', adapter: 'y', inFlight: 0, lastUsed: 0 },
      ],
    },
  ];
  const c = setup();
  const admin = new FakeAdmin();
  const m = new AdapterManager(
    c,
    admin,
    quiet,
    { defaultSlots: 2, spillThreshold: 0, cooldownMs: 60_000, statsIntervalMs: 1_000, otherWorkers: async () => others },
    log,
  );
  await m.prepare(routeOf(c, 'x'), undefined);
  await m.prepare(routeOf(c, 'y'), undefined);
  // x is this worker's least recently used and idle here, but the other worker streams on it: y goes
  await m.prepare(routeOf(c, 'z'), undefined);
  assert.deepEqual(admin.asked, ['load x on a', 'load y on a', 'unload y on a', 'load z on a']);
  assert.ok(ep(c, 'a').adapters.has('x'));
  // the other worker used z last (after x): x goes, though z was this worker's last
  others = [{ uses: [{ endpoint: 'http://a:8000', adapter: 'z', inFlight: 0, lastUsed: Date.now() + 60_000 }] }];
  await m.prepare(routeOf(c, 'y'), undefined);
  assert.deepEqual(admin.asked.slice(4), ['unload x on a', 'load y on a']);
  await m.stop();

  // the primary did not answer: whether another worker uses it is unknown, so nothing is unloaded
  const c2 = setup();
  const admin2 = new FakeAdmin();
  const m2 = new AdapterManager(
    c2,
    admin2,
    quiet,
    {
      defaultSlots: 1,
      spillThreshold: 0,
      cooldownMs: 60_000,
      statsIntervalMs: 1_000,
      otherWorkers: () => Promise.reject(new Error('no answer')),
    },
    log,
  );
  await m2.prepare(routeOf(c2, 'x'), undefined);
  await m2.prepare(routeOf(c2, 'y'), undefined);
  assert.deepEqual(admin2.asked, ['load x on a', 'load y on a']);
  await m2.stop();
});

test('manager: its own use is what another worker is told (a request waiting for a load counts where the adapter is held)', async () => {
  const c = new ModelCatalog();
  c.setEndpoints('static', [{ id: 'a', url: 'http://a:8000', models: ['m'] }]);
  c.setAdapterDeclarations('lora-adapters', [{ name: 'x', base: 'm', path: '/p/x' }]);
  c.setState(ep(c, 'a'), 'ready');
  const m = manager(c, new FakeAdmin(), { slots: 2 });
  await m.prepare(routeOf(c, 'x'), undefined);
  m.ledger('x').requestStarted(ep(c, 'a'));
  const release = m.claim('x');
  const uses = m.localUses().uses.map((u) => [u.endpoint, u.adapter, u.inFlight]);
  assert.deepEqual(uses, [['http://a:8000', 'x', 2]]);
  release();
  assert.deepEqual(
    parseAdapterUses({ 1: m.localUses(), 2: { uses: [{ endpoint: 1 }] }, 3: 'junk' }).map((p) => p.uses.length),
    [1, 0],
  );
  await m.stop();
});

test('manager: a failed load is answered with the engine words and that endpoint is not asked again; busy holders spill', async () => {
  const c = catalog();
  // a has the most free slots: it is asked first
  c.recordAdapterSlots(ep(c, 'a'), 8);
  const admin = new FakeAdmin((e) => (e.id === 'a' ? 'failed' : 'loaded'));
  const m = manager(c, admin, { slots: 4, spill: 2 });
  assert.deepEqual(await m.prepare(routeOf(c, 'sql'), undefined), { kind: 'failed', detail: 'no adapter sql' });
  assert.deepEqual(await m.prepare(routeOf(c, 'sql'), undefined), { kind: 'ready', waited: true });
  assert.deepEqual(admin.asked, ['load sql on a', 'load sql on b']);
  // b holds it and is loaded past the threshold: the adapter goes on one more endpoint in the background (a is cooling)
  const b = ep(c, 'b');
  c.requestStarted(b);
  c.requestStarted(b);
  const asked = admin.asked.length;
  assert.deepEqual(await m.prepare(routeOf(c, 'sql'), undefined), { kind: 'ready', waited: false });
  await new Promise((r) => setTimeout(r, 20));
  assert.deepEqual(admin.asked.slice(asked), [], 'a failed a moment ago: not asked again');

  const c2 = catalog();
  const admin2 = new FakeAdmin();
  const m2 = manager(c2, admin2, { slots: 4, spill: 2 });
  await m2.prepare(routeOf(c2, 'sql'), undefined);
  const holder = c2.endpoints().find((e) => e.adapters.has('sql')) as Endpoint;
  c2.requestStarted(holder);
  c2.requestStarted(holder);
  await m2.prepare(routeOf(c2, 'sql'), undefined);
  await new Promise((r) => setTimeout(r, 20));
  assert.equal(c2.endpoints().filter((e) => e.adapters.has('sql')).length, 2, 'spilled onto the other endpoint');
  await Promise.all([m.stop(), m2.stop()]);
});

test('manager: an engine without runtime loading (404 on the load path) is marked so, and the same request loads elsewhere', async () => {
  const c = catalog();
  c.recordAdapterSlots(ep(c, 'a'), 8);
  const admin = new FakeAdmin((e) => (e.id === 'a' ? 'unsupported' : 'loaded'));
  const m = manager(c, admin, { slots: 4 });
  assert.deepEqual(await m.prepare(routeOf(c, 'sql'), undefined), { kind: 'ready', waited: true });
  assert.deepEqual(admin.asked, ['load sql on a', 'load sql on b']);
  assert.deepEqual([ep(c, 'a').canLoadAdapters, ep(c, 'b').canLoadAdapters], [false, true]);
  // with b gone too, a declared adapter nobody holds cannot be served: 503, not a load failure
  c.recordAdapterLoading(ep(c, 'b'), false);
  c.adapterGone(ep(c, 'b'), 'sql');
  assert.equal((c.resolve('sql') as { state?: string }).state, 'unavailable');
  await m.stop();
});

test('manager: an engine that tells its slots when asked (SGLang) is asked once, before its first load, and sets the placement', async () => {
  const c = new ModelCatalog();
  c.setEndpoints('static', [
    { id: 'a', url: 'http://a:8000', models: ['m'] },
    { id: 'b', url: 'http://b:8000', models: ['m'] },
  ]);
  c.setAdapterDeclarations(
    'lora-adapters',
    ['x', 'y'].map((n) => ({ name: n, base: 'm', path: `/p/${n}` })),
  );
  c.setState(ep(c, 'a'), 'ready');
  c.setState(ep(c, 'b'), 'ready');
  class SlotAdmin extends FakeAdmin {
    async slots(e: Endpoint): Promise<number | undefined> {
      this.asked.push(`slots of ${e.id}`);
      return e.id === 'b' ? 4 : undefined;
    }
    requestModel(base: string, adapter: string): string {
      return `${base}:${adapter}`;
    }
  }
  const admin = new SlotAdmin();
  const m = manager(c, admin, { slots: 1 });
  await m.prepare(routeOf(c, 'x'), undefined);
  await m.prepare(routeOf(c, 'y'), undefined);
  // b says 4 slots, a none (the default, 1): both loads go to b, the one with free slots; no second question
  assert.deepEqual(admin.asked, ['slots of a', 'slots of b', 'load x on b', 'load y on b']);
  assert.deepEqual([ep(c, 'a').adapterSlots, ep(c, 'b').adapterSlots], [undefined, 4]);
  assert.equal(m.engineModel(routeOf(c, 'x')), 'm:x');
  assert.equal(manager(c, new FakeAdmin()).engineModel(routeOf(c, 'x')), 'x', 'an admin without its own naming: the name');
  await m.stop();
});
