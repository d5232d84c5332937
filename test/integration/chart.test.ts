// The Helm chart, rendered by tools/chart-render: a Go program on Helm's own libraries (text/template, Sprig,
// go-yaml), as helm is not on these machines. Helm's engine semantics the chart relies on, the objects it renders
// with defaults, with three models and with LoRA adapters (as the router's discovery reads them), flags the router
// and the sidecar really take, the router's shutdown inside the pod's grace period, string values that stay strings,
// zero lint findings, and plain manifests that match.
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml } from 'yaml';
import { parseFlags } from '../../src/router/config/flags.js';
import { loadRouterConfig } from '../../src/router/config/config.js';
import { ModelCatalog } from '../../src/router/catalog/catalog.js';
import { desiredState } from '../../src/router/discovery/kubernetes/desired.js';
import { REFUSED_FLAGS, ROUTER_FLAGS } from '../../src/router/config/router-flags.js';
import { parseManifests } from '../../src/tools/lint/load.js';
import { lintObjects } from '../../src/tools/lint/rules.js';
import { PROBE_FLAGS } from '../../src/tools/probe/cli.js';
import { peerUrls } from '../../src/router/scaling/peer-pods.js';
import { plainManifests } from '../../tools/chart-render/plain.js';
import { CHART_DIR as CHART, ChartError, renderChart, type RenderedChart, type RenderOptions } from '../../tools/chart-render/render.js';
import { requireTool } from '../support/tools.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const FIXTURES = path.join(ROOT, 'test', 'fixtures', 'chart');
const THREE_MODELS = path.join(FIXTURES, 'three-models.yaml');
const LORA = path.join(FIXTURES, 'lora.yaml');
const KVAWARE = path.join(FIXTURES, 'kvaware.yaml');

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Obj = any;

const scratch = mkdtempSync(path.join(os.tmpdir(), 'chart-test-'));
after(() => rmSync(scratch, { recursive: true, force: true }));
let charts = 0;

/**
 * Renders `src` as templates/t.yaml of a throwaway chart named t (values.yaml: `values`; `extra`: more files under
 * templates/) and returns the rendered document. Its output must be a YAML mapping, as Helm parses every document.
 */
function renderTemplate(
  src: string,
  values: Record<string, unknown> = {},
  extra: Record<string, string> = {},
  opts: RenderOptions = {},
): string {
  const dir = path.join(scratch, `t${charts++}`);
  mkdirSync(path.join(dir, 'templates'), { recursive: true });
  writeFileSync(path.join(dir, 'Chart.yaml'), 'apiVersion: v2\nname: t\nversion: 0.1.0\nappVersion: "1.0"\n');
  writeFileSync(path.join(dir, 'values.yaml'), JSON.stringify(values));
  for (const [name, text] of Object.entries({ ...extra, 't.yaml': src })) writeFileSync(path.join(dir, 'templates', name), text);
  const { documents } = renderChart(dir, opts);
  assert.equal(documents.length, 1, 'one document rendered');
  return (documents[0] as { text: string }).text;
}

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

/** What the router's own discovery makes of these rendered Deployments and of one Ready pod of each (IPs 10.0.0.1...). */
function desiredOf(objs: Obj[], names: readonly string[]): ReturnType<typeof desiredState> {
  const workloads = names.map((n) => find(objs, 'Deployment', n));
  const pods = workloads.map((w, i) => ({
    metadata: { ...w.spec.template.metadata, name: `${w.metadata.name}-0`, namespace: 'default' },
    spec: w.spec.template.spec,
    status: { podIP: `10.0.0.${i + 1}`, phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }] },
  }));
  return desiredState(pods, workloads, { port: 8000, scheme: 'http', modelLabel: 'model' });
}

function routedAs(objs: Obj[], names: readonly string[]): { declarations: unknown[]; endpoints: unknown[] } {
  const d = desiredOf(objs, names);
  assert.deepEqual(d.invalid, []);
  return {
    declarations: d.declarations,
    endpoints: d.endpoints.map((e) => ({ url: e.url, role: e.role ?? 'both', probeUrl: e.probeUrl })),
  };
}

/** Runs the router's own configuration loader on the chart's args, env and ConfigMap, as the pod would. */
function routerConfig(objs: Obj[]): ReturnType<typeof loadRouterConfig> {
  const router = container(find(objs, 'Deployment', 'llm-router'), 'router');
  const args: string[] = router.args;
  const env = Object.fromEntries(((router.env ?? []) as Obj[]).filter((e) => typeof e.value === 'string').map((e) => [e.name, e.value]));
  const dir = mkdtempSync(path.join(scratch, 'config-'));
  const file = path.join(dir, 'config.yaml');
  writeFileSync(file, find(objs, 'ConfigMap', 'llm-router').data['config.yaml']);
  assert.equal(args[0], 'serve');
  return loadRouterConfig(
    args.slice(1).map((a) => (a === '/etc/llm-router/config.yaml' ? file : a)),
    env,
  );
}

describe("Helm's engine, as tools/chart-render runs it", { skip: requireTool('go') }, () => {
  test('Go templates: trim markers, variables, range with index, else if, and/or short-circuit', () => {
    const src =
      'out: {{- $n := len .Values.items -}}\n{{ range $i, $v := .Values.items }} {{ $i }}={{ $v }}{{ end }}\n{{- if eq $n 0 }} none{{ else if gt $n 2 }} many{{ else }} few{{ end }}|{{ and .Values.a .Values.a.b }}|{{ or .Values.missing "x" }}';
    assert.equal(renderTemplate(src, { items: ['a', 'b'], a: null }), 'out: 0=a 1=b few||x');
  });

  test('define/include/nindent, toYaml (sorted keys, unindented lists), quote, default that treats 0 as unset', () => {
    const helpers = { '_h.tpl': '{{- define "labels" -}}\napp: {{ .name }}\nteam: {{ .team | default "core" }}\n{{- end -}}' };
    const src =
      'metadata:\n  labels:\n    {{- include "labels" .Values | nindent 4 }}\nspec: {{- toYaml .Values.spec | nindent 2 }}\nn: {{ .Values.n | default 5 }} {{ quote .Values.s }}';
    assert.equal(
      renderTemplate(src, { name: 'x', spec: { z: 1, a: ['p', 'q'] }, n: 0, s: 'say "hi"' }, helpers),
      'metadata:\n  labels:\n    app: x\n    team: core\nspec:\n  a:\n  - p\n  - q\n  z: 1\nn: 5 "say \\"hi\\""',
    );
  });

  test('a missing value renders empty; a field of one fails; a missing function or template fails; required and fail stop with their message', () => {
    assert.equal(renderTemplate('out: [{{ .Values.a }}]'), 'out: []');
    assert.throws(
      () => renderTemplate('{{ .Values.a.b }}'),
      (e: unknown) => e instanceof ChartError && /nil pointer evaluating interface \{\}\.b/.test(e.message),
    );
    assert.throws(() => renderTemplate('{{ nosuch 1 }}'), /parse error at \(t\/templates\/t\.yaml:1\): function "nosuch" not defined/);
    assert.throws(() => renderTemplate('{{ include "nope" . }}'), /no template "nope"/);
    // Helm strips text/template's call chain from required and fail: the place, then the message alone
    assert.throws(
      () => renderTemplate('{{ required "name is required" .Values.name }}'),
      (e: unknown) => e instanceof ChartError && e.message === 'execution error at (t/templates/t.yaml:1:3): name is required',
    );
    assert.throws(() => renderTemplate('{{ required "empty is missing too" "" }}'), /: empty is missing too$/);
    assert.throws(
      () => renderTemplate('a: 1\n{{ fail "no way" }}'),
      (e: unknown) => e instanceof ChartError && e.message === 'execution error at (t/templates/t.yaml:2:3): no way',
    );
    assert.throws(() => renderTemplate('{{ if .Values.a }}x'), /parse error at \(t\/templates\/t\.yaml:1\): unexpected EOF/);
  });

  test("Helm's function set: env and expandenv removed, lookup finds nothing, tpl renders a string against values", () => {
    assert.throws(() => renderTemplate('out: {{ env "HOME" }}'), /function "env" not defined/);
    assert.throws(() => renderTemplate('out: {{ expandenv "$HOME" }}'), /function "expandenv" not defined/);
    assert.equal(renderTemplate('out: {{ lookup "v1" "Pod" "default" "x" | toJson }}'), 'out: {}');
    assert.equal(
      renderTemplate('out: {{ tpl .Values.greeting . }}', { greeting: 'hello {{ .Values.who }} of {{ .Chart.Name }}', who: 'world' }),
      'out: hello world of t',
    );
    assert.equal(
      renderTemplate(
        'out: {{ .Release.Name }} {{ .Release.Namespace }} {{ .Release.IsInstall }} {{ .Chart.AppVersion }} {{ .Template.BasePath }}',
        {},
        {},
        { releaseName: 'r', namespace: 'ns' },
      ),
      'out: r ns true 1.0 t/templates',
    );
    assert.equal(
      renderTemplate(
        'out: {{ .Capabilities.APIVersions.Has "keda.sh/v1alpha1" }} {{ .Capabilities.KubeVersion.Minor }}',
        {},
        {},
        { apiVersions: ['keda.sh/v1alpha1'], kubeVersion: 'v1.31.2' },
      ),
      'out: true 31',
    );
  });

  test('numbers in values are float64 as in Helm: int truncates, Sprig reads int "450.5" as 0, a million prints as 1e+06', () => {
    assert.equal(
      renderTemplate('out: {{ int .Values.f }} {{ int "450.5" }} {{ int "90" }} {{ .Values.big }} {{ int .Values.big }}', {
        f: 450.5,
        big: 1000000,
      }),
      'out: 450 0 90 1e+06 1000000',
    );
  });

  test('toYaml quotes every string that YAML 1.1 (Kubernetes) would read as a boolean, a number or null', () => {
    const values = { env: { a: 'yes', b: 'on', c: 'true', d: 'No', e: '8000', f: '1.5', g: 'null', h: '~', i: 'plain' } };
    assert.equal(
      renderTemplate('out:\n  {{- toYaml .Values.env | nindent 2 }}', values),
      'out:\n  a: "yes"\n  b: "on"\n  c: "true"\n  d: "No"\n  e: "8000"\n  f: "1.5"\n  g: "null"\n  h: "~"\n  i: plain',
    );
  });

  test('.Files.Get reads the other files of the chart, through a symbolic link too; a missing one is empty', () => {
    const dir = path.join(scratch, `files${charts++}`);
    mkdirSync(path.join(dir, 'templates'), { recursive: true });
    mkdirSync(path.join(dir, 'files'));
    writeFileSync(path.join(dir, 'Chart.yaml'), 'apiVersion: v2\nname: f\nversion: 0.1.0\n');
    writeFileSync(path.join(dir, 'files', 'a.txt'), 'from a file');
    writeFileSync(path.join(scratch, `outside-${charts}.json`), '{"x": 1}');
    symlinkSync(path.join('..', '..', `outside-${charts}.json`), path.join(dir, 'files', 'linked.json'));
    writeFileSync(
      path.join(dir, 'templates', 't.yaml'),
      'a: {{ .Files.Get "files/a.txt" | quote }}\nlinked: {{ .Files.Get "files/linked.json" | fromJson | toJson }}\nnone: [{{ .Files.Get "nope" }}]\nvalues: [{{ .Files.Get "values.yaml" }}]',
    );
    const { documents } = renderChart(dir);
    assert.equal(documents[0]?.text, 'a: "from a file"\nlinked: {"x":1}\nnone: []\nvalues: []');
    writeFileSync(path.join(dir, '.helmignore'), 'files/\n');
    assert.throws(() => renderChart(dir), /\.helmignore is not supported/);
  });

  test('values merge like Helm: maps merge, lists and scalars replace, null removes a default, later files win', () => {
    const out = renderTemplate(
      'out: {{ toJson .Values }}',
      { a: { b: 1, c: 2 }, l: [1, 2], d: 1, keep: 1 },
      {},
      { values: [{ a: { c: 3 }, l: [9], d: null }, { a: { b: 5 } }] },
    );
    assert.deepEqual(JSON.parse(out.slice('out: '.length)), { a: { b: 5, c: 3 }, l: [9], keep: 1 });
  });
});

describe('chart with default values', { skip: requireTool('go') }, () => {
  const chart = renderChart(CHART);
  const objs = objects(chart);

  test('renders the router objects in install order, each with its # Source', () => {
    assert.deepEqual(
      chart.documents.map((d) => `${d.kind}/${d.name}`),
      [
        'PodDisruptionBudget/llm-router',
        'ServiceAccount/llm-router',
        'ConfigMap/llm-router',
        'Role/llm-router-discovery',
        'RoleBinding/llm-router-discovery',
        'Service/llm-router',
        'Deployment/llm-router',
      ],
    );
    assert.match(chart.manifest, /^---\n# Source: llm-router\/templates\/pdb\.yaml\napiVersion: policy\/v1\n/);
  });

  test('router: 2 replicas spread over nodes, PDB, probes on /health, /ready and a startup probe, config checksum', () => {
    const router = find(objs, 'Deployment', 'llm-router');
    assert.equal(router.spec.replicas, 2);
    const anti = router.spec.template.spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm;
    assert.equal(anti.topologyKey, 'kubernetes.io/hostname');
    assert.deepEqual(anti.labelSelector.matchLabels, router.spec.selector.matchLabels);
    assert.deepEqual(find(objs, 'PodDisruptionBudget', 'llm-router').spec, {
      minAvailable: 1,
      selector: { matchLabels: router.spec.selector.matchLabels },
    });
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

  test('the config is a ConfigMap mounted as a directory; checksum/config covers the settings that need a restart, not the live ones', () => {
    const router = find(objs, 'Deployment', 'llm-router');
    const mount = container(router, 'router').volumeMounts.find((m: Obj) => m.name === 'config');
    assert.deepEqual(mount, { name: 'config', mountPath: '/etc/llm-router', readOnly: true }, 'no subPath: the kubelet updates the file');
    const checksum = (config: Record<string, unknown>, more: Record<string, unknown> = {}): string =>
      find(objects(renderChart(CHART, { values: [{ router: { config }, ...more }] })), 'Deployment', 'llm-router').spec.template.metadata
        .annotations['checksum/config'];
    const base = checksum({ 'retry-after': 5 });
    // live settings (any spelling) reach the pods through the mounted file: no rollout
    assert.equal(checksum({ 'retry-after': 5, known_models: ['m'], staticAliases: ['a:m'], 'rate-limit-rps': 3 }), base);
    assert.equal(checksum({ 'retry-after': 5 }, { routing: { logic: 'least-load' } }), base);
    // the others, and KV-cache events (set up at start-up), roll the pods
    assert.notEqual(checksum({ 'retry-after': 6 }), base);
    assert.notEqual(checksum({ 'retry-after': 5, 'allow-routing-header': true }), base);
    assert.notEqual(checksum({ 'retry-after': 5 }, { routing: { logic: 'kvaware' } }), base);
    // the chart's list is the router's live settings and their other spellings
    const tpl = readFileSync(path.join(CHART, 'templates', '_helpers.tpl'), 'utf8');
    const listed = /define "llm-router.liveSettings" -\}\}\n([\s\S]*?)\n\{\{- end/.exec(tpl)?.[1]?.split(/\s+/) ?? [];
    const live = ROUTER_FLAGS.filter((f) => 'live' in f).flatMap((f) => [f.name, ...('aliases' in f ? f.aliases : [])]);
    assert.deepEqual(new Set(listed), new Set(live));
  });

  test('without the robustness values: no admin port, one worker at 500m, no API keys file, no NetworkPolicy, round robin', () => {
    const c = container(find(objs, 'Deployment', 'llm-router'), 'router');
    for (const flag of ['--admin-port', '--workers', '--api-keys-file', '--kv-events-port', '--kv-events-replay-port'])
      assert.ok(!c.args.includes(flag), flag);
    assert.deepEqual(
      c.ports.map((p: Obj) => p.name),
      ['http'],
    );
    assert.deepEqual(c.resources, { requests: { cpu: '500m', memory: '256Mi' }, limits: { memory: '1Gi' } });
    for (const probe of ['startupProbe', 'livenessProbe', 'readinessProbe']) assert.equal(c[probe].httpGet.port, 'http', probe);
    assert.equal(c.volumeMounts.length, 1);
    assert.ok(!objs.some((o) => o.kind === 'NetworkPolicy' || (o.kind === 'Service' && o.metadata.name !== 'llm-router')));
    assert.equal(parseYaml(find(objs, 'ConfigMap', 'llm-router').data['config.yaml'])['routing-logic'], 'roundrobin');
    assert.equal(routerConfig(objs).routingLogic, 'roundrobin');
  });

  test('its image is the one `npm run image` builds: llm-router:<package version>, run as 65532 on a read-only root', () => {
    const { version } = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };
    const router = find(objs, 'Deployment', 'llm-router');
    const c = container(router, 'router');
    assert.equal(c.image, `llm-router:${version}`);
    assert.equal(router.spec.template.spec.securityContext.runAsUser, 65532);
    assert.equal(c.securityContext.readOnlyRootFilesystem, true);
  });

  test('minimal RBAC: get/list/watch on pods, deployments, statefulsets, leaderworkersets; nothing else', () => {
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
    assert.equal(config.kubernetes?.labelSelector, 'llm-router/pool=llm-router');
    assert.equal(config.kubernetes?.namespace, 'default');
    assert.equal(config.kubernetes?.port, 8000);
    assert.equal(config.kubernetes?.modelLabel, 'model');
  });

  test('lint finds nothing in it', () => {
    assert.deepEqual(lintObjects(parseManifests(chart.manifest, 'default.yaml')), []);
  });

  test('deploy/manifests/ is what the chart renders (regenerate: npm run chart:manifests)', () => {
    for (const m of plainManifests()) {
      assert.equal(readFileSync(m.file, 'utf8'), m.content, `${m.path} is stale`);
    }
  });
});

describe('chart with three models: one standalone, one at zero replicas with KEDA, one P/D pair', { skip: requireTool('go') }, () => {
  const chart = renderChart(CHART, { values: [THREE_MODELS] });
  const objs = objects(chart);

  test('one Deployment per model and role, at the declared replicas, zero included', () => {
    const engines = objs.filter((o) => o.kind === 'Deployment' && o.metadata.labels['app.kubernetes.io/component'] === 'engine');
    assert.deepEqual(
      engines.map((e) => `${e.metadata.name}=${e.spec.replicas} ${e.metadata.annotations['llm-router/models']}`),
      [
        'llm-router-llama-8b=2 llama-3-8b',
        'llm-router-mixtral=0 mixtral-8x7b',
        'llm-router-qwen-prefill=2 qwen3-32b',
        'llm-router-qwen-decode=1 qwen3-32b',
      ],
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
      assert.ok(
        s.failureThreshold * s.periodSeconds >= 2 * want.load,
        `${name}: ${s.failureThreshold} x ${s.periodSeconds} >= 2 x ${want.load}`,
      );
      assert.equal(d.metadata.annotations['llm-router/expected-load-seconds'], String(want.load));
      assert.equal(sidecar.args[0], 'probe');
      assert.equal(sidecar.args[sidecar.args.indexOf('--engine-url') + 1], `http://127.0.0.1:${want.port}`, name);
      // the sidecar's args are real `llm-router probe` flags
      parseFlags(sidecar.args.slice(1), PROBE_FLAGS);
    }
  });

  test('P/D: the decode engine listens on 8200 behind a routing sidecar on 8000; roles, protocol and probe port as the router reads them', () => {
    const decode = find(objs, 'Deployment', 'llm-router-qwen-decode');
    const engine = container(decode, 'engine');
    assert.equal(engine.args[engine.args.indexOf('--port') + 1], '8200');
    assert.ok(engine.args.includes('--kv-transfer-config'));
    assert.deepEqual(container(decode, 'routing-sidecar').args.slice(0, 2), ['-port=8000', '-vllm-port=8200']);
    assert.deepEqual(engine.resources.limits, { 'nvidia.com/gpu': 4 });
    // the router sees prefill pods too: it names them to the decode sidecar
    assert.equal(routerConfig(objs).kubernetes?.labelSelector, 'llm-router/pool=llm-router');
    assert.deepEqual(routedAs(objs, ['llm-router-qwen-prefill', 'llm-router-qwen-decode']), {
      declarations: [
        { model: 'qwen3-32b', replicasWanted: true, role: 'prefill', pdProtocol: 'llm-d-sidecar' },
        { model: 'qwen3-32b', replicasWanted: true, role: 'decode', pdProtocol: 'llm-d-sidecar' },
      ],
      endpoints: [
        { url: 'http://10.0.0.2:8000', role: 'decode', probeUrl: 'http://10.0.0.2:8200' },
        { url: 'http://10.0.0.1:8000', role: 'prefill', probeUrl: undefined },
      ],
    });
    const catalog = new ModelCatalog({ pdProtocol: 'vllm-nixl' });
    const routed = desiredOf(objs, ['llm-router-qwen-prefill', 'llm-router-qwen-decode']);
    catalog.setDeclarations('kubernetes', routed.declarations);
    assert.equal(catalog.model('qwen3-32b')?.pd?.protocol, 'llm-d-sidecar', 'the workload annotation overrides --pd-protocol');
  });

  test('P/D with engineDefaults.pd.protocol vllm-nixl: no sidecar, the decode engine on 8000, lint clean; other protocols refused', () => {
    const nixl = renderChart(CHART, { values: [THREE_MODELS, { engineDefaults: { pd: { protocol: 'vllm-nixl' } } }] });
    const nobjs = objects(nixl);
    const decode = find(nobjs, 'Deployment', 'llm-router-qwen-decode');
    assert.deepEqual(
      decode.spec.template.spec.containers.map((c: Obj) => c.name),
      ['engine', 'readiness'],
    );
    assert.deepEqual(container(decode, 'engine').ports, [{ name: 'engine', containerPort: 8000, protocol: 'TCP' }]);
    assert.deepEqual(routedAs(nobjs, ['llm-router-qwen-decode']).endpoints, [
      { url: 'http://10.0.0.1:8000', role: 'decode', probeUrl: undefined },
    ]);
    assert.equal(decode.metadata.annotations['llm-router/pd-protocol'], 'vllm-nixl');
    assert.deepEqual(lintObjects(parseManifests(nixl.manifest, 'nixl.yaml')), []);
    assert.throws(
      () => renderChart(CHART, { values: [THREE_MODELS, { engineDefaults: { pd: { protocol: 'sglang' } } }] }),
      /pd.protocol must be llm-d-sidecar or vllm-nixl/,
    );
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
    assert.deepEqual(
      scaled.map((s) => s.metadata.name),
      ['llm-router-mixtral'],
    );
    const s = scaled[0];
    assert.equal(s.spec.minReplicaCount, 0);
    assert.equal(s.spec.scaleTargetRef.name, 'llm-router-mixtral');
    assert.match(s.spec.triggers[0].metadata.query, /llm_router_model_demand_total\{model="mixtral-8x7b"\}/);
    assert.equal(find(objs, 'ServiceMonitor', 'llm-router').spec.endpoints[0].path, '/metrics');
  });

  test('lint finds nothing in it', () => {
    assert.deepEqual(lintObjects(parseManifests(chart.manifest, 'three-models.yaml')), []);
  });

  test("the Grafana dashboard: deploy/grafana/llm-router.json in a ConfigMap with the sidecar's label", () => {
    const cm = find(objs, 'ConfigMap', 'llm-router-grafana-dashboard');
    assert.equal(cm.metadata.labels.grafana_dashboard, '1');
    assert.equal(cm.metadata.annotations.grafana_folder, 'LLM');
    assert.equal(cm.metadata.namespace, 'default');
    const file = readFileSync(path.join(ROOT, 'deploy', 'grafana', 'llm-router.json'), 'utf8');
    assert.equal(cm.data['llm-router.json'], file.trimEnd(), 'the same bytes, through the chart link dashboards/llm-router.json');
    assert.equal(JSON.parse(cm.data['llm-router.json']).uid, 'llm-router');
    const elsewhere = objects(
      renderChart(CHART, {
        values: [{ grafana: { dashboard: { enabled: true, namespace: 'monitoring', labels: { dashboards: 'llm' } } } }],
      }),
    );
    const moved = find(elsewhere, 'ConfigMap', 'llm-router-grafana-dashboard');
    assert.equal(moved.metadata.namespace, 'monitoring');
    assert.equal(moved.metadata.labels.dashboards, 'llm');
    assert.equal(moved.metadata.annotations, undefined);
  });

  test('the external-push KEDA flavour points ScaledObjects at the router, which gets --keda-scaler-port', () => {
    const push = renderChart(CHART, { values: [THREE_MODELS, { keda: { flavour: 'external-push' } }] });
    const o = objects(push);
    const trigger = o.find((x) => x.kind === 'ScaledObject').spec.triggers[0];
    assert.deepEqual(trigger, { type: 'external-push', metadata: { scalerAddress: 'llm-router.default.svc:9090', model: 'mixtral-8x7b' } });
    routerConfig(o);
    const router = find(o, 'Deployment', 'llm-router');
    const args: string[] = container(router, 'router').args;
    const flags = parseFlags(args.slice(1), ROUTER_FLAGS, { refused: REFUSED_FLAGS }).values;
    assert.equal(flags['keda-scaler-port'], 9090);
    assert.deepEqual(lintObjects(parseManifests(push.manifest, 'push.yaml')), []);

    // the replica KEDA reaches sums every replica's demand: its peers are the pods of its own Deployment
    const selector = Object.fromEntries(
      String(flags['scaler-peer-selector'])
        .split(',')
        .map((t) => t.split('=')),
    );
    assert.deepEqual(selector, router.spec.selector.matchLabels);
    for (const [k, v] of Object.entries(selector))
      assert.equal(router.spec.template.metadata.labels[k], v, 'the selector matches the router pods');
    assert.equal(flags['scaler-peer-namespace'], 'default');
    const peersRole = find(o, 'Role', 'llm-router-peers');
    assert.equal(peersRole.metadata.namespace, 'default');
    assert.deepEqual(peersRole.rules, [{ apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch'] }]);
    assert.equal(find(o, 'RoleBinding', 'llm-router-peers').subjects[0].name, router.spec.template.spec.serviceAccountName);

    const alone = objects(renderChart(CHART, { values: [THREE_MODELS, { keda: { flavour: 'external-push', sumReplicas: false } }] }));
    assert.ok(!container(find(alone, 'Deployment', 'llm-router'), 'router').args.includes('--scaler-peer-selector'));
    assert.ok(!alone.some((x) => x.kind === 'Role' && x.metadata.name === 'llm-router-peers'));
  });
});

describe('chart with LoRA adapters: two on a standalone model, one on a P/D pair', { skip: requireTool('go') }, () => {
  const chart = renderChart(CHART, { values: [LORA] });
  const objs = objects(chart);
  const engines = ['llm-router-llama-8b', 'llm-router-qwen-prefill', 'llm-router-qwen-decode'];

  test('every engine workload of a model with adapters: the annotation, --enable-lora and its slots, runtime loading on', () => {
    const expected: Record<string, { annotation: string; lora: string[] }> = {
      'llm-router-llama-8b': {
        annotation: 'chat-lora=hf-org/chat-lora,sql-lora=/models/adapters/sql',
        lora: ['--enable-lora', '--max-loras', '4', '--max-lora-rank', '64'],
      },
      'llm-router-qwen-prefill': { annotation: 'qwen-support=hf-org/qwen3-support-lora', lora: ['--enable-lora', '--max-loras', '1'] },
      'llm-router-qwen-decode': { annotation: 'qwen-support=hf-org/qwen3-support-lora', lora: ['--enable-lora', '--max-loras', '1'] },
    };
    for (const [name, want] of Object.entries(expected)) {
      const d = find(objs, 'Deployment', name);
      assert.equal(d.metadata.annotations['llm-router/lora-adapters'], want.annotation, name);
      const engine = container(d, 'engine');
      const at = engine.args.indexOf('--enable-lora');
      assert.deepEqual(engine.args.slice(at, at + want.lora.length), want.lora, name);
      assert.ok(!engine.args.slice(at + want.lora.length).some((a: string) => a.includes('lora')), `${name}: no other LoRA flag`);
      const env = engine.env.filter((e: Obj) => e.name === 'VLLM_ALLOW_RUNTIME_LORA_UPDATING');
      assert.deepEqual(env, [{ name: 'VLLM_ALLOW_RUNTIME_LORA_UPDATING', value: 'true' }], name);
    }
    // the annotation sits on the workload, where the router reads it: changing adapters rolls no engine pod
    for (const name of engines)
      assert.equal(find(objs, 'Deployment', name).spec.template.metadata.annotations['llm-router/lora-adapters'], undefined);
  });

  test("the router's Kubernetes discovery reads the adapters, each with its base; its catalog lists them as adapters", () => {
    const d = desiredOf(objs, engines);
    assert.deepEqual(d.invalid, []);
    assert.deepEqual(d.adapters, [
      { name: 'chat-lora', base: 'llama-3-8b', path: 'hf-org/chat-lora' },
      // the P/D pair declares its adapter on both sides, alike
      { name: 'qwen-support', base: 'qwen3-32b', path: 'hf-org/qwen3-support-lora' },
      { name: 'qwen-support', base: 'qwen3-32b', path: 'hf-org/qwen3-support-lora' },
      { name: 'sql-lora', base: 'llama-3-8b', path: '/models/adapters/sql' },
    ]);
    const catalog = new ModelCatalog();
    catalog.setDeclarations('kubernetes', d.declarations);
    catalog.setAdapterDeclarations('kubernetes', d.adapters);
    catalog.setEndpoints('kubernetes', d.endpoints);
    assert.deepEqual(
      ['chat-lora', 'sql-lora', 'qwen-support'].map((n) => catalog.model(n)?.adapter),
      [
        { parent: 'llama-3-8b', path: 'hf-org/chat-lora', loadedEndpoints: 0 },
        { parent: 'llama-3-8b', path: '/models/adapters/sql', loadedEndpoints: 0 },
        { parent: 'qwen3-32b', path: 'hf-org/qwen3-support-lora', loadedEndpoints: 0 },
      ],
    );
  });

  test('lint finds nothing in it, and finds the runtime loading the chart turns on once it is off', () => {
    assert.deepEqual(lintObjects(parseManifests(chart.manifest, 'lora.yaml')), []);
    const off = chart.manifest.replace(
      /- name: VLLM_ALLOW_RUNTIME_LORA_UPDATING\n(\s+)value: "true"/g,
      '- name: VLLM_ALLOW_RUNTIME_LORA_UPDATING\n$1value: "false"',
    );
    assert.deepEqual(
      lintObjects(parseManifests(off, 'off.yaml')).map((f) => `${f.rule} ${f.object}`),
      engines.map((n) => `lora-runtime-loading-off Deployment/${n}`),
    );
  });

  test("slots default to engineDefaults.lora; an engine's own lora settings win", () => {
    const objs = objects(renderChart(CHART, { values: [LORA, { engineDefaults: { lora: { maxLoras: 2, maxLoraRank: 32 } } }] }));
    const loraArgs = (name: string): string[] => {
      const args: string[] = container(find(objs, 'Deployment', name), 'engine').args;
      return args.slice(args.indexOf('--enable-lora'));
    };
    assert.deepEqual(loraArgs('llm-router-qwen-decode'), ['--enable-lora', '--max-loras', '2', '--max-lora-rank', '32']);
    assert.deepEqual(loraArgs('llm-router-llama-8b'), ['--enable-lora', '--max-loras', '4', '--max-lora-rank', '64']);
  });

  test('an SGLang engine with adapters: the annotation and its LoRA flags, no vLLM variable, and lint finds nothing', () => {
    const chart = renderChart(CHART, {
      values: [{ engines: [{ name: 's', model: 'Qwen/Qwen3-8B', engineKind: 'sglang', lora: { adapters: { 'qwen-sql': '/a/sql' } } }] }],
    });
    const d = find(objects(chart), 'Deployment', 'llm-router-s');
    assert.equal(d.metadata.annotations['llm-router/lora-adapters'], 'qwen-sql=/a/sql');
    const engine = container(d, 'engine');
    assert.deepEqual(engine.args.slice(engine.args.indexOf('--enable-lora')), [
      '--enable-lora',
      '--max-loras-per-batch',
      '1',
      '--max-lora-rank',
      '16',
      '--lora-target-modules',
      'all',
    ]);
    assert.ok(!(engine.env ?? []).some((e: Obj) => e.name.includes('LORA')));
    assert.deepEqual(lintObjects(parseManifests(chart.manifest, 'sglang-lora.yaml')), []);
  });

  test('models without adapters get none of it', () => {
    const three = objects(renderChart(CHART, { values: [THREE_MODELS] }));
    for (const d of three.filter((o) => o.kind === 'Deployment' && o.metadata.labels['app.kubernetes.io/component'] === 'engine')) {
      assert.equal(d.metadata.annotations['llm-router/lora-adapters'], undefined);
      const engine = container(d, 'engine');
      assert.ok(!engine.args.some((a: string) => a.includes('lora')), d.metadata.name);
      assert.ok(!(engine.env ?? []).some((e: Obj) => e.name.includes('LORA')), d.metadata.name);
    }
  });

  test('refused: adapters on TGI, names the router would not take or would route elsewhere, paths the annotation cannot carry', () => {
    const render =
      (engine: Record<string, unknown>, others: unknown[] = []) =>
      (): unknown =>
        renderChart(CHART, { values: [{ engines: [{ name: 'e', model: 'org/m', ...engine }, ...others] }] });
    const adapters = (a: unknown): Record<string, unknown> => ({ lora: { adapters: a } });
    const cases: [() => unknown, RegExp][] = [
      [
        render({ engineKind: 'tgi', ...adapters({ a: 'p' }) }),
        /engines\[e\]: LoRA adapters are only rendered for vllm and sglang .*, not tgi/,
      ],
      [render(adapters({ 'a b': 'p' })), /"a b" is not an adapter name \(no blanks, commas, = or @\)/],
      [render(adapters({ 'a@m': 'p' })), /"a@m" is not an adapter name/],
      [
        render(adapters({ other: 'p' }), [{ name: 'o', model: 'other' }]),
        /"other" is the name of a model; the router would route it to that model/,
      ],
      [render(adapters({ 'org/m': 'p' })), /"org\/m" is the name of a model/],
      [render(adapters({ a: 'p' }), [{ name: 'o', model: 'x', ...adapters({ a: 'q' }) }]), /"a" is an adapter of engines\[o\] too/],
      [render(adapters({ a: 'p,q' })), /engines\[e\]\.lora\.adapters\.a needs a path without commas/],
      [render(adapters({ a: ' ' })), /engines\[e\]\.lora\.adapters\.a needs a path/],
      [render(adapters(['a=p'])), /engines\[e\]\.lora\.adapters must map adapter names to paths/],
      [render({ lora: { adapters: { a: 'p' }, maxLoras: 0 } }), /engines\[e\]\.lora\.maxLoras must be 1 or more/],
    ];
    for (const [render, message] of cases)
      assert.throws(render, (e: unknown) => e instanceof ChartError && message.test(e.message), String(message));
    assert.throws(
      () => renderChart(CHART, { values: [{ engineDefaults: { lora: { adapters: { a: 'p' } } }, engines: [{ name: 'e', model: 'm' }] }] }),
      /engineDefaults\.lora\.adapters: adapters belong to one base model/,
    );
  });
});

describe('chart errors are clear', { skip: requireTool('go') }, () => {
  test('an engine without a model, a P/D pair on a non-vLLM engine, a TGI served name it cannot serve', () => {
    assert.throws(
      () => renderChart(CHART, { values: [{ engines: [{ name: 'x' }] }] }),
      (e: unknown) => e instanceof ChartError && /engines\[x\] needs a model/.test(e.message),
    );
    assert.throws(
      () => renderChart(CHART, { values: [{ engines: [{ name: 'x', model: 'm', role: 'pd', engineKind: 'sglang' }] }] }),
      /role pd is only rendered for vllm/,
    );
    assert.throws(
      () =>
        renderChart(CHART, { values: [{ engines: [{ name: 't', model: 'org/falcon', servedModelName: 'other', engineKind: 'tgi' }] }] }),
      /servedModelName must be org\/falcon or falcon/,
    );
  });

  test('SGLang and TGI engines render with their own command lines and pass lint', () => {
    const chart = renderChart(CHART, {
      values: [
        {
          engines: [
            { name: 's', model: 'Qwen/Qwen3-8B', engineKind: 'sglang' },
            { name: 't', model: 'tiiuae/falcon-7b', engineKind: 'tgi', gpus: 0 },
          ],
        },
      ],
    });
    const objs = objects(chart);
    assert.deepEqual(container(find(objs, 'Deployment', 'llm-router-s'), 'engine').command, ['python3', '-m', 'sglang.launch_server']);
    const tgi = container(find(objs, 'Deployment', 'llm-router-t'), 'engine');
    assert.deepEqual(tgi.command, ['text-generation-launcher']);
    assert.equal(tgi.resources, undefined);
    assert.deepEqual(lintObjects(parseManifests(chart.manifest, 'kinds.yaml')), []);
  });
});

describe('env values that YAML 1.1 reads as booleans or numbers stay strings', { skip: requireTool('go') }, () => {
  const chart = renderChart(CHART, { values: [path.join(FIXTURES, 'env-strings.yaml')] });

  test('value: "yes" renders quoted, and Kubernetes (YAML 1.1) reads a string', () => {
    const router = chart.documents.find((d) => d.kind === 'Deployment' && d.name === 'llm-router');
    const engine = chart.documents.find((d) => d.kind === 'Deployment' && d.name === 'llm-router-e');
    assert.ok(router && engine);
    assert.match(router.text, /- name: FEATURE_FLAG\n\s+value: "yes"\n/);
    assert.match(engine.text, /- name: HF_HUB_OFFLINE\n\s+value: "yes"\n/);
    // the `yaml` package reads 1.2 by default, where a bare yes is a string too: read as the API server does
    const env = (text: string, c: string): Record<string, unknown> =>
      Object.fromEntries(container(parseYaml(text, { version: '1.1' }), c).env.map((e: Obj) => [e.name, e.value]));
    assert.deepEqual(env(router.text, 'router'), { FEATURE_FLAG: 'yes', VERBOSE: 'on', PORT_NAME: '8000' });
    assert.equal(env(engine.text, 'engine').HF_HUB_OFFLINE, 'yes');
    assert.equal(parseYaml('value: yes', { version: '1.1' }).value, true, 'unquoted, YAML 1.1 would read a boolean');
  });
});

describe("the router's shutdown fits in its pod's termination grace period", { skip: requireTool('go') }, () => {
  /** Renders with `values` and returns the router pod's grace period and what the router's own loader reads. */
  function shutdown(values: Record<string, unknown>[]): { graceSeconds: number; drainMs: number; shutdownTimeoutMs: number } {
    const objs = objects(renderChart(CHART, { values }));
    const { security } = routerConfig(objs);
    const graceSeconds = find(objs, 'Deployment', 'llm-router').spec.template.spec.terminationGracePeriodSeconds;
    assert.equal(typeof graceSeconds, 'number');
    return { graceSeconds, drainMs: security.drainMs, shutdownTimeoutMs: security.shutdownTimeoutMs };
  }

  function assertCovered(s: { graceSeconds: number; drainMs: number; shutdownTimeoutMs: number }): void {
    assert.ok(
      s.graceSeconds * 1000 >= s.drainMs + s.shutdownTimeoutMs,
      `grace ${s.graceSeconds} s covers drain ${s.drainMs} ms + shutdown timeout ${s.shutdownTimeoutMs} ms`,
    );
  }

  test("default values: the router's default drain (5 s) and shutdown timeout (60 s), and 10 s more: 75 s", () => {
    const s = shutdown([]);
    assert.deepEqual(s, { graceSeconds: 75, drainMs: 5_000, shutdownTimeoutMs: 60_000 });
    assertCovered(s);
  });

  test('router.config (any key spelling), LLM_ROUTER_* env values and extraArgs are read as the router reads them, flags winning', () => {
    const cases: [Record<string, unknown>, number][] = [
      [{ router: { config: { 'drain-seconds': 20, shutdownTimeout: 300 } } }, 330],
      [{ router: { config: { drain_seconds: 2.5 } } }, 73],
      [{ router: { env: [{ name: 'LLM_ROUTER_SHUTDOWN_TIMEOUT', value: '200' }] } }, 215],
      [{ router: { config: { 'shutdown-timeout': 100 }, extraArgs: ['--shutdown-timeout=400', '--drain-seconds', '30'] } }, 440],
    ];
    for (const [values, grace] of cases) {
      const s = shutdown([values]);
      assertCovered(s);
      assert.equal(s.graceSeconds, grace, JSON.stringify(values));
    }
  });

  test('an explicit grace period is kept when it covers them and refused when it does not', () => {
    assert.equal(shutdown([{ router: { terminationGracePeriodSeconds: 600 } }]).graceSeconds, 600);
    assert.throws(
      () => renderChart(CHART, { values: [{ router: { terminationGracePeriodSeconds: 60 } }] }),
      (e: unknown) =>
        e instanceof ChartError &&
        /router\.terminationGracePeriodSeconds \(60\) must cover drain-seconds \(5\) \+ shutdown-timeout \(60\) \+ 10 s: at least 75/.test(
          e.message,
        ),
    );
  });
});

describe('the router: admin port, API keys from a Secret, workers', { skip: requireTool('go') }, () => {
  const values = { router: { adminPort: 9091, workers: 4, apiKeys: { existingSecret: 'router-keys' } }, serviceMonitor: { enabled: true } };
  const chart = renderChart(CHART, { values: [values] });
  const objs = objects(chart);
  const router = find(objs, 'Deployment', 'llm-router');
  const c = container(router, 'router');

  test("the router's own loader reads the admin port, the workers and the keys file the chart gives it", () => {
    const config = routerConfig(objs);
    assert.equal(config.security.adminPort, 9091);
    assert.equal(config.workers, 4);
    assert.equal(config.security.apiKeysFile, '/etc/llm-router-api-keys/api-keys');
  });

  test('admin port: a container port, the probes on it, the peers annotation, a ClusterIP Service of its own that the ServiceMonitor scrapes', () => {
    assert.deepEqual(c.ports[1], { name: 'admin', containerPort: 9091, protocol: 'TCP' });
    for (const probe of ['startupProbe', 'livenessProbe', 'readinessProbe']) assert.equal(c[probe].httpGet.port, 'admin', probe);
    // the other replicas' KEDA scalers reach this one at the annotation (the router's own reading of it)
    const pod = {
      metadata: { ...router.spec.template.metadata, name: 'llm-router-0' },
      status: { podIP: '10.0.0.9', phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }] },
    };
    assert.deepEqual(peerUrls([pod], 8001), ['http://10.0.0.9:9091']);
    const admin = find(objs, 'Service', 'llm-router-admin');
    assert.equal(admin.spec.type, 'ClusterIP');
    assert.deepEqual(admin.spec.ports, [{ name: 'admin', port: 9091, targetPort: 'admin', protocol: 'TCP' }]);
    assert.deepEqual(admin.spec.selector, router.spec.selector.matchLabels);
    // the main Service (any type, a LoadBalancer too) does not carry it
    assert.deepEqual(
      find(objs, 'Service', 'llm-router').spec.ports.map((p: Obj) => p.name),
      ['http'],
    );
    const monitor = find(objs, 'ServiceMonitor', 'llm-router');
    assert.equal(monitor.spec.endpoints[0].port, 'admin');
    // it selects the admin Service only
    const selected = objs.filter(
      (o) => o.kind === 'Service' && Object.entries(monitor.spec.selector.matchLabels).every(([k, v]) => o.metadata.labels[k] === v),
    );
    assert.deepEqual(
      selected.map((o) => o.metadata.name),
      ['llm-router-admin'],
    );
  });

  test('API keys: the Secret mounted read-only as a directory (updates reach the file), readable by the non-root user', () => {
    const volume = router.spec.template.spec.volumes.find((v: Obj) => v.name === 'api-keys');
    assert.deepEqual(volume.secret, { secretName: 'router-keys', defaultMode: 0o444, items: [{ key: 'api-keys', path: 'api-keys' }] });
    const mount = c.volumeMounts.find((m: Obj) => m.name === 'api-keys');
    assert.deepEqual(mount, { name: 'api-keys', mountPath: '/etc/llm-router-api-keys', readOnly: true });
    assert.equal(c.args[c.args.indexOf('--api-keys-file') + 1], `${mount.mountPath}/api-keys`);
    const other = objects(
      renderChart(CHART, { values: [{ router: { adminPort: 9091, apiKeys: { existingSecret: 's', key: 'keys.txt' } } }] }),
    );
    const oc = container(find(other, 'Deployment', 'llm-router'), 'router');
    assert.equal(oc.args[oc.args.indexOf('--api-keys-file') + 1], '/etc/llm-router-api-keys/keys.txt');
    // without an admin port nothing else changes: the keys guard the main port, probes stay public there
    const plain = objects(renderChart(CHART, { values: [{ router: { apiKeys: { existingSecret: 's' } } }] }));
    assert.equal(container(find(plain, 'Deployment', 'llm-router'), 'router').readinessProbe.httpGet.port, 'http');
  });

  test('workers: --workers N and a CPU request of N x cpuPerWorker, unless requests.cpu is set', () => {
    assert.equal(c.args[c.args.indexOf('--workers') + 1], '4');
    assert.deepEqual(c.resources.requests, { cpu: '2', memory: '256Mi' });
    const cpu = (router: Record<string, unknown>): string =>
      container(find(objects(renderChart(CHART, { values: [{ router }] })), 'Deployment', 'llm-router'), 'router').resources.requests.cpu;
    assert.equal(cpu({ workers: 3 }), '1500m');
    assert.equal(cpu({ workers: 2, cpuPerWorker: 1 }), '2');
    assert.equal(cpu({ workers: 3, cpuPerWorker: '0.25' }), '750m');
    assert.equal(cpu({ workers: 3, resources: { requests: { cpu: '800m' } } }), '800m');
    assert.throws(() => renderChart(CHART, { values: [{ router: { workers: 0 } }] }), /router\.workers must be 1 or more/);
  });

  test('lint finds nothing in it', () => {
    assert.deepEqual(lintObjects(parseManifests(chart.manifest, 'admin.yaml')), []);
  });

  test('refused: keys without an admin port where Prometheus or the peers would need them; an admin port on another port of the router', () => {
    const cases: [Record<string, unknown>, RegExp][] = [
      [
        { router: { apiKeys: { existingSecret: 's' } }, serviceMonitor: { enabled: true } },
        /needs router\.adminPort: without it \/metrics is behind the API keys/,
      ],
      [
        { router: { apiKeys: { existingSecret: 's' } }, keda: { enabled: true, flavour: 'external-push' } },
        /needs router\.adminPort: without it each replica's \/demand is behind the API keys/,
      ],
      [{ router: { adminPort: 8001 } }, /router\.adminPort \(8001\) must differ from router\.port/],
      [{ router: { adminPort: 9090 }, keda: { enabled: true, flavour: 'external-push' } }, /must differ from keda\.scalerPort/],
      [{ router: { adminPort: 70000 } }, /router\.adminPort must be a port number/],
    ];
    for (const [values, message] of cases)
      assert.throws(
        () => renderChart(CHART, { values: [values] }),
        (e: unknown) => e instanceof ChartError && message.test(e.message),
        String(message),
      );
    // with an admin port, KEDA's peers and Prometheus need no key
    renderChart(CHART, {
      values: [{ router: { adminPort: 9091, apiKeys: { existingSecret: 's' } }, keda: { enabled: true, flavour: 'external-push' } }],
    });
  });
});

describe('networkPolicy', { skip: requireTool('go') }, () => {
  const on = { networkPolicy: { enabled: true } };

  test('off by default, with engines too', () => {
    assert.ok(!objects(renderChart(CHART, { values: [THREE_MODELS] })).some((o) => o.kind === 'NetworkPolicy'));
  });

  test('the router: its API open (apiFrom empty), the admin port to Prometheus and the other replicas, the KEDA scaler to KEDA', () => {
    const objs = objects(
      renderChart(CHART, { values: [on, { router: { adminPort: 9091 }, keda: { enabled: true, flavour: 'external-push' } }] }),
    );
    const policy = find(objs, 'NetworkPolicy', 'llm-router');
    const router = find(objs, 'Deployment', 'llm-router');
    const routers = { podSelector: { matchLabels: router.spec.selector.matchLabels } };
    const prometheus = {
      namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } },
      podSelector: { matchLabels: { 'app.kubernetes.io/name': 'prometheus' } },
    };
    assert.deepEqual(policy.spec.podSelector.matchLabels, router.spec.selector.matchLabels);
    assert.deepEqual(policy.spec.policyTypes, ['Ingress']);
    assert.deepEqual(policy.spec.ingress, [
      { ports: [{ port: 'http', protocol: 'TCP' }] },
      { ports: [{ port: 'admin', protocol: 'TCP' }], from: [prometheus, routers] },
      {
        ports: [{ port: 'keda-scaler', protocol: 'TCP' }],
        from: [
          {
            namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'keda' } },
            podSelector: { matchLabels: { 'app.kubernetes.io/name': 'keda-operator' } },
          },
        ],
      },
    ]);
    // every named port is one the router container declares
    const names = container(router, 'router').ports.map((p: Obj) => p.name);
    for (const rule of policy.spec.ingress) for (const p of rule.ports) assert.ok(names.includes(p.port), p.port);
  });

  test('apiFrom limits the main port; without an admin port Prometheus and the replicas keep reaching /metrics and /demand there', () => {
    const ingress = { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'ingress-nginx' } } };
    const objs = objects(renderChart(CHART, { values: [{ networkPolicy: { enabled: true, apiFrom: [ingress] } }] }));
    const rules = find(objs, 'NetworkPolicy', 'llm-router').spec.ingress;
    assert.equal(rules.length, 1);
    assert.deepEqual(rules[0].from[0], ingress);
    assert.equal(rules[0].from.length, 3, 'the clients, Prometheus, the other replicas');
    const withAdmin = objects(
      renderChart(CHART, { values: [{ networkPolicy: { enabled: true, apiFrom: [ingress] }, router: { adminPort: 9091 } }] }),
    );
    assert.deepEqual(find(withAdmin, 'NetworkPolicy', 'llm-router').spec.ingress[0].from, [ingress]);
  });

  test('engines: from the router pods on the ports the router uses, from the other engines (P/D), Prometheus on the engine port', () => {
    const objs = objects(renderChart(CHART, { values: [THREE_MODELS, on] }));
    const routers = { podSelector: { matchLabels: find(objs, 'Deployment', 'llm-router').spec.selector.matchLabels } };
    const expected: Record<string, number[]> = {
      'llm-router-llama-8b': [8000],
      'llm-router-mixtral': [8000],
      'llm-router-qwen-prefill': [8000],
      // the routing sidecar the router sends to, and the engine behind it that it probes
      'llm-router-qwen-decode': [8000, 8200],
    };
    for (const [name, ports] of Object.entries(expected)) {
      const policy = find(objs, 'NetworkPolicy', name);
      const deployment = find(objs, 'Deployment', name);
      // it selects the pods of this Deployment
      for (const [k, v] of Object.entries(policy.spec.podSelector.matchLabels))
        assert.equal(deployment.spec.template.metadata.labels[k], v, `${name}: ${k}`);
      const [fromRouters, fromEngines, fromPrometheus] = policy.spec.ingress;
      const engineLabels: Record<string, string> = fromEngines.from[0].podSelector.matchLabels;
      assert.deepEqual(fromRouters.from, [routers]);
      assert.deepEqual(fromRouters.ports.map((p: Obj) => p.port).sort(), ports, name);
      assert.deepEqual(fromEngines, {
        from: [{ podSelector: { matchLabels: { 'app.kubernetes.io/instance': 'llm-router', 'app.kubernetes.io/component': 'engine' } } }],
      });
      for (const [k, v] of Object.entries(engineLabels)) assert.equal(deployment.spec.template.metadata.labels[k], v);
      assert.deepEqual(fromPrometheus.ports, [{ port: name.endsWith('decode') ? 8200 : 8000, protocol: 'TCP' }]);
    }
  });
});

describe('routing.logic kvaware: engines publish their KV-cache events, the router subscribes', { skip: requireTool('go') }, () => {
  const chart = renderChart(CHART, { values: [KVAWARE] });
  const objs = objects(chart);
  const arg = (args: string[], flag: string): string | undefined => (args.includes(flag) ? args[args.indexOf(flag) + 1] : undefined);
  const events = (port: number, replay: number): string =>
    `{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://*:${port}","replay_endpoint":"tcp://*:${replay}","topic":""}`;

  test("the router's config says kvaware (and its loader reads it, once the router knows kvaware)", () => {
    assert.equal(parseYaml(find(objs, 'ConfigMap', 'llm-router').data['config.yaml'])['routing-logic'], 'kvaware');
    const args: string[] = container(find(objs, 'Deployment', 'llm-router'), 'router').args;
    // default ports: the annotations say where; no router flag needed
    assert.ok(!args.includes('--kv-events-port') && !args.includes('--kv-events-replay-port'));
    if (ROUTER_FLAGS.find((f) => f.name === 'routing-logic')?.help.includes('kvaware'))
      assert.equal(routerConfig(objs).routingLogic, 'kvaware');
  });

  test("the router's own discovery, configured by the chart's router, subscribes to every rank's publisher and replay socket", () => {
    const kube = routerConfig(objs).kubernetes;
    assert.deepEqual(kube?.kvEvents, { port: 5557, replayPort: undefined });
    const names = ['llm-router-llama', 'llm-router-mistral-dp', 'llm-router-qwen-s', 'llm-router-qwen-prefill', 'llm-router-qwen-decode'];
    const workloads = names.map((n) => find(objs, 'Deployment', n));
    const pods = workloads.map((w, i) => ({
      metadata: { ...w.spec.template.metadata, name: `${w.metadata.name}-0`, namespace: 'default' },
      spec: w.spec.template.spec,
      status: { podIP: `10.0.0.${i + 1}`, phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }] },
    }));
    const d = desiredState(pods, workloads, { port: 8000, scheme: 'http', modelLabel: 'model', kvEvents: kube?.kvEvents });
    assert.deepEqual(d.invalid, []);
    assert.deepEqual(Object.fromEntries(d.endpoints.map((e) => [e.url, e.kvEvents])), {
      'http://10.0.0.1:8000': { eventsUrls: ['tcp://10.0.0.1:5557'], replayUrls: ['tcp://10.0.0.1:5558'] },
      'http://10.0.0.2:8000': {
        eventsUrls: ['tcp://10.0.0.2:5557', 'tcp://10.0.0.2:5558'],
        replayUrls: ['tcp://10.0.0.2:5559', 'tcp://10.0.0.2:5560'],
      },
      'http://10.0.0.3:8000': { eventsUrls: ['tcp://10.0.0.3:5557'], replayUrls: ['tcp://10.0.0.3:5558'] },
      'http://10.0.0.4:8000': { eventsUrls: ['tcp://10.0.0.4:5557'], replayUrls: ['tcp://10.0.0.4:5558'] },
      // the decode pod: its traffic goes to the routing sidecar; its events come from the engine, on the same pod IP
      'http://10.0.0.5:8000': { eventsUrls: ['tcp://10.0.0.5:5557'], replayUrls: ['tcp://10.0.0.5:5558'] },
    });
  });

  test('vLLM engines: prefix caching on, the KV-event config, the block size when set, the annotations and container ports', () => {
    const expected: Record<string, { block?: string; dp?: string; ports: [string, number][] }> = {
      'llm-router-llama': {
        block: '16',
        ports: [
          ['kv-events', 5557],
          ['kv-replay', 5558],
        ],
      },
      'llm-router-qwen-prefill': {
        ports: [
          ['kv-events', 5557],
          ['kv-replay', 5558],
        ],
      },
      'llm-router-qwen-decode': {
        ports: [
          ['kv-events', 5557],
          ['kv-replay', 5558],
        ],
      },
      // two data-parallel ranks: one publisher per rank on consecutive ports, the replay ports after them
      'llm-router-mistral-dp': {
        dp: '2',
        ports: [
          ['kv-events-0', 5557],
          ['kv-replay-0', 5559],
          ['kv-events-1', 5558],
          ['kv-replay-1', 5560],
        ],
      },
    };
    for (const [name, want] of Object.entries(expected)) {
      const d = find(objs, 'Deployment', name);
      const engine = container(d, 'engine');
      assert.ok(engine.args.includes('--enable-prefix-caching'), name);
      const replay = want.dp ? 5559 : 5558;
      assert.equal(arg(engine.args, '--kv-events-config'), events(5557, replay), name);
      assert.equal(arg(engine.args, '--block-size'), want.block, name);
      const annotations = d.spec.template.metadata.annotations;
      assert.equal(annotations['llm-router/kv-events-port'], '5557', name);
      assert.equal(annotations['llm-router/kv-events-replay-port'], String(replay), name);
      assert.equal(annotations['llm-router/kv-events-dp-size'], want.dp, name);
      assert.deepEqual(
        engine.ports.slice(1).map((p: Obj) => [p.name, p.containerPort]),
        want.ports,
        name,
      );
    }
  });

  test('SGLang engines: the same --kv-events-config, the block size as --page-size, no vLLM prefix-caching flag', () => {
    const engine = container(find(objs, 'Deployment', 'llm-router-qwen-s'), 'engine');
    assert.equal(arg(engine.args, '--kv-events-config'), events(5557, 5558));
    assert.equal(arg(engine.args, '--page-size'), '32');
    assert.ok(!engine.args.includes('--enable-prefix-caching') && !engine.args.includes('--block-size'));
  });

  test('lint finds nothing in it (it reads kvaware from the ConfigMap), and finds every engine once their KV events are gone', () => {
    assert.deepEqual(lintObjects(parseManifests(chart.manifest, 'kvaware.yaml')), []);
    const stripped = chart.manifest.replace(/\n\s+- --kv-events-config\n\s+- ".*"/g, '');
    const engines = objs.filter((o) => o.kind === 'Deployment' && o.metadata.labels['app.kubernetes.io/component'] === 'engine');
    assert.deepEqual(
      lintObjects(parseManifests(stripped, 'stripped.yaml')).map((f) => `${f.rule} ${f.object}`),
      engines.map((e) => `kvaware-no-kv-events Deployment/${e.metadata.name}`),
    );
    const uncached = chart.manifest.replaceAll('- --enable-prefix-caching', '- --no-enable-prefix-caching');
    assert.deepEqual(
      lintObjects(parseManifests(uncached, 'uncached.yaml')).map((f) => `${f.rule} ${f.object}`),
      engines
        .filter((e) => container(e, 'engine').command[0] === 'vllm')
        .map((e) => `kvaware-prefix-caching-off Deployment/${e.metadata.name}`),
    );
  });

  test('networkPolicy: the KV-event ports open to the router pods only', () => {
    const objs = objects(renderChart(CHART, { values: [KVAWARE, { networkPolicy: { enabled: true } }] }));
    const fromRouters = (name: string): number[] =>
      find(objs, 'NetworkPolicy', name)
        .spec.ingress[0].ports.map((p: Obj) => p.port)
        .sort();
    assert.deepEqual(fromRouters('llm-router-llama'), [5557, 5558, 8000]);
    assert.deepEqual(fromRouters('llm-router-mistral-dp'), [5557, 5558, 5559, 5560, 8000]);
    // every port a policy opens is one a container of the pods it selects listens on
    for (const policy of objs.filter((o) => o.kind === 'NetworkPolicy' && o.metadata.name !== 'llm-router')) {
      const d = find(objs, 'Deployment', policy.metadata.name);
      const listening = d.spec.template.spec.containers.flatMap((c: Obj) => (c.ports ?? []).map((p: Obj) => p.containerPort));
      for (const rule of policy.spec.ingress)
        for (const p of rule.ports ?? []) assert.ok(listening.includes(p.port), `${policy.metadata.name}: ${p.port}`);
    }
    const prometheus = find(objs, 'NetworkPolicy', 'llm-router-llama').spec.ingress[2];
    assert.deepEqual(prometheus.ports, [{ port: 8000, protocol: 'TCP' }]);
  });

  test('other ports: annotations, container ports and engine flags follow; the router is told for pods without annotations', () => {
    const objs = objects(renderChart(CHART, { values: [KVAWARE, { routing: { kvEvents: { port: 6000, replayPort: 7000 } } }] }));
    const d = find(objs, 'Deployment', 'llm-router-mistral-dp');
    assert.equal(arg(container(d, 'engine').args, '--kv-events-config'), events(6000, 7000));
    assert.equal(d.spec.template.metadata.annotations['llm-router/kv-events-replay-port'], '7000');
    assert.deepEqual(
      container(d, 'engine')
        .ports.slice(1)
        .map((p: Obj) => p.containerPort),
      [6000, 7000, 6001, 7001],
    );
    const args: string[] = container(find(objs, 'Deployment', 'llm-router'), 'router').args;
    assert.equal(arg(args, '--kv-events-port'), '6000');
    assert.equal(arg(args, '--kv-events-replay-port'), '7000');
    // the router's own parser takes them once the router has them (the KV-events branch adds them)
    if ((ROUTER_FLAGS as readonly { name: string }[]).some((f) => f.name === 'kv-events-port')) {
      const flags: Record<string, unknown> = parseFlags(args.slice(1), ROUTER_FLAGS, { refused: REFUSED_FLAGS }).values;
      assert.deepEqual([flags['kv-events-port'], flags['kv-events-replay-port']], [6000, 7000]);
    }
    assert.deepEqual(
      lintObjects(parseManifests(renderChart(CHART, { values: [KVAWARE, { routing: { kvEvents: { port: 6000 } } }] }).manifest, 'p.yaml')),
      [],
    );
  });

  test("tokenizers: an emptyDir Hugging Face cache the router's loader finds (HF_HUB_CACHE), auto by default, no token", () => {
    const pod = find(objs, 'Deployment', 'llm-router').spec.template.spec;
    const router = container(find(objs, 'Deployment', 'llm-router'), 'router');
    assert.deepEqual(
      pod.volumes.find((v: Obj) => v.name === 'tokenizer-cache'),
      { name: 'tokenizer-cache', emptyDir: { sizeLimit: '1Gi' } },
    );
    assert.deepEqual(
      router.volumeMounts.find((m: Obj) => m.name === 'tokenizer-cache'),
      { name: 'tokenizer-cache', mountPath: '/var/cache/huggingface/hub' },
    );
    assert.deepEqual(
      router.env.map((e: Obj) => e.name),
      ['HF_HUB_CACHE'],
    );
    const kv = routerConfig(objs).kv;
    assert.equal(kv.hub.cacheDir, '/var/cache/huggingface/hub');
    assert.equal(kv.hub.offline, false);
    assert.deepEqual(kv.tokenizer, { kind: 'auto' });
  });

  test('tokenizers: an existing claim (a sub-path, read-only), a mirror, offline, the token from a Secret; refused: read-only emptyDir', () => {
    const values = {
      routing: {
        tokenizer: {
          cache: { existingClaim: 'model-cache', subPath: 'hub', readOnly: true },
          hub: { endpoint: 'https://hf-mirror.internal', offline: true, token: { existingSecret: 'hf-token', key: 'HF_TOKEN' } },
        },
      },
      router: { env: [{ name: 'EXTRA', value: 'kept' }] },
    };
    const rendered = renderChart(CHART, { values: [KVAWARE, values] });
    const objs = objects(rendered);
    const pod = find(objs, 'Deployment', 'llm-router').spec.template.spec;
    const router = container(find(objs, 'Deployment', 'llm-router'), 'router');
    assert.deepEqual(
      pod.volumes.find((v: Obj) => v.name === 'tokenizer-cache'),
      { name: 'tokenizer-cache', persistentVolumeClaim: { claimName: 'model-cache', readOnly: true } },
    );
    assert.deepEqual(
      router.volumeMounts.find((m: Obj) => m.name === 'tokenizer-cache'),
      { name: 'tokenizer-cache', mountPath: '/var/cache/huggingface/hub', subPath: 'hub', readOnly: true },
    );
    assert.deepEqual(router.env, [
      { name: 'HF_HUB_CACHE', value: '/var/cache/huggingface/hub' },
      { name: 'HF_ENDPOINT', value: 'https://hf-mirror.internal' },
      { name: 'HF_HUB_OFFLINE', value: '1' },
      { name: 'HF_TOKEN', valueFrom: { secretKeyRef: { name: 'hf-token', key: 'HF_TOKEN' } } },
      { name: 'EXTRA', value: 'kept' },
    ]);
    const hub = routerConfig(objs).kv.hub;
    assert.deepEqual([hub.endpoint, hub.offline, hub.cacheDir], ['https://hf-mirror.internal', true, '/var/cache/huggingface/hub']);
    assert.deepEqual(lintObjects(parseManifests(rendered.manifest, 'tokenizer.yaml')), []);
    assert.throws(
      () => renderChart(CHART, { values: [KVAWARE, { routing: { tokenizer: { cache: { readOnly: true } } } }] }),
      (e: unknown) =>
        e instanceof ChartError && /routing\.tokenizer\.cache\.readOnly needs routing\.tokenizer\.cache\.existingClaim/.test(e.message),
    );
  });

  test('other routing logics render no KV events; refused: TGI, a routing logic set twice differently, overlapping ports, the engine args the chart sets', () => {
    const prefix = objects(renderChart(CHART, { values: [KVAWARE, { routing: { logic: 'prefixaware' } }] }));
    for (const d of prefix.filter((o) => o.kind === 'Deployment' && o.metadata.name !== 'llm-router')) {
      const engine = container(d, 'engine');
      assert.ok(!engine.args.some((a: string) => a.includes('kv-events') || a === '--enable-prefix-caching'), d.metadata.name);
      assert.equal(d.spec.template.metadata.annotations['llm-router/kv-events-port'], undefined);
      assert.equal(engine.ports.length, 1);
    }
    assert.equal(routerConfig(prefix).routingLogic, 'prefixaware');
    // nor a tokenizer cache: the router tokenizes nothing
    const prefixRouter = find(prefix, 'Deployment', 'llm-router');
    assert.ok(!prefixRouter.spec.template.spec.volumes.some((v: Obj) => v.name === 'tokenizer-cache'));
    assert.equal(container(prefixRouter, 'router').env, undefined);
    // the same logic in router.config is fine
    renderChart(CHART, { values: [{ router: { config: { 'routing-logic': 'session' } }, routing: { logic: 'session' } }] });
    // a values file from before routing.logic: the router's own setting, flags winning as in the router, renders the engines
    const kvaware = (router: Record<string, unknown>): boolean => {
      const objs = objects(renderChart(CHART, { values: [{ router, engines: [{ name: 'e', model: 'm' }] }] }));
      return container(find(objs, 'Deployment', 'llm-router-e'), 'engine').args.includes('--kv-events-config');
    };
    assert.equal(kvaware({ config: { 'routing-logic': 'kvaware' } }), true);
    assert.equal(kvaware({ config: { routing_logic: 'kvaware' }, extraArgs: ['--routing-logic', 'session'] }), false);
    assert.equal(kvaware({ config: { 'routing-logic': 'session' }, env: [{ name: 'LLM_ROUTER_ROUTING_LOGIC', value: 'kvaware' }] }), true);
    const cases: [Record<string, unknown>, RegExp][] = [
      [
        { engines: [{ name: 't', model: 'tiiuae/falcon-7b', engineKind: 'tgi' }] },
        /engines\[t\]: routing\.logic kvaware .* TGI does not publish/,
      ],
      [{ router: { config: { routingLogic: 'roundrobin' } } }, /router\.config\.routingLogic is roundrobin but routing\.logic is kvaware/],
      [
        { router: { extraArgs: ['--routing-logic=session'] } },
        /router\.extraArgs --routing-logic is session but routing\.logic is kvaware/,
      ],
      [{ router: { env: [{ name: 'LLM_ROUTER_ROUTING_LOGIC', value: 'session' }] } }, /router\.env LLM_ROUTER_ROUTING_LOGIC is session/],
      [{ routing: { logic: 'kv-aware' } }, /routing\.logic must be one of roundrobin, least-load, session, prefixaware, kvaware/],
      [
        { routing: { kvEvents: { replayPort: 5558 } } },
        /publisher ports 5557-5558 and the replay ports 5558-5559 overlap .* set replayPort to 5559/,
      ],
      [{ routing: { kvEvents: { port: 8000 } } }, /port 8000 is both a KV-event port/],
      [
        { engines: [{ name: 'x', model: 'm', args: ['--no-enable-prefix-caching'] }] },
        /engines\[x\]: --no-enable-prefix-caching in the engine's args/,
      ],
      [{ engines: [{ name: 'x', model: 'm', args: ['--kv-events-config={}'] }] }, /engines\[x\]: --kv-events-config in the engine's args/],
    ];
    for (const [values, message] of cases)
      assert.throws(
        () => renderChart(CHART, { values: [KVAWARE, values] }),
        (e: unknown) => e instanceof ChartError && message.test(e.message),
        String(message),
      );
  });
});

describe('otel: the router traces to the collector, and the vllm engines continue its traces', { skip: requireTool('go') }, () => {
  const arg = (args: string[], flag: string): string | undefined => (args.includes(flag) ? args[args.indexOf(flag) + 1] : undefined);
  const envOf = (c: Obj): Record<string, string> => Object.fromEntries((c.env ?? []).map((e: Obj) => [e.name, e.value]));

  test('off by default: no --otel-* flag, no engine tracing', () => {
    const objs = objects(renderChart(CHART, { values: [THREE_MODELS] }));
    for (const d of objs.filter((o) => o.kind === 'Deployment')) {
      for (const c of d.spec.template.spec.containers) {
        assert.ok(!(c.args ?? []).some((a: string) => a.startsWith('--otel') || a.startsWith('--otlp')), `${d.metadata.name}/${c.name}`);
        assert.equal(envOf(c).OTEL_SERVICE_NAME, undefined);
      }
    }
  });

  test('otel.*: the router takes the flags (its own parser, the service name and TLS), every vllm engine gets the endpoint and its own service name', () => {
    const values = { otel: { endpoint: 'otel-collector.monitoring:4317', serviceName: 'llm-router-prod', secure: true } };
    const objs = objects(renderChart(CHART, { values: [THREE_MODELS, values] }));
    const args: string[] = container(find(objs, 'Deployment', 'llm-router'), 'router').args;
    const flags: Record<string, unknown> = parseFlags(args.slice(1), ROUTER_FLAGS, { refused: REFUSED_FLAGS }).values;
    assert.deepEqual(
      [flags['otel-endpoint'], flags['otel-service-name'], flags['otel-secure']],
      ['otel-collector.monitoring:4317', 'llm-router-prod', true],
    );
    const engines = objs.filter((o) => o.kind === 'Deployment' && o.metadata.name !== 'llm-router');
    assert.ok(engines.length >= 3);
    for (const d of engines) {
      const engine = container(d, 'engine');
      assert.equal(arg(engine.args, '--otlp-traces-endpoint'), 'otel-collector.monitoring:4317', d.metadata.name);
      const env = envOf(engine);
      assert.equal(env.OTEL_SERVICE_NAME, d.metadata.name);
      // TLS asked for: nothing says insecure
      assert.equal(env.OTEL_EXPORTER_OTLP_TRACES_INSECURE, undefined);
    }
    // plain gRPC: the engines are told it is insecure, as the router's HOST:PORT is without --otel-secure
    const plain = objects(renderChart(CHART, { values: [THREE_MODELS, { otel: { endpoint: 'c:4317' } }] }));
    const engine = container(find(plain, 'Deployment', 'llm-router-llama-8b'), 'engine');
    assert.equal(envOf(engine).OTEL_EXPORTER_OTLP_TRACES_INSECURE, 'true');
    assert.equal(routerConfig(plain).tracing?.endpoint !== undefined, true);
    // OTLP/HTTP: the engines use its protocol too; engines: false leaves them alone
    const http = objects(renderChart(CHART, { values: [THREE_MODELS, { otel: { endpoint: 'http://c:4318/v1/traces', engines: false } }] }));
    const quiet = container(find(http, 'Deployment', 'llm-router-llama-8b'), 'engine');
    assert.equal(arg(quiet.args, '--otlp-traces-endpoint'), undefined);
    const httpEngines = objects(renderChart(CHART, { values: [THREE_MODELS, { otel: { endpoint: 'http://c:4318/v1/traces' } }] }));
    assert.equal(
      envOf(container(find(httpEngines, 'Deployment', 'llm-router-llama-8b'), 'engine')).OTEL_EXPORTER_OTLP_TRACES_PROTOCOL,
      'http/protobuf',
    );
  });

  test('otel.secure with an http:// URL is refused with a clear message', () => {
    assert.throws(
      () => renderChart(CHART, { values: [THREE_MODELS, { otel: { endpoint: 'http://c:4318/v1/traces', secure: true } }] }),
      (e: unknown) =>
        e instanceof ChartError &&
        /otel\.secure is TLS, but otel\.endpoint http:\/\/c:4318\/v1\/traces is an http:\/\/ URL/.test(e.message),
    );
  });
});
