import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { loadRouterConfig } from '../../src/router/config/config.js';
import { UsageError, usage } from '../../src/router/config/flags.js';
import { REFUSED_FLAGS, ROUTER_FLAGS } from '../../src/router/config/router-flags.js';
import { scratchDir } from '../support/scratch.js';

test('flag beats env beats file beats default', () => {
  const dir = scratchDir('cfg-');
  const file = path.join(dir, 'router.yaml');
  writeFileSync(file, 'port: 9100\nretry_after: 9\nknownModels: [from-file]\nlog-level: debug\n');
  const env = { LLM_ROUTER_PORT: '9200', LLM_ROUTER_RETRY_AFTER: '7' };
  const c = loadRouterConfig(['--config', file, '--port', '9300'], env);
  assert.equal(c.port, 9300);
  assert.equal(c.retryAfterSeconds, 7);
  assert.deepEqual(c.knownModels, ['from-file']);
  assert.equal(c.logLevel, 'debug');
  assert.equal(loadRouterConfig([], {}).port, 8001);
});

test('static backends zip one to one; a URL may repeat to serve several models', () => {
  const c = loadRouterConfig(['--static-backends', 'http://a:8000,http://b:8000/,http://a:8000', '--static-models', 'm1,m2,m3'], {});
  assert.deepEqual(c.staticBackends, [
    { url: 'http://a:8000', models: ['m1', 'm3'], role: 'both' },
    { url: 'http://b:8000', models: ['m2'], role: 'both' },
  ]);
  assert.throws(() => loadRouterConfig(['--static-backends', 'http://a:8000', '--static-models', 'm1,m2'], {}), /zipped one to one/);
  assert.throws(() => loadRouterConfig(['--static-backends', 'ftp://a', '--static-models', 'm1'], {}), /http\(s\) URL/);
});

test('static backend roles zip with the backends; P/D flags have their defaults; vllm_router label flags are refused', () => {
  const args = ['--static-backends', 'http://p:8000,http://d:8000,http://b:8000', '--static-models', 'm,m,m'];
  const c = loadRouterConfig([...args, '--static-backend-roles', 'prefill, decode,prefill-decode'], {});
  assert.deepEqual(
    c.staticBackends.map((b) => b.role),
    ['prefill', 'decode', 'both'],
  );
  assert.deepEqual(c.pd, { protocol: 'vllm-nixl', sglangBootstrapPort: 8998, minPromptChars: 0 });
  assert.throws(() => loadRouterConfig([...args, '--static-backend-roles', 'prefill,decode'], {}), /zipped one to one/);
  assert.throws(() => loadRouterConfig([...args, '--static-backend-roles', 'prefill,decode,encode'], {}), /not a role/);
  assert.throws(
    () =>
      loadRouterConfig(
        ['--static-backends', 'http://a:1,http://a:1', '--static-models', 'x,y', '--static-backend-roles', 'prefill,decode'],
        {},
      ),
    /has one role/,
  );
  const pd = loadRouterConfig(['--pd-protocol', 'sglang', '--sglang-bootstrap-port', '9001', '--pd-min-prompt-chars', '400'], {}).pd;
  assert.deepEqual(pd, { protocol: 'sglang', sglangBootstrapPort: 9001, minPromptChars: 400 });
  assert.throws(() => loadRouterConfig(['--pd-protocol', 'nixl'], {}), /must be one of vllm-nixl, llm-d-sidecar, sglang/);
  for (const flag of ['--prefill-model-labels', '--decode-model-labels', '--static-model-labels'])
    assert.throws(() => loadRouterConfig([flag, 'x'], {}), /--static-backend-roles/);
});

test('known models come from the flag, its k8s alias, and both env spellings', () => {
  assert.deepEqual(loadRouterConfig(['--k8s-known-models', 'a,b'], {}).knownModels, ['a', 'b']);
  assert.deepEqual(loadRouterConfig([], { LLM_ROUTER_KNOWN_MODELS: 'x' }).knownModels, ['x']);
  assert.deepEqual(loadRouterConfig([], { VLLM_ROUTER_KNOWN_MODELS: 'y,z' }).knownModels, ['y', 'z']);
});

test('aliases parse and refuse chains', () => {
  const c = loadRouterConfig(['--static-aliases', 'gpt-4o:llama,small:phi'], {});
  assert.deepEqual(
    [...c.aliases],
    [
      ['gpt-4o', 'llama'],
      ['small', 'phi'],
    ],
  );
  assert.throws(() => loadRouterConfig(['--static-aliases', 'a:b,b:c'], {}), /cannot chain/);
  assert.throws(() => loadRouterConfig(['--static-aliases', 'nocolon'], {}), /alias:model/);
});

test('unknown flags, refused vllm_router flags, k8s discovery and unknown policies fail with a usage error naming the flag', () => {
  const cases: [string[], RegExp][] = [
    [['--no-such-flag'], /unknown flag --no-such-flag/],
    [['--enable-batch-api'], /--enable-batch-api is not supported/],
    [['--callbacks', 'x.y'], /--callbacks is not supported/],
    [['--service-discovery', 'consul'], /--service-discovery: must be one of static, k8s/],
    [['--k8s-service-discovery-type', 'service-name'], /service-name" is not available; only pod-ip/],
    [['--k8s-watcher-timeout-seconds', '30'], /--k8s-watcher-timeout-seconds is not supported/],
    [['--routing-logic', 'lmcache'], /--routing-logic "lmcache" is not available/],
    // kvaware exists: it reads the engines' own KV-cache events instead of asking an LMCache controller
    [
      ['--lmcache-controller-port', '9000'],
      /--lmcache-controller-port is not supported.*--routing-logic kvaware reads the engines' own KV-cache events/,
    ],
    [['--kv-aware-threshold', '2000'], /uses no LMCache controller: --routing-logic kvaware .*--static-backend-kv-events/],
    [['--port', 'eighty'], /--port: expected a number/],
    [['--log-format', 'xml'], /--log-format: must be one of text, json/],
    [['--feature-gates', 'SemanticCache=true'], /--feature-gates/],
  ];
  for (const [argv, pattern] of cases) {
    assert.throws(
      () => loadRouterConfig(argv, {}),
      (err: unknown) => err instanceof UsageError && pattern.test(err.message),
      argv.join(' '),
    );
  }
});

test('k8s discovery settings', () => {
  const c = loadRouterConfig(['--service-discovery', 'k8s', '--k8s-label-selector', 'app=vllm', '--k8s-resync-seconds', '2'], {});
  assert.deepEqual(c.kubernetes, {
    namespace: undefined,
    labelSelector: 'app=vllm',
    port: 8000,
    scheme: 'http',
    modelLabel: 'model',
    resyncMs: 2000,
    kvEvents: undefined,
  });
  const kv = loadRouterConfig(['--service-discovery', 'k8s', '--routing-logic', 'kvaware', '--kv-events-replay-port', '5558'], {});
  assert.deepEqual(kv.kubernetes?.kvEvents, { port: 5557, replayPort: 5558 });
  assert.equal(loadRouterConfig([], {}).kubernetes, undefined);
  assert.equal(loadRouterConfig(['--service-discovery', 'k8s', '--k8s-engine-scheme', 'https'], {}).kubernetes?.scheme, 'https');
  assert.equal(loadRouterConfig(['--service-discovery', 'k8s'], { LLM_ROUTER_K8S_ENGINE_SCHEME: 'https' }).kubernetes?.scheme, 'https');
  assert.throws(() => loadRouterConfig(['--service-discovery', 'k8s', '--k8s-engine-scheme', 'ftp'], {}), /k8s-engine-scheme/);
});

test('engine TLS, connection cap and engine client settings', () => {
  const d = loadRouterConfig([], {});
  assert.deepEqual(d.engineTls, { caFile: undefined, clientCertFile: undefined, clientKeyFile: undefined, insecure: false });
  assert.equal(d.maxConnectionsPerEngine, 1024);
  assert.equal(d.engineClient, 'h1');
  const c = loadRouterConfig(
    [
      '--engine-ca-file',
      '/ca.pem',
      '--engine-client-cert',
      '/c.pem',
      '--engine-client-key',
      '/k.pem',
      '--engine-tls-insecure',
      '--max-connections-per-engine',
      '8',
    ],
    {},
  );
  assert.deepEqual(c.engineTls, { caFile: '/ca.pem', clientCertFile: '/c.pem', clientKeyFile: '/k.pem', insecure: true });
  assert.equal(c.maxConnectionsPerEngine, 8);
  assert.equal(loadRouterConfig([], { LLM_ROUTER_MAX_CONNECTIONS_PER_ENGINE: '0' }).maxConnectionsPerEngine, 0);
  assert.throws(() => loadRouterConfig(['--engine-client-cert', '/c.pem'], {}), /go together/);
  assert.equal(loadRouterConfig([], { LLM_ROUTER_ENGINE_CLIENT: 'undici' }).engineClient, 'undici');
  assert.throws(() => loadRouterConfig([], { LLM_ROUTER_ENGINE_CLIENT: 'curl' }), /h1 or undici/);
});

test('vllm_router flags that change nothing here are accepted with a note, not silently', () => {
  const c = loadRouterConfig(['--request-stats-window', '30', '--static-backend-health-checks', '--engine-stats-interval', '0.5'], {});
  assert.equal(c.compatibilityNotes.length, 2);
  assert.equal(c.engineStatsIntervalMs, 500);
});

// vllm_router's flags, by name, as its argument parser (production-stack src/vllm_router/parsers/parser.py) defines them
const VLLM_ROUTER_FLAGS = [
  'backend-health-check-timeout-seconds',
  'batch-processor',
  'callbacks',
  'decode-model-labels',
  'dynamic-config-json',
  'dynamic-config-yaml',
  'enable-batch-api',
  'engine-stats-interval',
  'external-providers-config',
  'feature-gates',
  'file-storage-class',
  'file-storage-path',
  'host',
  'k8s-label-selector',
  'k8s-namespace',
  'k8s-port',
  'k8s-service-discovery-type',
  'k8s-watcher-timeout-seconds',
  'kv-aware-threshold',
  'lmcache-controller-heartbeat-port',
  'lmcache-controller-port',
  'lmcache-controller-reply-port',
  'lmcache-health-check-interval',
  'lmcache-worker-timeout',
  'log-format',
  'log-level',
  'log-stats',
  'log-stats-interval',
  'max-instance-failover-reroute-attempts',
  'otel-endpoint',
  'otel-secure',
  'otel-service-name',
  'port',
  'prefill-model-labels',
  'prefix-min-match-length',
  'request-rewriter',
  'request-stats-window',
  'root-path',
  'routing-logic',
  'sentry-dsn',
  'sentry-profile-session-sample-rate',
  'sentry-traces-sample-rate',
  'service-discovery',
  'session-key',
  'static-aliases',
  'static-backend-health-check-interval',
  'static-backend-health-check-timeout-seconds',
  'static-backend-health-checks',
  'static-backends',
  'static-model-labels',
  'static-model-types',
  'static-models',
];

test("every vllm_router flag is either taken (marked in the table, by name or alias) or refused with a reason; none is 'unknown'", () => {
  const marked = new Set<string>(
    ROUTER_FLAGS.filter((f) => 'vllmRouter' in f).flatMap((f) => [f.name, ...('aliases' in f ? f.aliases : [])]),
  );
  for (const name of VLLM_ROUTER_FLAGS) {
    assert.ok(marked.has(name) || REFUSED_FLAGS.has(name), `--${name} is neither taken nor refused`);
    assert.ok(!(marked.has(name) && REFUSED_FLAGS.has(name)), `--${name} is both taken and refused`);
  }
  for (const spec of ROUTER_FLAGS.filter((f) => 'vllmRouter' in f)) {
    const names = [spec.name, ...('aliases' in spec ? spec.aliases : [])];
    assert.ok(
      names.some((n) => VLLM_ROUTER_FLAGS.includes(n)),
      `--${spec.name} is marked as vllm_router's but it has no such flag`,
    );
  }
  const help = usage('serve', '', ROUTER_FLAGS, REFUSED_FLAGS);
  assert.match(help, /^\* --static-backends LIST$/m);
  assert.match(help, /^ {2}--root-path: llm-router serves at \//m);
  const c = loadRouterConfig(['--static-backend-health-check-interval', '30', '--static-backend-health-check-timeout-seconds', '4'], {});
  assert.equal(c.probe.timeoutMs, 4000);
  assert.ok(c.compatibilityNotes.some((n) => n.startsWith('--static-backend-health-check-interval has no effect')));
});
