// Live configuration, pure parts and the reloader without processes: what a new version of the settings file changes
// (live, restart, overridden), that a bad version is refused whole with the start-up's message, what is applied and
// counted, vllm_router's dynamic-config forms, and that the live settings, their groups and the docs agree.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Writable } from 'node:stream';
import { Registry } from 'prom-client';
import { ConfigReloader, type ConfigChange, ConfigFollower } from '../../src/router/app/config-reload.js';
import { applyLive, LIVE_GROUPS } from '../../src/router/app/live-apply.js';
import { ModelCatalog } from '../../src/router/catalog/catalog.js';
import { loadRouterConfig, loadRouterSettings } from '../../src/router/config/config.js';
import { configFileOf, parseConfigText } from '../../src/router/config/config-file.js';
import { UsageError } from '../../src/router/config/flags.js';
import { LIVE_FLAGS, planReload } from '../../src/router/config/reload-plan.js';
import { ROUTER_FLAGS } from '../../src/router/config/router-flags.js';
import { ConfigMetrics } from '../../src/router/metrics/config-metrics.js';
import type { WorkerLink } from '../../src/router/util/ipc.js';
import { createLogger } from '../../src/router/util/log.js';
import { scratchDir } from '../support/scratch.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

function capture(): { log: ReturnType<typeof createLogger>; lines: () => Array<Record<string, unknown>> } {
  const raw: string[] = [];
  const out = new Writable({
    write(chunk, _enc, cb) {
      raw.push(String(chunk));
      cb();
    },
  });
  return {
    log: createLogger({ level: 'info', format: 'json', out }),
    lines: () => raw.flatMap((t) => t.split('\n').filter((l) => l.trim() !== '')).map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

function tempFile(name: string, text: string): string {
  const file = path.join(scratchDir('live-config-'), name);
  writeFileSync(file, text);
  return file;
}

const BASE = 'static-backends: [http://10.0.0.1:8000]\nstatic-models: [a]\n';

/** A reloader on `file` started with `argv` (plus --config FILE), its applied changes, log lines and metrics. */
function reloaderFor(text: string, argv: string[] = [], env: Record<string, string> = {}, kvEvents = false) {
  const file = tempFile('router.yaml', text);
  const args = ['--config', file, ...argv];
  const settings = loadRouterSettings(args, env);
  const { log, lines } = capture();
  const registry = new Registry();
  const applied: ConfigChange[] = [];
  const reloader = new ConfigReloader({
    argv: args,
    env,
    settings,
    log,
    metrics: new ConfigMetrics(registry),
    kvEvents,
    apply: (c) => applied.push(c),
  });
  const metric = async (name: string, labels = ''): Promise<number | undefined> => {
    const m = new RegExp(`^${name}${labels.replace(/[{}]/g, '\\$&')} (\\S+)$`, 'm').exec(await registry.metrics());
    return m ? Number(m[1]) : undefined;
  };
  return { file, reloader, applied, lines, metric, settings };
}

test('planReload: live settings are taken, the others wait for a restart, a flag or env wins over the file', () => {
  const file = tempFile('a.yaml', `${BASE}port: 9000\nretry-after: 7\n`);
  const running = loadRouterSettings(['--config', file, '--port', '9100'], { LLM_ROUTER_RETRY_AFTER: '3' });
  writeFileSync(
    file,
    'static-backends: [http://10.0.0.1:8000, http://10.0.0.2:8000]\nstatic-models: [a, b]\nport: 9001\nretry-after: 8\nworkers: 4\n',
  );
  const next = loadRouterSettings(['--config', file, '--port', '9100'], { LLM_ROUTER_RETRY_AFTER: '3' });
  const plan = planReload(running, next, { kvEvents: false });
  assert.deepEqual(plan.live, ['static-backends', 'static-models']);
  assert.deepEqual(plan.restart, [{ name: 'workers', running: '1', next: '4' }]);
  assert.deepEqual(plan.overridden, [
    { name: 'port', source: 'flag' },
    { name: 'retry-after', source: 'env' },
  ]);
  // what runs: the live settings' new values, the others as they were
  assert.deepEqual(plan.values['static-models'], ['a', 'b']);
  assert.equal(plan.values.workers, 1);
  assert.equal(plan.values.port, 9100);
});

test('planReload: kvaware needs KV-cache events set up at start-up; without them routing-logic waits for a restart', () => {
  const file = tempFile('a.yaml', BASE);
  const running = loadRouterSettings(['--config', file], {});
  writeFileSync(file, `${BASE}routing-logic: kvaware\nsession-key: x-user\n`);
  const next = loadRouterSettings(['--config', file], {});
  const without = planReload(running, next, { kvEvents: false });
  assert.deepEqual(without.live, ['session-key']);
  assert.equal(without.restart[0]?.name, 'routing-logic');
  assert.match(without.restart[0]?.why ?? '', /KV-cache events/);
  assert.equal(without.values['routing-logic'], 'roundrobin');
  assert.deepEqual(planReload(running, next, { kvEvents: true }).live, ['routing-logic', 'session-key']);
});

test('a new version is applied; the same text again is nothing; comments alone change nothing that runs', async () => {
  const r = reloaderFor(BASE);
  assert.equal(await r.metric('llm_router_config_last_reload_successful'), 1);
  assert.equal(r.reloader.offer(BASE), undefined);
  const next = `${BASE}known-models: [zero]\nstatic-aliases: ["small:a"]\nrate-limit-rps: 5\n`;
  assert.equal(r.reloader.offer(next), 'applied');
  assert.equal(r.applied.length, 1);
  const change = r.applied[0] as ConfigChange;
  assert.deepEqual([...change.live], ['static-aliases', 'known-models', 'rate-limit-rps']);
  assert.deepEqual(change.config.knownModels, ['zero']);
  assert.equal(change.config.aliases.get('small'), 'a');
  assert.equal(change.config.security.rateLimitRps, 5);
  assert.equal(change.version.seq, 1);
  assert.equal(r.reloader.current().seq, 1);
  assert.equal(r.reloader.offer(`# a comment\n${next}`), 'unchanged');
  assert.equal(r.applied.length, 1);
  assert.equal(await r.metric('llm_router_config_reloads_total', '{result="applied"}'), 1);
  assert.equal(await r.metric('llm_router_config_reloads_total', '{result="unchanged"}'), 1);
  assert.equal(await r.metric('llm_router_config_reloads_total', '{result="invalid"}'), 0);
  assert.ok(
    r.lines().some((l) => l.level === 30 && /new version applied \(static-aliases, known-models, rate-limit-rps\)/.test(String(l.msg))),
  );
});

test("an invalid version is refused whole with the start-up's reason, a WARN naming the file, and the last good one stays", async () => {
  const r = reloaderFor(BASE);
  const bad: [string, RegExp][] = [
    ['static-backends: [http://10.0.0.1:8000\n', /not valid YAML/],
    [`${BASE}knwon-models: [x]\n`, /unknown setting "knwon-models" \(did you mean known-models\?\)/],
    [`${BASE}routing-logic: fastest\n`, /--routing-logic "fastest" is not available/],
    [`${BASE}rate-limit-rps: -1\n`, /rate-limit-rps: must be at least 0/],
    ['static-backends: [http://10.0.0.1:8000]\nstatic-models: [a, b]\n', /zipped one to one/],
    [`${BASE}routing-logic: session\n`, /needs --session-key/],
    ['known-models: []\n', /nothing to route to/],
    [`${BASE}callbacks: my.module\n`, /callbacks is not supported/],
    [`${BASE}config: other.yaml\n`, /cannot be set in the file/],
    ['- a list\n', /must be a mapping/],
  ];
  for (const [text, reason] of bad) {
    assert.equal(r.reloader.offer(text), 'invalid', text);
    const warn = r.lines().at(-1) as Record<string, unknown>;
    assert.equal(warn.level, 40, 'WARN');
    assert.ok(String(warn.msg).includes(r.file), `the WARN names the file: ${String(warn.msg)}`);
    assert.match(String(warn.error), reason);
  }
  assert.equal(r.applied.length, 0);
  assert.equal(await r.metric('llm_router_config_reloads_total', '{result="invalid"}'), bad.length);
  assert.equal(await r.metric('llm_router_config_last_reload_successful'), 0);
  // the same bad text again is no new version: no second WARN
  const count = r.lines().length;
  assert.equal(r.reloader.offer(bad.at(-1)?.[0] as string), undefined);
  assert.equal(r.lines().length, count);
  // a file that cannot be read is refused like an invalid one, once per reason
  assert.equal(r.reloader.readFailed(new Error('ENOENT: no such file')), 'invalid');
  assert.equal(r.reloader.readFailed(new Error('ENOENT: no such file')), undefined);
  // back to a good version: it changes nothing that runs, and the last reload was good again
  assert.equal(r.reloader.offer(BASE), 'unchanged');
  assert.equal(await r.metric('llm_router_config_last_reload_successful'), 1);
});

test('a setting that needs a restart is said once per new value, and the running value stays', () => {
  const r = reloaderFor(BASE);
  const restartLines = () => r.lines().filter((l) => /takes a restart/.test(String(l.msg)));
  assert.equal(r.reloader.offer(`${BASE}retry-after: 9\n`), 'unchanged');
  assert.equal(restartLines().length, 1);
  assert.match(String(restartLines()[0]?.msg), /changes retry-after to "9": it takes a restart .* "5" stays until then/);
  assert.equal(r.reloader.offer(`${BASE}retry-after: 9\nknown-models: [z]\n`), 'applied');
  assert.equal(restartLines().length, 1, 'not said again for the same value');
  assert.equal((r.applied[0] as ConfigChange).config.retryAfterSeconds, 5, 'the running value stays');
  assert.equal(r.reloader.offer(`${BASE}retry-after: 10\nknown-models: [z]\n`), 'unchanged');
  assert.equal(restartLines().length, 2, 'a new value is said');
});

test('a setting the command line gives keeps its value when the file changes it, and a WARN says so', () => {
  const r = reloaderFor(`${BASE}known-models: [x]\n`, ['--known-models', 'cli']);
  assert.equal(r.reloader.offer(`${BASE}known-models: [y]\n`), 'unchanged');
  const warn = r.lines().find((l) => /known-models/.test(String(l.msg)));
  assert.match(String(warn?.msg), /changes known-models, but --known-models on the command line sets it and wins/);
});

test('a worker follows the versions its primary sends, in order, from the one in force', () => {
  const file = tempFile('w.yaml', BASE);
  const settings = loadRouterSettings(['--config', file], {});
  const relays = new Map<string, (v: unknown) => void>();
  const link = {
    onRelay: (topic: string, h: (v: unknown) => void) => relays.set(topic, h),
    ask: async () => undefined,
  } as unknown as WorkerLink;
  const applied: ConfigChange[] = [];
  const { log } = capture();
  const follower = new ConfigFollower(settings, link, { env: {}, kvEvents: false, log, apply: (c) => applied.push(c) });
  follower.start();
  // the primary's reloader makes the versions
  const p = reloaderFor(BASE);
  p.reloader.offer(`${BASE}known-models: [one]\n`);
  p.reloader.offer(`${BASE}known-models: [two]\n`);
  const [v1, v2] = p.applied.map((c) => c.version);
  relays.get('config:version')?.(v2);
  relays.get('config:version')?.(v1);
  assert.equal(applied.length, 1, 'an older version after a newer one is ignored');
  assert.deepEqual(applied[0]?.config.knownModels, ['two']);
  assert.deepEqual([...(applied[0]?.live ?? [])], ['known-models']);
});

test("vllm_router's dynamic config: its JSON fields are our flags; its YAML maps models to backends; its refused fields say why", () => {
  const json = tempFile(
    'dynamic.json',
    JSON.stringify({
      service_discovery: 'static',
      routing_logic: 'roundrobin',
      static_backends: 'http://10.0.0.1:8000,http://10.0.0.2:8000,http://10.0.0.3:8000',
      static_models: 'facebook/opt-125m,meta-llama/Llama-3.1-8B-Instruct,facebook/opt-125m',
      static_model_types: 'completion,chat,completion',
      static_aliases: 'my-alias:meta-llama/Llama-3.1-8B-Instruct',
      static_backend_health_checks: false,
      k8s_port: null,
      session_key: null,
    }),
  );
  const c = loadRouterConfig(['--dynamic-config-json', json], {});
  assert.deepEqual(
    c.staticBackends.map((b) => [b.url, b.models]),
    [
      ['http://10.0.0.1:8000', ['facebook/opt-125m']],
      ['http://10.0.0.2:8000', ['meta-llama/Llama-3.1-8B-Instruct']],
      ['http://10.0.0.3:8000', ['facebook/opt-125m']],
    ],
  );
  assert.equal(c.aliases.get('my-alias'), 'meta-llama/Llama-3.1-8B-Instruct');
  const yaml = tempFile(
    'dynamic.yaml',
    [
      'service_discovery: static',
      'routing_logic: session',
      'session_key: x-user-id',
      'static_models:',
      '  facebook/opt-125m:',
      '    static_backends: [http://10.0.0.1:8000, http://10.0.0.3:8000]',
      '    static_model_type: completion',
      '  meta-llama/Llama-3.1-8B-Instruct:',
      '    static_backends:',
      '      - http://10.0.0.2:8000',
      'static_aliases:',
      '  my-alias: facebook/opt-125m',
      '',
    ].join('\n'),
  );
  const y = loadRouterConfig(['--dynamic-config-yaml', yaml], {});
  assert.deepEqual(
    y.staticBackends.map((b) => [b.url, b.models]),
    [
      ['http://10.0.0.1:8000', ['facebook/opt-125m']],
      ['http://10.0.0.3:8000', ['facebook/opt-125m']],
      ['http://10.0.0.2:8000', ['meta-llama/Llama-3.1-8B-Instruct']],
    ],
  );
  assert.equal(y.routingLogic, 'session');
  assert.equal(y.sessionKey, 'x-user-id');
  assert.equal(y.aliases.get('my-alias'), 'facebook/opt-125m');
  const refused = (doc: Record<string, unknown>): string => {
    const f = tempFile('r.json', JSON.stringify(doc));
    try {
      loadRouterConfig(['--dynamic-config-json', f], {});
    } catch (err) {
      assert.ok(err instanceof UsageError);
      return err.message;
    }
    return '';
  };
  assert.match(refused({ static_model_labels: 'a,b' }), /static-model-labels is not supported by llm-router: .*--static-backend-roles/);
  assert.match(refused({ callbacks: 'module.handler' }), /--callbacks is not supported/);
  assert.match(refused({ service_discovery: 'external' }), /service_discovery: must be one of static, k8s/);
  const broken = tempFile('b.json', '{"routing_logic": ');
  assert.throws(() => loadRouterConfig(['--dynamic-config-json', broken], {}), /--dynamic-config-json .*: not valid JSON/);
  // one settings file at most
  assert.throws(() => configFileOf(['--config', 'a.yaml', '--dynamic-config-json', 'b.json'], {}), /both name a settings file/);
  assert.deepEqual(configFileOf([], { LLM_ROUTER_DYNAMIC_CONFIG_YAML: '/etc/d.yaml' }), {
    path: '/etc/d.yaml',
    format: 'vllm-router-yaml',
    flag: '--dynamic-config-yaml',
  });
  // --config stays ours: vllm_router's mapping of models is not a list of model names there
  const ours = 'static_models: {m: {static_backends: [http://a:1]}}';
  assert.ok(parseConfigText({ path: 'x', format: 'yaml', flag: '--config' }, ours).static_models !== undefined);
  assert.throws(() => loadRouterConfig(['--config', tempFile('c.yaml', ours)], {}), /expected a list of text values/);
});

test('every live setting has its place when applied, and the operator guide lists exactly the live settings', () => {
  const grouped = Object.values(LIVE_GROUPS).flat();
  assert.deepEqual(new Set(grouped), LIVE_FLAGS);
  assert.equal(grouped.length, LIVE_FLAGS.size, 'each in one group');
  const doc = readFileSync(path.join(ROOT, 'docs', 'operations.md'), 'utf8');
  const section = /## Live configuration\n([\s\S]*?)\n## /.exec(doc)?.[1] ?? '';
  const listed = /<!-- live settings -->([\s\S]*?)<!-- \/live settings -->/.exec(section)?.[1] ?? '';
  const flags = new Set<string>(ROUTER_FLAGS.map((f) => f.name));
  const named = new Set([...listed.matchAll(/`([a-z0-9-]+)`/g)].map((m) => m[1] as string).filter((n) => flags.has(n)));
  assert.deepEqual(named, LIVE_FLAGS, 'docs/operations.md, "Live configuration": the live settings');
});

test('applyLive: each group goes where it belongs, and a group none of whose settings changed is left alone', () => {
  const calls: string[] = [];
  const catalog = new ModelCatalog();
  const deps = { policyName: 'roundrobin' };
  const parts = {
    catalog,
    reroute: (c: { routingLogic: string }) => calls.push(`reroute ${c.routingLogic}`),
    deps,
    admission: { update: (l: { rateLimitRps: number }) => calls.push(`admission ${l.rateLimitRps}`) },
    flow: { setLimits: (l: { maxRequests: number }) => calls.push(`flow ${l.maxRequests}`) },
  };
  const config = loadRouterConfig(
    [
      '--static-backends',
      'http://10.0.0.1:8000',
      '--static-models',
      'a',
      '--known-models',
      'zero',
      '--routing-logic',
      'least-load',
      '--rate-limit-rps',
      '4',
      '--flow-control',
      '--flow-max-requests',
      '7',
    ],
    {},
  );
  applyLive(parts, config, new Set(['known-models']));
  assert.deepEqual(calls, []);
  assert.deepEqual(
    catalog
      .models()
      .map((m) => `${m.id}:${m.status}`)
      .sort(),
    ['a:loading', 'zero:scaled-to-zero'],
  );
  applyLive(parts, config, new Set(['routing-logic', 'rate-limit-rps', 'flow-max-requests', 'request-stats-window']));
  assert.deepEqual(calls, ['reroute least-load', 'admission 4', 'flow 7']);
  assert.equal(deps.policyName, 'least-load');
});
