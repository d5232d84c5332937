// Which tokenizer a model's requests use (src/router/kv/tokenizer-source.ts): the order (--tokenizers, the annotation,
// --tokenizer, the engines' own account of their model), endpoints that disagree, what an engine's root names; and
// the loads behind a choice: the engine serves while one loads or cannot be had, the reason said once, a Hub that could
// not be reached asked again later.
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import type { HubConfig } from '../../src/router/config/kv-config.js';
import type { Endpoint } from '../../src/router/core/endpoint.js';
import { parseTokenizerValue, type TokenizerSpec } from '../../src/router/core/tokenizer.js';
import { HubError, type HubTokenizer } from '../../src/router/kv/hub.js';
import { chooseTokenizer, ModelTokenizers, rootSpec, type TokenizerSettings } from '../../src/router/kv/tokenizer-source.js';
import { createLogger } from '../../src/router/util/log.js';
import { testEndpoint } from '../support/endpoints.js';
import { until } from '../support/within.js';

const spec = (value: string): TokenizerSpec => {
  const p = parseTokenizerValue(value, { allowAuto: true });
  if (!p.ok) throw new Error(p.why);
  return p.spec;
};

const settings = (tokenizer = 'auto', tokenizers: Record<string, string> = {}): TokenizerSettings => ({
  tokenizer: spec(tokenizer),
  tokenizers: new Map(Object.entries(tokenizers).map(([m, v]) => [m, spec(v)])),
});

const endpoint = (url: string, root: string | undefined, fields: Partial<Endpoint> = {}): Endpoint =>
  testEndpoint(url, { modelRoots: new Map(root === undefined ? [] : [['m', root]]), ...fields });

test('the order: --tokenizers, then the annotation, then --tokenizer, then what the engines serve', () => {
  const annotated = [endpoint('http://a', 'Qwen/Qwen3-8B', { tokenizer: '/tok/annotated' })];
  const plain = [endpoint('http://a', 'Qwen/Qwen3-8B')];
  assert.deepEqual(chooseTokenizer('m', annotated, settings('/tok/flag', { m: 'hf:org/pinned@v2' })), {
    spec: { kind: 'hub', repo: 'org/pinned', revision: 'v2' },
    namedBy: '--tokenizers',
  });
  assert.deepEqual(chooseTokenizer('m', annotated, settings('/tok/flag', { other: 'engine' })), {
    spec: { kind: 'path', path: '/tok/annotated' },
    namedBy: 'llm-router/tokenizer',
  });
  assert.deepEqual(chooseTokenizer('m', plain, settings('engine')), { spec: { kind: 'engine' }, namedBy: '--tokenizer' });
  assert.deepEqual(chooseTokenizer('m', plain, settings()), {
    spec: { kind: 'hub', repo: 'Qwen/Qwen3-8B', revision: undefined },
    namedBy: 'engines',
  });
});

test("auto: what an engine's root names; nothing said yet; draining endpoints count only when no other is left", () => {
  assert.deepEqual(rootSpec('Qwen/Qwen3-8B'), { spec: { kind: 'hub', repo: 'Qwen/Qwen3-8B', revision: undefined } });
  assert.deepEqual(rootSpec('/models/qwen3'), { spec: { kind: 'path', path: '/models/qwen3' } });
  for (const root of ['qwen3', 'gpt2', 'a/b/c', 'org/name@main']) {
    const r = rootSpec(root);
    assert.equal(r.spec.kind, 'engine', root);
    assert.match(r.why ?? '', /names no Hub repo/, root);
  }
  assert.match(chooseTokenizer('m', [endpoint('http://a', undefined)], settings()).why ?? '', /no engine of it has said/);
  const rolling = [endpoint('http://old', 'org/old', { draining: true }), endpoint('http://new', 'org/new')];
  assert.equal((chooseTokenizer('m', rolling, settings()).spec as { repo: string }).repo, 'org/new');
  const leaving = [endpoint('http://old', 'org/old', { draining: true })];
  assert.equal((chooseTokenizer('m', leaving, settings()).spec as { repo: string }).repo, 'org/old');
});

test('endpoints that disagree: the smallest value, whatever their order (every replica picks the same)', () => {
  const a = endpoint('http://a', 'zeta/model');
  const b = endpoint('http://b', 'alpha/model');
  for (const list of [
    [a, b],
    [b, a],
  ])
    assert.equal((chooseTokenizer('m', list, settings()).spec as { repo: string }).repo, 'alpha/model');
  const annotated = [endpoint('http://a', undefined, { tokenizer: 'engine' }), endpoint('http://b', undefined, { tokenizer: '/tok' })];
  assert.deepEqual(chooseTokenizer('m', annotated, settings()).spec, { kind: 'path', path: '/tok' });
});

const HUB: HubConfig = { endpoint: 'http://127.0.0.1:9', token: undefined, cacheDir: '/nonexistent', offline: false };

function capture(): { log: ReturnType<typeof createLogger>; lines: () => Record<string, unknown>[] } {
  let text = '';
  const out = new Writable({
    write(chunk, _enc, done) {
      text += String(chunk);
      done();
    },
  });
  return {
    log: createLogger({ level: 'info', format: 'json', out }),
    lines: () =>
      text
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

test('a Hub that cannot be reached: the engine serves, the reason is said once; asked again later, the tokenizer loads', async () => {
  let calls = 0;
  let down = true;
  const loaded: string[] = [];
  const { log, lines } = capture();
  const tokenizers = new ModelTokenizers({
    settings: settings(),
    hub: HUB,
    log,
    load: async (dir) => {
      loaded.push(dir);
      return true;
    },
    retryMs: 20,
    fetchTokenizer: async (repo, revision): Promise<HubTokenizer> => {
      calls++;
      assert.deepEqual([repo, revision], ['Qwen/Qwen3-8B', undefined]);
      if (down) throw new HubError('unreachable', 'http://127.0.0.1:9 cannot be reached (ECONNREFUSED)');
      return { dir: '/cache/models--Qwen--Qwen3-8B/snapshots/abc', commit: 'a'.repeat(40), fromCache: false };
    },
  });
  try {
    tokenizers.update(new Map([['m', [endpoint('http://a', 'Qwen/Qwen3-8B')]]]));
    assert.deepEqual(tokenizers.use('m'), { mode: 'engine', hub: false }, 'loading: the engine');
    await tokenizers.settled();
    assert.deepEqual(tokenizers.status('m'), {
      source: 'engine',
      name: 'Qwen/Qwen3-8B',
      namedBy: 'engines',
      reason: 'http://127.0.0.1:9 cannot be reached (ECONNREFUSED)',
    });
    assert.deepEqual(tokenizers.failures(), [
      { model: 'm', name: 'Qwen/Qwen3-8B', reason: 'http://127.0.0.1:9 cannot be reached (ECONNREFUSED)' },
    ]);
    await until('asked again', () => calls >= 3, 5_000, 5);
    down = false;
    await until('loaded after the Hub came back', () => tokenizers.use('m').mode !== 'engine', 5_000, 5);
    assert.deepEqual(tokenizers.use('m'), { mode: '/cache/models--Qwen--Qwen3-8B/snapshots/abc', hub: true });
    assert.deepEqual(tokenizers.status('m'), { source: 'hub', name: 'Qwen/Qwen3-8B', revision: 'a'.repeat(40), namedBy: 'engines' });
    assert.deepEqual(tokenizers.failures(), []);
    assert.deepEqual(loaded, ['/cache/models--Qwen--Qwen3-8B/snapshots/abc']);
    const warns = lines().filter((l) => l.level === 40);
    assert.equal(warns.length, 1, 'said once, not on every retry');
    assert.match(String(warns[0]?.msg), /Qwen\/Qwen3-8B cannot be had .* the engine's \/tokenize serves its models instead/);
  } finally {
    tokenizers.close();
  }
});

test('not retried: a 401, a 404, files that do not load; the flags load at start, before any model is known', async () => {
  let calls = 0;
  const tokenizers = new ModelTokenizers({
    settings: settings('hf:org/gated', { broken: '/tok/broken' }),
    hub: HUB,
    log: createLogger({ level: 'silent', format: 'json' }),
    load: async (dir) => dir !== '/tok/broken',
    retryMs: 5,
    fetchTokenizer: async () => {
      calls++;
      throw new HubError('unauthorized', 'http://127.0.0.1:9 answered 401 for org/gated');
    },
  });
  try {
    tokenizers.start();
    await tokenizers.settled();
    assert.equal(calls, 1, 'fetched at start');
    tokenizers.update(
      new Map([
        ['m', [endpoint('http://a', 'Qwen/Qwen3-8B')]],
        ['broken', []],
      ]),
    );
    await tokenizers.settled();
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(calls, 1, 'a 401 is not asked again');
    assert.match(tokenizers.status('m')?.reason ?? '', /401/);
    assert.equal(tokenizers.status('m')?.namedBy, '--tokenizer');
    assert.deepEqual(tokenizers.status('broken'), {
      source: 'engine',
      name: '/tok/broken',
      namedBy: '--tokenizers',
      reason: '/tok/broken does not load here (no readable tokenizer.json?)',
    });
    assert.deepEqual(tokenizers.use('broken'), { mode: 'engine', hub: false });
  } finally {
    tokenizers.close();
  }
});
