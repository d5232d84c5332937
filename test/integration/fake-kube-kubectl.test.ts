// The real kubectl drives the fake API server; its changes are visible through the programmatic API.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { startFakeKube, type FakeKube } from '../support/fake-kube/index.js';
import { requireTool } from '../support/tools.js';

const run = promisify(execFile);

const deployment = (image: string, replicas: number): string => `apiVersion: apps/v1
kind: Deployment
metadata:
  name: x
  labels: {app: x}
spec:
  replicas: ${replicas}
  selector: {matchLabels: {app: x}}
  template:
    metadata: {labels: {app: x}}
    spec:
      containers:
      - name: engine
        image: ${image}
        ports: [{containerPort: 8000}]
`;

const podYaml = (name: string, app: string): string => `apiVersion: v1
kind: Pod
metadata:
  name: ${name}
  labels: {app: ${app}}
spec:
  containers:
  - name: engine
    image: vllm/vllm-openai
`;

const leaderWorkerSet = `apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {name: big, labels: {app: big}}
spec:
  replicas: 1
  leaderWorkerTemplate:
    size: 2
    workerTemplate:
      spec:
        containers: [{name: worker, image: sglang}]
`;

describe('kubectl against fake-kube', { timeout: 25_000, skip: requireTool('kubectl') }, () => {
  let kube: FakeKube;
  let dir: string;

  /** Runs the real kubectl with the fake's kubeconfig and a private discovery cache. */
  async function kubectl(...args: string[]): Promise<string> {
    const { stdout } = await run('kubectl', ['--kubeconfig', kube.kubeconfigPath, '--cache-dir', path.join(dir, 'cache'), ...args], {
      timeout: 15_000,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir },
    });
    return stdout;
  }

  async function file(name: string, text: string): Promise<string> {
    const p = path.join(dir, name);
    await writeFile(p, text);
    return p;
  }

  before(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'fake-kube-kubectl-'));
    kube = await startFakeKube();
  });
  after(async () => {
    await kube.close();
    await rm(dir, { recursive: true, force: true });
  });

  test('create -f a Deployment and Pods, then list them by label', async () => {
    assert.match(
      await kubectl('create', '--validate=false', '-f', await file('dep.yaml', deployment('vllm:1', 2))),
      /deployment.apps\/x created/,
    );
    assert.match(await kubectl('create', '--validate=false', '-f', await file('pod1.yaml', podYaml('x-1', 'x'))), /pod\/x-1 created/);
    await kubectl('create', '--validate=false', '-f', await file('pod2.yaml', podYaml('y-1', 'other')));

    const dep = kube.get('deployments', 'default', 'x');
    assert.equal(dep?.spec?.replicas, 2);
    assert.equal(dep?.metadata.generation, 1);
    assert.equal(kube.list('pods', 'default').length, 2);
    assert.ok((kube.requests['get discovery'] ?? 0) > 0, 'kubectl fell back to the legacy discovery documents');

    const listed = JSON.parse(await kubectl('get', 'pods', '-l', 'app=x', '-o', 'json')) as {
      items: Array<{ metadata: { name: string } }>;
    };
    assert.deepEqual(
      listed.items.map((p) => p.metadata.name),
      ['x-1'],
    );
    assert.equal((await kubectl('get', 'pods', '-l', 'app notin (x)', '-o', 'name')).trim(), 'pod/y-1');
    assert.match(await kubectl('get', 'pods'), /^NAME\s+STATUS\s+AGE\nx-1\s+Pending/);
  });

  test('programmatic changes are what kubectl reads', async () => {
    kube.setPodReady('default', 'x-1', true);
    kube.setPodIP('default', 'x-1', '10.1.2.3');
    assert.equal(
      await kubectl('get', 'pod', 'x-1', '-o', 'jsonpath={.status.phase} {.status.podIP} {.status.conditions[?(@.type=="Ready")].status}'),
      'Running 10.1.2.3 True',
    );
  });

  test('scale deployment to zero goes through the scale subresource', async () => {
    assert.match(await kubectl('scale', 'deployment', 'x', '--replicas=0'), /deployment.apps\/x scaled/);
    const dep = kube.get('deployments', 'default', 'x');
    assert.equal(dep?.spec?.replicas, 0);
    assert.equal(dep?.metadata.generation, 2);
    assert.equal(kube.requests['patch deployments/scale'], 1);
  });

  test('delete pod removes it (kubectl waits for the deletion with a get); a server dry run does not', async () => {
    assert.match(await kubectl('delete', 'pod', 'y-1', '--dry-run=server'), /deleted \(server dry run\)/);
    assert.ok(kube.get('pods', 'default', 'y-1'));
    assert.match(await kubectl('delete', 'pod', 'y-1'), /pod "y-1" deleted/);
    assert.equal(kube.get('pods', 'default', 'y-1'), undefined);
  });

  test('apply -f updates an existing object and creates a new one; a repeated apply changes nothing', async () => {
    const dep = await file('dep2.yaml', deployment('vllm:2', 3));
    assert.match(await kubectl('apply', '--validate=false', '-f', dep), /deployment.apps\/x configured/);
    const applied = kube.get('deployments', 'default', 'x');
    assert.equal(applied?.spec?.replicas, 3);
    const containers = applied?.spec?.template.spec.containers as unknown[];
    assert.deepEqual(containers, [{ name: 'engine', image: 'vllm:2', ports: [{ containerPort: 8000 }] }]);
    assert.ok(applied?.metadata.annotations?.['kubectl.kubernetes.io/last-applied-configuration']);

    const rv = kube.get('deployments', 'default', 'x')?.metadata.resourceVersion;
    await kubectl('apply', '--validate=false', '-f', dep);
    assert.equal(kube.get('deployments', 'default', 'x')?.metadata.resourceVersion, rv, 'a no-op apply writes nothing');

    assert.match(
      await kubectl('apply', '--validate=false', '-f', await file('lws.yaml', leaderWorkerSet)),
      /leaderworkerset.x-k8s.io\/big created/,
    );
    await kubectl('apply', '--validate=false', '-f', await file('lws2.yaml', leaderWorkerSet.replace('replicas: 1', 'replicas: 2')));
    assert.equal(kube.get('LeaderWorkerSet', 'default', 'big')?.spec?.replicas, 2);
    assert.equal(kube.requests['patch leaderworkersets'], 1);
  });

  test('kubectl sees a terminating pod and an RBAC denial the way a cluster shows them', async () => {
    const graceful = await startFakeKube({ gracefulPodDeletion: true });
    const saved = kube;
    kube = graceful;
    try {
      await kubectl('create', '--validate=false', '-f', await file('pod3.yaml', podYaml('t-1', 'x')));
      await kubectl('delete', 'pod', 't-1', '--wait=false');
      assert.match(await kubectl('get', 'pods'), /t-1\s+Terminating/);
      graceful.finalizePodDeletion('default', 't-1');
      assert.equal((await kubectl('get', 'pods', '-o', 'name')).trim(), '');

      graceful.setForbidden('pods', true);
      await assert.rejects(kubectl('get', 'pods'), (err: { stderr: string }) => {
        assert.match(err.stderr, /pods is forbidden: User "system:serviceaccount:default:llm-router" cannot list resource "pods"/);
        return true;
      });
    } finally {
      kube = saved;
      await graceful.close();
    }
  });
});
