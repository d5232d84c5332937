// The routing flags: policy names, --session-key, --prefix-block-chars, --prefix-balance-epsilon, --allow-routing-header;
// kvaware's settings, its tokenizers and the Hub they may come from.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadRouterConfig } from '../../src/router/config/config.js';

test('routing defaults: round robin, 256-char blocks, epsilon 0.25, no routing header, scrape every second', () => {
  const c = loadRouterConfig([], {});
  assert.equal(c.routingLogic, 'roundrobin');
  assert.equal(c.sessionKey, undefined);
  assert.equal(c.prefixBlockChars, 256);
  assert.equal(c.prefixBalanceEpsilon, 0.25);
  assert.equal(c.allowRoutingHeader, false);
  assert.equal(c.engineStatsIntervalMs, 1000);
});

test('every policy name is accepted; vllm_router names that do not exist here are refused with the list', () => {
  for (const name of ['roundrobin', 'least-load', 'prefixaware', 'kvaware'])
    assert.equal(loadRouterConfig(['--routing-logic', name], {}).routingLogic, name);
  assert.throws(
    () => loadRouterConfig(['--routing-logic', 'disaggregated_prefill'], {}),
    /choose one of: roundrobin, least-load, session, prefixaware, kvaware/,
  );
});

test('kvaware: static backends name their event publishers and replay sockets zipped, an empty item for none', () => {
  const c = loadRouterConfig(
    [
      '--routing-logic',
      'kvaware',
      '--static-backends',
      'http://a:8000,http://b:8000,http://c:8000',
      '--static-models',
      'm,m,m',
      '--static-backend-kv-events',
      'tcp://a:5557,,tcp://c:5557',
      '--static-backend-kv-replay',
      'tcp://a:5558,,',
    ],
    {},
  );
  assert.deepEqual(
    c.staticBackends.map((b) => b.kvEvents),
    [{ eventsUrls: ['tcp://a:5557'], replayUrls: ['tcp://a:5558'] }, undefined, { eventsUrls: ['tcp://c:5557'], replayUrls: [undefined] }],
  );
  const base = ['--static-backends', 'http://a:8000,http://b:8000', '--static-models', 'm,m'];
  assert.throws(() => loadRouterConfig([...base, '--static-backend-kv-events', 'tcp://a:5557'], {}), /zipped one to one/);
  assert.throws(() => loadRouterConfig([...base, '--static-backend-kv-events', 'http://a:5557,'], {}), /tcp:\/\/HOST:PORT/);
  assert.throws(
    () => loadRouterConfig([...base, '--static-backend-kv-replay', 'tcp://a:5558,'], {}),
    /no --static-backend-kv-events entry/,
  );
  assert.equal(loadRouterConfig([], {}).kv.blockSize, 16);
});

test('kvaware tokenizers: auto by default; engine, off, a directory or a Hub repo, per model too', () => {
  const t = loadRouterConfig(
    ['--tokenizer', '/models/llama', '--tokenizers', 'a=engine,b=/tok/b,c=hf:Qwen/Qwen3-8B@abc123,d=Qwen/Qwen3-8B,e=off,f=hf:gpt2'],
    {},
  );
  assert.deepEqual(t.kv.tokenizer, { kind: 'path', path: '/models/llama' });
  assert.deepEqual(
    [...t.kv.tokenizers],
    [
      ['a', { kind: 'engine' }],
      ['b', { kind: 'path', path: '/tok/b' }],
      ['c', { kind: 'hub', repo: 'Qwen/Qwen3-8B', revision: 'abc123' }],
      ['d', { kind: 'hub', repo: 'Qwen/Qwen3-8B', revision: undefined }],
      ['e', { kind: 'off' }],
      ['f', { kind: 'hub', repo: 'gpt2', revision: undefined }],
    ],
  );
  assert.deepEqual(loadRouterConfig([], {}).kv.tokenizer, { kind: 'auto' });
  assert.deepEqual(loadRouterConfig(['--tokenizer', 'engine'], {}).kv.tokenizer, { kind: 'engine' });
  // org/name is a repo, unless a directory of that name is here
  assert.deepEqual(loadRouterConfig(['--tokenizer', 'Qwen/Qwen3-8B'], {}).kv.tokenizer, {
    kind: 'hub',
    repo: 'Qwen/Qwen3-8B',
    revision: undefined,
  });
  assert.deepEqual(loadRouterConfig(['--tokenizer', 'test/fixtures'], {}).kv.tokenizer, { kind: 'path', path: 'test/fixtures' });
  assert.throws(() => loadRouterConfig(['--tokenizers', 'nomodel'], {}), /MODEL=engine, MODEL=off, MODEL=PATH or MODEL=hf:REPO/);
  assert.throws(() => loadRouterConfig(['--tokenizers', 'm=auto'], {}), /auto is only a --tokenizer value/);
  assert.throws(() => loadRouterConfig(['--tokenizer', 'hf:a/b/c'], {}), /not a Hub repo id/);
  assert.throws(() => loadRouterConfig(['--tokenizer', 'hf:org/name@'], {}), /not a revision/);
});

test('the Hub: HF_ENDPOINT, HF_TOKEN or --hf-token-file, HF_HOME / HF_HUB_CACHE, HF_HUB_OFFLINE', () => {
  const plain = loadRouterConfig([], { HOME: '/home/u' }).kv.hub;
  assert.equal(plain.endpoint, 'https://huggingface.co');
  assert.equal(plain.token, undefined);
  assert.equal(plain.offline, false);
  assert.match(plain.cacheDir, /\.cache\/huggingface\/hub$/);
  assert.equal(loadRouterConfig([], { XDG_CACHE_HOME: '/x' }).kv.hub.cacheDir, '/x/huggingface/hub');
  assert.equal(loadRouterConfig([], { HF_HOME: '/hf', XDG_CACHE_HOME: '/x' }).kv.hub.cacheDir, '/hf/hub');
  assert.equal(loadRouterConfig([], { HF_HOME: '/hf', HF_HUB_CACHE: '/cache' }).kv.hub.cacheDir, '/cache');
  const env = { HF_ENDPOINT: 'http://127.0.0.1:9/', HF_TOKEN: 'hf_abc', HF_HUB_OFFLINE: '1' };
  assert.deepEqual(
    { ...loadRouterConfig([], env).kv.hub, cacheDir: '' },
    { endpoint: 'http://127.0.0.1:9', token: 'hf_abc', offline: true, cacheDir: '' },
  );
  for (const [value, offline] of [
    ['TRUE', true],
    ['yes', true],
    ['0', false],
    ['', false],
  ] as const)
    assert.equal(loadRouterConfig([], { HF_HUB_OFFLINE: value }).kv.hub.offline, offline, value);
  assert.throws(() => loadRouterConfig([], { HF_ENDPOINT: 'ftp://mirror' }), /HF_ENDPOINT/);
  const dir = mkdtempSync(path.join(tmpdir(), 'llm-router-token-'));
  try {
    const file = path.join(dir, 'token');
    writeFileSync(file, 'hf_from_the_secret\n');
    // the file wins over HF_TOKEN
    assert.equal(loadRouterConfig(['--hf-token-file', file], { HF_TOKEN: 'hf_env' }).kv.hub.token, 'hf_from_the_secret');
    writeFileSync(file, '\n');
    assert.throws(() => loadRouterConfig(['--hf-token-file', file], {}), /--hf-token-file .*empty/);
    assert.throws(() => loadRouterConfig(['--hf-token-file', path.join(dir, 'none')], {}), /--hf-token-file .*ENOENT/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('session routing needs --session-key, a header name, matched without regard to case', () => {
  assert.throws(() => loadRouterConfig(['--routing-logic', 'session'], {}), /needs --session-key/);
  const c = loadRouterConfig(['--routing-logic', 'session', '--session-key', 'X-User-Id'], {});
  assert.equal(c.routingLogic, 'session');
  assert.equal(c.sessionKey, 'x-user-id');
  assert.equal(loadRouterConfig(['--routing-logic', 'session'], { LLM_ROUTER_SESSION_KEY: 'x-session' }).sessionKey, 'x-session');
  assert.throws(() => loadRouterConfig(['--session-key', 'not a header'], {}), /not a valid header name/);
});

test('prefix and header flags, fractional scrape intervals', () => {
  const c = loadRouterConfig(
    [
      '--routing-logic',
      'prefixaware',
      '--prefix-block-chars',
      '128',
      '--prefix-balance-epsilon',
      '0.5',
      '--allow-routing-header',
      '--engine-stats-interval',
      '0.25',
    ],
    {},
  );
  assert.deepEqual([c.prefixBlockChars, c.prefixBalanceEpsilon, c.allowRoutingHeader, c.engineStatsIntervalMs], [128, 0.5, true, 250]);
  assert.throws(() => loadRouterConfig(['--prefix-block-chars', '0'], {}));
  assert.throws(() => loadRouterConfig(['--prefix-balance-epsilon', '-1'], {}));
});
