// The routing flags: policy names, --session-key, --prefix-block-chars, --prefix-balance-epsilon, --allow-routing-header.
import { test } from 'node:test';
import assert from 'node:assert/strict';
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
  const t = loadRouterConfig(['--tokenizer', '/models/llama', '--tokenizers', 'a=engine,b=/tok/b'], {});
  assert.equal(t.kv.tokenizer, '/models/llama');
  assert.deepEqual(
    [...t.kv.tokenizers],
    [
      ['a', 'engine'],
      ['b', '/tok/b'],
    ],
  );
  assert.equal(loadRouterConfig([], {}).kv.tokenizer, 'engine');
  assert.equal(loadRouterConfig([], {}).kv.blockSize, 16);
  assert.throws(() => loadRouterConfig(['--tokenizers', 'nomodel'], {}), /MODEL=engine or MODEL=PATH/);
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
