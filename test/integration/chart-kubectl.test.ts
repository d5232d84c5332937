// The real kubectl accepts every object the chart renders (defaults, three models, LoRA adapters, the plain manifests):
// `kubectl create --dry-run=client -f`. kubectl maps kinds to resources through API discovery, so a discovery-only
// API server on 127.0.0.1 serves the groups the chart uses (the fake API server in test/support knows only the
// kinds the router watches). OpenAPI schemas cannot be served offline, hence --validate=false.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import http from 'node:http';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { parseAllDocuments } from 'yaml';
import { CHART_DIR, renderChart } from '../../tools/chart-render/render.js';
import { requireTool } from '../support/tools.js';

const run = promisify(execFile);
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/** group/version -> [kind, plural, namespaced] */
const RESOURCES: Record<string, [string, string, boolean][]> = {
  v1: [
    ['Namespace', 'namespaces', false],
    ['ConfigMap', 'configmaps', true],
    ['Service', 'services', true],
    ['ServiceAccount', 'serviceaccounts', true],
    ['Pod', 'pods', true],
    ['PersistentVolumeClaim', 'persistentvolumeclaims', true],
  ],
  'apps/v1': [
    ['Deployment', 'deployments', true],
    ['StatefulSet', 'statefulsets', true],
  ],
  'policy/v1': [['PodDisruptionBudget', 'poddisruptionbudgets', true]],
  'networking.k8s.io/v1': [['NetworkPolicy', 'networkpolicies', true]],
  'rbac.authorization.k8s.io/v1': [
    ['Role', 'roles', true],
    ['RoleBinding', 'rolebindings', true],
    ['ClusterRole', 'clusterroles', false],
    ['ClusterRoleBinding', 'clusterrolebindings', false],
  ],
  'monitoring.coreos.com/v1': [['ServiceMonitor', 'servicemonitors', true]],
  'keda.sh/v1alpha1': [['ScaledObject', 'scaledobjects', true]],
  'leaderworkerset.x-k8s.io/v1': [['LeaderWorkerSet', 'leaderworkersets', true]],
};

function discovery(pathname: string): unknown {
  if (pathname === '/version') return { major: '1', minor: '32', gitVersion: 'v1.32.0' };
  if (pathname === '/api') return { kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [] };
  if (pathname === '/apis') {
    const groups = Object.keys(RESOURCES).filter((gv) => gv.includes('/'));
    return {
      kind: 'APIGroupList',
      apiVersion: 'v1',
      groups: groups.map((gv) => {
        const [group, version] = gv.split('/') as [string, string];
        return { name: group, versions: [{ groupVersion: gv, version }], preferredVersion: { groupVersion: gv, version } };
      }),
    };
  }
  const gv = pathname.startsWith('/api/') ? pathname.slice(5) : pathname.slice(6);
  const list = RESOURCES[gv];
  if (!list) return undefined;
  return {
    kind: 'APIResourceList',
    apiVersion: 'v1',
    groupVersion: gv,
    resources: list.map(([kind, plural, namespaced]) => ({
      name: plural,
      singularName: kind.toLowerCase(),
      namespaced,
      kind,
      verbs: ['create', 'get', 'list', 'watch', 'delete', 'patch', 'update'],
    })),
  };
}

describe('kubectl create --dry-run=client accepts the rendered chart', { timeout: 90_000, skip: requireTool('go', 'kubectl') }, () => {
  let server: http.Server;
  let url: string;
  let dir: string;
  const requests: string[] = [];

  before(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'chart-kubectl-'));
    server = http.createServer((req, res) => {
      const pathname = (req.url ?? '/').split('?')[0] as string;
      requests.push(`${req.method} ${pathname}`);
      const body = req.method === 'GET' ? discovery(pathname) : undefined;
      res.writeHead(body ? 200 : 404, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body ?? { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'NotFound', code: 404 }));
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    await writeFile(
      path.join(dir, 'kubeconfig'),
      [
        'apiVersion: v1',
        'kind: Config',
        'current-context: test',
        'clusters: [{name: test, cluster: {server: "' + url + '", insecure-skip-tls-verify: true}}]',
        'users: [{name: test, user: {token: test}}]',
        'contexts: [{name: test, context: {cluster: test, user: test, namespace: default}}]',
        '',
      ].join('\n'),
    );
  });
  after(async () => {
    server.closeAllConnections();
    server.close();
    await rm(dir, { recursive: true, force: true });
  });

  async function kubectlCreate(file: string, output: 'name' | 'json' | 'yaml'): Promise<string> {
    const { stdout } = await run(
      'kubectl',
      [
        '--kubeconfig',
        path.join(dir, 'kubeconfig'),
        '--cache-dir',
        path.join(dir, 'cache'),
        'create',
        '--dry-run=client',
        '--validate=false',
        '-o',
        output,
        '-f',
        file,
      ],
      {
        timeout: 30_000,
        env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir },
      },
    );
    return stdout;
  }

  async function dryRun(file: string): Promise<string[]> {
    return (await kubectlCreate(file, 'name')).trim().split('\n').sort();
  }

  /** Writes what the chart renders with `values` (only the templates `showOnly` names, when given) for kubectl. */
  async function rendered(name: string, values: string[], showOnly?: string[]): Promise<string> {
    const file = path.join(dir, name);
    await writeFile(file, renderChart(CHART_DIR, { values, ...(showOnly ? { showOnly } : {}) }).manifest);
    return file;
  }

  test('default values', async () => {
    assert.deepEqual(await dryRun(await rendered('default.yaml', [])), [
      'configmap/llm-router',
      'deployment.apps/llm-router',
      'poddisruptionbudget.policy/llm-router',
      'role.rbac.authorization.k8s.io/llm-router-discovery',
      'rolebinding.rbac.authorization.k8s.io/llm-router-discovery',
      'service/llm-router',
      'serviceaccount/llm-router',
    ]);
    assert.ok(
      requests.some((r) => r === 'GET /apis'),
      'kubectl used discovery',
    );
    assert.ok(
      requests.every((r) => r.startsWith('GET ')),
      'a client dry run changes nothing',
    );
  });

  test('three models: engines, the P/D pair, a ScaledObject, a ServiceMonitor and the Grafana dashboard', async () => {
    const names = await dryRun(await rendered('three.yaml', [path.join(ROOT, 'test', 'fixtures', 'chart', 'three-models.yaml')]));
    for (const n of [
      'deployment.apps/llm-router-llama-8b',
      'deployment.apps/llm-router-mixtral',
      'deployment.apps/llm-router-qwen-prefill',
      'deployment.apps/llm-router-qwen-decode',
      'scaledobject.keda.sh/llm-router-mixtral',
      'servicemonitor.monitoring.coreos.com/llm-router',
      'configmap/llm-router-grafana-dashboard',
    ]) {
      assert.ok(names.includes(n), `${n} in ${names.join(', ')}`);
    }
    assert.equal(names.length, 14);
  });

  test('LoRA adapters: kubectl reads the annotation, the flags and VLLM_ALLOW_RUNTIME_LORA_UPDATING as strings', async () => {
    const file = await rendered('lora.yaml', [path.join(ROOT, 'test', 'fixtures', 'chart', 'lora.yaml')], ['templates/engines.yaml']);
    // one object per document; read as the API server reads YAML (1.1)
    const engines = parseAllDocuments(await kubectlCreate(file, 'yaml'), { version: '1.1' }).map(
      (d) =>
        d.toJS() as {
          metadata: { name: string; annotations: Record<string, string> };
          spec: { template: { spec: { containers: { name: string; args?: string[]; env?: { name: string; value?: unknown }[] }[] } } };
        },
    );
    assert.deepEqual(
      engines.map((o) => `${o.metadata.name} ${o.metadata.annotations['llm-router/lora-adapters']}`),
      [
        'llm-router-llama-8b chat-lora=hf-org/chat-lora,sql-lora=/models/adapters/sql',
        'llm-router-qwen-prefill qwen-support=hf-org/qwen3-support-lora',
        'llm-router-qwen-decode qwen-support=hf-org/qwen3-support-lora',
      ],
    );
    for (const o of engines) {
      const engine = o.spec.template.spec.containers.find((c) => c.name === 'engine');
      assert.ok(engine?.args?.includes('--enable-lora'), o.metadata.name);
      assert.equal(engine?.args?.[engine.args.indexOf('--max-loras') + 1], o.metadata.name.endsWith('llama-8b') ? '4' : '1');
      assert.equal(engine?.env?.find((e) => e.name === 'VLLM_ALLOW_RUNTIME_LORA_UPDATING')?.value, 'true');
    }
  });

  test('admin port, API keys Secret, workers, NetworkPolicies and kvaware engines: every object, as kubectl reads it', async () => {
    const values = path.join(dir, 'robust-values.json');
    await writeFile(
      values,
      JSON.stringify({
        router: { adminPort: 9091, workers: 2, apiKeys: { existingSecret: 'router-keys' } },
        networkPolicy: { enabled: true },
        serviceMonitor: { enabled: true },
        keda: { enabled: true, flavour: 'external-push' },
      }),
    );
    const file = await rendered('robust.yaml', [path.join(ROOT, 'test', 'fixtures', 'chart', 'kvaware.yaml'), values]);
    const names = await dryRun(file);
    for (const n of [
      'networkpolicy.networking.k8s.io/llm-router',
      'networkpolicy.networking.k8s.io/llm-router-mistral-dp',
      'networkpolicy.networking.k8s.io/llm-router-qwen-decode',
      'service/llm-router-admin',
      'servicemonitor.monitoring.coreos.com/llm-router',
    ])
      assert.ok(names.includes(n), `${n} in ${names.join(', ')}`);
    type Obj = {
      kind: string;
      metadata: { name: string };
      spec: {
        ingress?: { ports?: { port: unknown }[] }[];
        template?: {
          metadata: { annotations?: Record<string, unknown> };
          spec: { volumes?: { name: string; secret?: { defaultMode?: unknown } }[]; containers: { name: string; args?: unknown[] }[] };
        };
      };
    };
    const objs = parseAllDocuments(await kubectlCreate(file, 'yaml'), { version: '1.1' }).map((d) => d.toJS() as Obj);
    const get = (kind: string, name: string): Obj => {
      const o = objs.find((x) => x.kind === kind && x.metadata.name === name);
      assert.ok(o, `${kind}/${name}`);
      return o;
    };
    // the Secret's mode is 0444 as kubectl reads it; annotations, the JSON argument and numeric ports keep their types
    const router = get('Deployment', 'llm-router');
    assert.equal(router.spec.template?.spec.volumes?.find((v) => v.name === 'api-keys')?.secret?.defaultMode, 0o444);
    assert.equal(router.spec.template?.metadata.annotations?.['llm-router/admin-port'], '9091');
    const dp = get('Deployment', 'llm-router-mistral-dp');
    assert.equal(dp.spec.template?.metadata.annotations?.['llm-router/kv-events-dp-size'], '2');
    const args = dp.spec.template?.spec.containers.find((c) => c.name === 'engine')?.args ?? [];
    assert.equal(typeof args[args.indexOf('--kv-events-config') + 1], 'string');
    assert.deepEqual(
      get('NetworkPolicy', 'llm-router-mistral-dp').spec.ingress?.[0]?.ports?.map((p) => p.port),
      [8000, 5557, 5559, 5558, 5560],
    );
  });

  test('env values that YAML 1.1 reads as booleans reach kubectl as strings', async () => {
    // kubectl reads YAML as the API server does (YAML 1.1: a bare yes is true) and prints the object it would send
    const file = await rendered('env.yaml', [path.join(ROOT, 'test', 'fixtures', 'chart', 'env-strings.yaml')], ['templates/router.yaml']);
    const router = JSON.parse(await kubectlCreate(file, 'json')) as {
      spec: { template: { spec: { containers: { name: string; env?: { name: string; value?: unknown }[] }[] } } };
    };
    const env = router.spec.template.spec.containers.find((c) => c.name === 'router')?.env ?? [];
    assert.deepEqual(Object.fromEntries(env.map((e) => [e.name, e.value])), { FEATURE_FLAG: 'yes', VERBOSE: 'on', PORT_NAME: '8000' });
  });

  test('a kind the API does not serve is refused, so the check is real', async () => {
    const file = path.join(dir, 'typo.yaml');
    await writeFile(file, 'apiVersion: apps/v1\nkind: Deploymnet\nmetadata: {name: x}\n');
    await assert.rejects(dryRun(file), /no matches for kind "Deploymnet"/);
  });

  test('the plain manifests in deploy/manifests/', async () => {
    assert.equal((await dryRun(path.join(ROOT, 'deploy', 'manifests', 'llm-router.yaml'))).length, 7);
    assert.deepEqual(await dryRun(path.join(ROOT, 'deploy', 'manifests', 'rbac.yaml')), [
      'role.rbac.authorization.k8s.io/llm-router-discovery',
      'rolebinding.rbac.authorization.k8s.io/llm-router-discovery',
      'serviceaccount/llm-router',
    ]);
  });
});
