// The Helm chart, rendered by the project's own renderer (helm is not on these machines): the Go-template subset
// it relies on, the objects it renders with defaults and with three models, flags the router and the sidecar
// really take, zero lint findings, and plain manifests that match the chart.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml } from 'yaml';
import { parseFlags } from '../../src/cli/flags.js';
import { loadRouterConfig } from '../../src/config/config.js';
import { REFUSED_FLAGS, ROUTER_FLAGS } from '../../src/config/router-flags.js';
import { ChartError, mergeValues, readValuesFile, renderChart, type RenderedChart } from '../../src/deploy/chart.js';
import { helmFunctions } from '../../src/deploy/functions.js';
import { TemplateError, Templates } from '../../src/deploy/gotemplate.js';
import { CHART_DIR, plainManifests } from '../../src/deploy/plain.js';
import { parseManifests } from '../../src/lint/load.js';
import { lintObjects } from '../../src/lint/rules.js';
import { PROBE_FLAGS } from '../../src/probe/cli.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const CHART = path.join(ROOT, CHART_DIR);
const THREE_MODELS = path.join(ROOT, 'test', 'fixtures', 'chart', 'three-models.yaml');

function run(src: string, data: unknown, extra: Record<string, string> = {}): string {
  const t: Templates = new Templates(helmFunctions({ templates: () => t }));
  for (const [name, text] of Object.entries(extra)) t.add(name, text);
  t.add('main', src);
  return t.execute('main', data);
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Obj = any;

function objects(chart: RenderedChart): Obj[] {
  return chart.documents.map((d) => parseYaml(d.text) as Obj);
}

function find(objs: Obj[], kind: string, name: string): Obj {
  const o = objs.find((x) => x.kind === kind && x.metadata.name === name);
  assert.ok(o, `${kind}/${name} rendered`);
  return o;
}

function container(workload: Obj, name: string): Obj {
  const c = workload.spec.template.spec.containers.find((x: Obj) => x.name === name);
  assert.ok(c, `container ${name} in ${workload.metadata.name}`);
  return c;
}

/** Runs the router's own configuration loader on the chart's args and ConfigMap, as the pod would. */
function routerConfig(objs: Obj[]): ReturnType<typeof loadRouterConfig> {
  const router = find(objs, 'Deployment', 'llm-router');
  const args: string[] = container(router, 'router').args;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'chart-config-'));
  try {
    const file = path.join(dir, 'config.yaml');
    writeFileSync(file, find(objs, 'ConfigMap', 'llm-router').data['config.yaml']);
    assert.equal(args[0], 'serve');
    return loadRouterConfig(args.slice(1).map((a) => (a === '/etc/llm-router/config.yaml' ? file : a)), {});
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('Go template subset', () => {
  test('trim markers, variables, range with index, else if, and/or short-circuit', () => {
    const src = '{{- $n := len .items -}}\n{{ range $i, $v := .items }}{{ $i }}={{ $v }} {{ end }}\n{{- if eq $n 0 }}none{{ else if gt $n 2 }}many{{ else }}few{{ end }}|{{ and .a .a.b }}|{{ or .missing "x" }}';
    assert.equal(run(src, { items: ['a', 'b'], a: null }), '0=a 1=b few||x');
  });

  test('define/include/nindent, toYaml (sorted keys, unindented lists), quote, default that treats 0 as unset', () => {
    const helpers = { h: '{{- define "labels" -}}\napp: {{ .name }}\nteam: {{ .team | default "core" }}\n{{- end -}}' };
    const src = 'metadata:\n  labels:\n    {{- include "labels" . | nindent 4 }}\nspec: {{- toYaml .spec | nindent 2 }}\nn: {{ .n | default 5 }} {{ quote .s }}';
    assert.equal(
      run(src, { name: 'x', spec: { z: 1, a: ['p', 'q'] }, n: 0, s: 'say "hi"' }, helpers),
      'metadata:\n  labels:\n    app: x\n    team: core\nspec:\n  a:\n  - p\n  - q\n  z: 1\nn: 5 "say \\"hi\\""',
    );
  });

  test('Helm semantics: a field of a missing value fails; a missing function or template fails; required fails with its message', () => {
    assert.equal(run('[{{ .a }}]', {}), '[]');
    assert.throws(() => run('{{ .a.b }}', {}), /nil pointer evaluating interface \{\}\.b/);
    assert.throws(() => run('{{ nosuch 1 }}', {}), /function "nosuch" not defined/);
    assert.throws(() => run('{{ include "nope" . }}', {}), /no template "nope"/);
    assert.throws(() => run('{{ required "name is required" .name }}', {}), (e: unknown) => e instanceof TemplateError && /name is required/.test(e.message));
    assert.throws(() => run('{{ if .a }}x', {}), /without \{\{end\}\}/);
  });

  test('values merge like Helm: maps merge, lists and scalars replace, null removes', () => {
    assert.deepEqual(mergeValues({ a: { b: 1, c: 2 }, l: [1, 2], d: 1 }, { a: { c: 3 }, l: [9], d: null }), { a: { b: 1, c: 3 }, l: [9] });
  });
});

describe('chart with default values', () => {
  const chart = renderChart(CHART);
  const objs = objects(chart);

  test('renders the router objects in install order, each with its # Source', () => {
    assert.deepEqual(
      chart.documents.map((d) => `${d.kind}/${d.name}`),
      ['PodDisruptionBudget/llm-router', 'ServiceAccount/llm-router', 'ConfigMap/llm-router', 'Role/llm-router-discovery', 'RoleBinding/llm-router-discovery', 'Service/llm-router', 'Deployment/llm-router'],
    );
    assert.match(chart.manifest, /^---\n# Source: llm-router\/templates\/pdb\.yaml\napiVersion: policy\/v1\n/);
  });

  test('router: 2 replicas spread over nodes, PDB, probes on /health, /ready and a startup probe, config checksum', () => {
    const router = find(objs, 'Deployment', 'llm-router');
    assert.equal(router.spec.replicas, 2);
    const anti = router.spec.template.spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm;
    assert.equal(anti.topologyKey, 'kubernetes.io/hostname');
    assert.deepEqual(anti.labelSelector.matchLabels, router.spec.selector.matchLabels);
    assert.deepEqual(find(objs, 'PodDisruptionBudget', 'llm-router').spec, { minAvailable: 1, selector: { matchLabels: router.spec.selector.matchLabels } });
    const c = container(router, 'router');
    assert.equal(c.livenessProbe.httpGet.path, '/health');
    assert.equal(c.readinessProbe.httpGet.path, '/ready');
    assert.equal(c.startupProbe.httpGet.path, '/health');
    assert.ok(c.resources.requests.cpu && c.resources.limits.memory);
    assert.match(router.spec.template.metadata.annotations['checksum/config'], /^[0-9a-f]{64}$/);
    assert.equal(router.spec.template.spec.serviceAccountName, 'llm-router');
    const service = find(objs, 'Service', 'llm-router');
    assert.deepEqual(service.spec.selector, router.spec.selector.matchLabels);
  });

  test("minimal RBAC: get/list/watch on pods, deployments, statefulsets, leaderworkersets; nothing else", () => {
    const role = find(objs, 'Role', 'llm-router-discovery');
    assert.deepEqual(role.rules, [
      { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch'] },
      { apiGroups: ['apps'], resources: ['deployments', 'statefulsets'], verbs: ['get', 'list', 'watch'] },
      { apiGroups: ['leaderworkerset.x-k8s.io'], resources: ['leaderworkersets'], verbs: ['get', 'list', 'watch'] },
    ]);
    const binding = find(objs, 'RoleBinding', 'llm-router-discovery');
    assert.deepEqual(binding.subjects, [{ kind: 'ServiceAccount', name: 'llm-router', namespace: 'default' }]);
    assert.equal(binding.roleRef.name, 'llm-router-discovery');
  });

  test("the router's own flag parser accepts the args and the ConfigMap the chart gives it", () => {
    const config = routerConfig(objs);
    assert.equal(config.kubernetes?.labelSelector, 'llm-router/pool=llm-router,llm-router/role!=prefill');
    assert.equal(config.kubernetes?.namespace, 'default');
    assert.equal(config.kubernetes?.port, 8000);
    assert.equal(config.kubernetes?.modelLabel, 'model');
  });

  test('lint finds nothing in it', () => {
    assert.deepEqual(lintObjects(parseManifests(chart.manifest, 'default.yaml')), []);
  });

  test('deploy/manifests/ is what the chart renders (regenerate: node dist/deploy/cli.js write-manifests)', () => {
    for (const m of plainManifests(ROOT)) {
      assert.equal(readFileSync(path.join(ROOT, m.path), 'utf8'), m.content, `${m.path} is stale`);
    }
  });
});

describe('chart with three models: one standalone, one at zero replicas with KEDA, one P/D pair', () => {
  const chart = renderChart(CHART, { values: [readValuesFile(THREE_MODELS)] });
  const objs = objects(chart);

  test('one Deployment per model and role, at the declared replicas, zero included', () => {
    const engines = objs.filter((o) => o.kind === 'Deployment' && o.metadata.labels['app.kubernetes.io/component'] === 'engine');
    assert.deepEqual(
      engines.map((e) => `${e.metadata.name}=${e.spec.replicas} ${e.metadata.annotations['llm-router/models']}`),
      ['llm-router-llama-8b=2 llama-3-8b', 'llm-router-mixtral=0 mixtral-8x7b', 'llm-router-qwen-prefill=2 qwen3-32b', 'llm-router-qwen-decode=1 qwen3-32b'],
    );
  });

  test('probes: liveness /health on the engine port, startup and readiness on the probe sidecar, budget >= 2 x expected load', () => {
    const expected: Record<string, { port: number; load: number }> = {
      'llm-router-llama-8b': { port: 8000, load: 300 },
      'llm-router-mixtral': { port: 8000, load: 1500 },
      'llm-router-qwen-prefill': { port: 8000, load: 900 },
      'llm-router-qwen-decode': { port: 8200, load: 900 },
    };
    for (const [name, want] of Object.entries(expected)) {
      const d = find(objs, 'Deployment', name);
      const engine = container(d, 'engine');
      const sidecar = container(d, 'readiness');
      assert.deepEqual(engine.ports, [{ name: 'engine', containerPort: want.port, protocol: 'TCP' }], name);
      assert.deepEqual(engine.livenessProbe.httpGet, { path: '/health', port: want.port }, name);
      assert.deepEqual(engine.readinessProbe.httpGet, { path: '/ready', port: 8090 }, name);
      assert.deepEqual(engine.startupProbe.httpGet, { path: '/ready', port: 8090 }, name);
      const s = engine.startupProbe;
      assert.ok(s.failureThreshold * s.periodSeconds >= 2 * want.load, `${name}: ${s.failureThreshold} x ${s.periodSeconds} >= 2 x ${want.load}`);
      assert.equal(d.metadata.annotations['llm-router/expected-load-seconds'], String(want.load));
      assert.equal(sidecar.args[0], 'probe');
      assert.equal(sidecar.args[sidecar.args.indexOf('--engine-url') + 1], `http://127.0.0.1:${want.port}`, name);
      // the sidecar's args are real `llm-router probe` flags
      parseFlags(sidecar.args.slice(1), PROBE_FLAGS);
    }
  });

  test('P/D: the decode engine listens on 8200 behind a routing sidecar on 8000; the router skips prefill pods', () => {
    const decode = find(objs, 'Deployment', 'llm-router-qwen-decode');
    const engine = container(decode, 'engine');
    assert.equal(engine.args[engine.args.indexOf('--port') + 1], '8200');
    assert.ok(engine.args.includes('--kv-transfer-config'));
    assert.deepEqual(container(decode, 'routing-sidecar').args.slice(0, 2), ['-port=8000', '-vllm-port=8200']);
    assert.equal(decode.spec.template.metadata.annotations['llm-router/port'], '8000');
    assert.deepEqual(engine.resources.limits, { 'nvidia.com/gpu': 4 });
    const prefill = find(objs, 'Deployment', 'llm-router-qwen-prefill');
    assert.equal(prefill.spec.template.metadata.labels['llm-router/role'], 'prefill');
    assert.ok(routerConfig(objs).kubernetes?.labelSelector?.includes('llm-router/role!=prefill'));
  });

  test('weights: an init container downloads them, or a PVC holds them; a compile cache volume; GPUs and resources merged', () => {
    const llama = find(objs, 'Deployment', 'llm-router-llama-8b');
    const init = llama.spec.template.spec.initContainers[0];
    assert.equal(init.name, 'fetch-weights');
    assert.match(init.command[2], /snapshot_download\('meta-llama\/Llama-3\.1-8B-Instruct'\)/);
    assert.deepEqual(container(llama, 'engine').args.slice(-2), ['--max-model-len', '8192']);
    const mixtral = find(objs, 'Deployment', 'llm-router-mixtral');
    const volumes = Object.fromEntries(mixtral.spec.template.spec.volumes.map((v: Obj) => [v.name, v]));
    assert.equal(volumes.weights.persistentVolumeClaim.claimName, 'mixtral-weights');
    assert.ok(volumes['compile-cache'].emptyDir);
    const engine = container(mixtral, 'engine');
    assert.deepEqual(engine.resources, { requests: { cpu: '8', memory: '64Gi' }, limits: { memory: '96Gi', 'nvidia.com/gpu': 2 } });
    assert.deepEqual(engine.args.slice(5, 7), ['--tensor-parallel-size', '2']);
  });

  test('KEDA: a ScaledObject wakes the zero-replica model from the demand the router counts; a ServiceMonitor', () => {
    const scaled = objs.filter((o) => o.kind === 'ScaledObject');
    assert.deepEqual(scaled.map((s) => s.metadata.name), ['llm-router-mixtral']);
    const s = scaled[0];
    assert.equal(s.spec.minReplicaCount, 0);
    assert.equal(s.spec.scaleTargetRef.name, 'llm-router-mixtral');
    assert.match(s.spec.triggers[0].metadata.query, /llm_router_model_demand_total\{model="mixtral-8x7b"\}/);
    assert.equal(find(objs, 'ServiceMonitor', 'llm-router').spec.endpoints[0].path, '/metrics');
  });

  test('lint finds nothing in it', () => {
    assert.deepEqual(lintObjects(parseManifests(chart.manifest, 'three-models.yaml')), []);
  });

  test('the external-push KEDA flavour points ScaledObjects at the router, which gets --keda-scaler-port', () => {
    const push = renderChart(CHART, { values: [readValuesFile(THREE_MODELS), { keda: { flavour: 'external-push' } }] });
    const o = objects(push);
    const trigger = o.find((x) => x.kind === 'ScaledObject').spec.triggers[0];
    assert.deepEqual(trigger, { type: 'external-push', metadata: { scalerAddress: 'llm-router.default.svc:9090', model: 'mixtral-8x7b' } });
    routerConfig(o);
    const args: string[] = container(find(o, 'Deployment', 'llm-router'), 'router').args;
    assert.equal(parseFlags(args.slice(1), ROUTER_FLAGS, { refused: REFUSED_FLAGS }).values.get('keda-scaler-port'), 9090);
    assert.deepEqual(lintObjects(parseManifests(push.manifest, 'push.yaml')), []);
  });
});

describe('chart errors are clear', () => {
  test('an engine without a model, a P/D pair on a non-vLLM engine, a TGI served name it cannot serve', () => {
    assert.throws(() => renderChart(CHART, { values: [{ engines: [{ name: 'x' }] }] }), (e: unknown) => e instanceof ChartError && /engines\[x\] needs a model/.test(e.message));
    assert.throws(() => renderChart(CHART, { values: [{ engines: [{ name: 'x', model: 'm', role: 'pd', engineKind: 'sglang' }] }] }), /role pd is only rendered for vllm/);
    assert.throws(() => renderChart(CHART, { values: [{ engines: [{ name: 't', model: 'org/falcon', servedModelName: 'other', engineKind: 'tgi' }] }] }), /servedModelName must be org\/falcon or falcon/);
  });

  test('SGLang and TGI engines render with their own command lines and pass lint', () => {
    const chart = renderChart(CHART, { values: [{ engines: [{ name: 's', model: 'Qwen/Qwen3-8B', engineKind: 'sglang' }, { name: 't', model: 'tiiuae/falcon-7b', engineKind: 'tgi', gpus: 0 }] }] });
    const objs = objects(chart);
    assert.deepEqual(container(find(objs, 'Deployment', 'llm-router-s'), 'engine').command, ['python3', '-m', 'sglang.launch_server']);
    const tgi = container(find(objs, 'Deployment', 'llm-router-t'), 'engine');
    assert.deepEqual(tgi.command, ['text-generation-launcher']);
    assert.equal(tgi.resources, undefined);
    assert.deepEqual(lintObjects(parseManifests(chart.manifest, 'kinds.yaml')), []);
  });
});
