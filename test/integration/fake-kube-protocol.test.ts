// The fake API server's wire protocol: what informers and kubectl rely on, checked with a bare HTTP client.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'undici';
import { startFakeKube, type FakeKube } from '../support/fake-kube/index.js';
import { labelledPod as pod } from '../support/kube-objects.js';
import { parseLabelSelector, labelSelector } from '../support/fake-kube/selectors.js';
import { rawWatch } from '../support/fake-kube/raw-watch.js';

async function call(kube: FakeKube, method: string, path: string, body?: unknown, contentType = 'application/json') {
  const res = await request(`${kube.url}${path}`, {
    method: method as 'GET',
    headers: body === undefined ? {} : { 'content-type': contentType },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    headersTimeout: 5000,
    bodyTimeout: 5000,
  });
  return { status: res.statusCode, contentType: res.headers['content-type'], body: (await res.body.json()) as any };
}

describe('fake-kube protocol', { timeout: 20_000 }, () => {
  let kube: FakeKube;
  before(async () => {
    kube = await startFakeKube();
  });
  after(async () => {
    await kube.close();
  });

  test('label selectors follow the API server grammar', () => {
    const labels = { app: 'x', tier: 'gpu' };
    const cases: Array<[string, boolean]> = [
      ['app=x', true],
      ['app==x', true],
      ['app!=x', false],
      ['app', true],
      ['!app', false],
      ['!zone', true],
      ['app in (x,y)', true],
      ['app notin (x, y)', false],
      ['tier notin (cpu)', true],
      ['app=x,tier=cpu', false],
      ['app=x,tier in (gpu)', true],
      ['zone!=a', true],
      ['', true],
    ];
    for (const [selector, expected] of cases) assert.equal(labelSelector(selector)(labels), expected, selector);
    assert.throws(() => parseLabelSelector('app in x'));
    assert.throws(() => parseLabelSelector('=x'));
  });

  test('list returns a resourceVersion and filters by label and field selectors', async () => {
    kube.create(pod('p1'));
    kube.create(pod('p2', { app: 'y' }));
    const all = await call(kube, 'GET', '/api/v1/namespaces/default/pods');
    assert.equal(all.status, 200);
    assert.equal(all.contentType, 'application/json');
    assert.equal(all.body.kind, 'PodList');
    assert.equal(all.body.metadata.resourceVersion, kube.resourceVersion());
    assert.deepEqual(
      all.body.items.map((p: any) => p.metadata.name),
      ['p1', 'p2'],
    );
    const x = await call(kube, 'GET', `/api/v1/namespaces/default/pods?labelSelector=${encodeURIComponent('app in (x)')}`);
    assert.deepEqual(
      x.body.items.map((p: any) => p.metadata.name),
      ['p1'],
    );
    const byName = await call(kube, 'GET', '/api/v1/namespaces/default/pods?fieldSelector=metadata.name%3Dp2');
    assert.deepEqual(
      byName.body.items.map((p: any) => p.metadata.name),
      ['p2'],
    );
    const bad = await call(kube, 'GET', `/api/v1/namespaces/default/pods?labelSelector=${encodeURIComponent('app in')}`);
    assert.equal(bad.status, 400);
    kube.remove('pods', 'default', 'p1');
    kube.remove('pods', 'default', 'p2');
  });

  test('errors are Status objects like the real API server', async () => {
    const missing = await call(kube, 'GET', '/api/v1/namespaces/default/pods/nope');
    assert.equal(missing.status, 404);
    assert.deepEqual(missing.body, {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: 'pods "nope" not found',
      reason: 'NotFound',
      details: { name: 'nope', kind: 'pods' },
      code: 404,
    });
    const created = await call(kube, 'POST', '/apis/apps/v1/namespaces/default/deployments', {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'd' },
      spec: {},
    });
    assert.equal(created.status, 201);
    assert.equal(created.body.metadata.generation, 1);
    assert.equal(created.body.spec.replicas, 1);
    assert.match(created.body.metadata.uid, /^[0-9a-f-]{36}$/);
    const again = await call(kube, 'POST', '/apis/apps/v1/namespaces/default/deployments', {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'd' },
    });
    assert.equal(again.status, 409);
    assert.equal(again.body.reason, 'AlreadyExists');
    kube.setForbidden('deployments', true);
    const denied = await call(kube, 'GET', '/apis/apps/v1/namespaces/default/deployments');
    assert.equal(denied.status, 403);
    assert.equal(denied.body.reason, 'Forbidden');
    assert.match(denied.body.message, /cannot list resource "deployments" in API group "apps" in the namespace "default"/);
    kube.setForbidden('deployments', false);
    const mismatch = await call(kube, 'POST', '/api/v1/namespaces/kube-system/pods', pod('p'));
    assert.equal(mismatch.status, 400, 'body namespace must match the URL');
    const noNamespace = await call(kube, 'POST', '/api/v1/namespaces/elsewhere/pods', { ...pod('p'), metadata: { name: 'p' } });
    assert.equal(noNamespace.status, 404);
    assert.equal(noNamespace.body.message, 'namespaces "elsewhere" not found');
    kube.remove('deployments', 'default', 'd');
  });

  test('patch: merge, strategic (merge keys) and JSON patch; status kept apart from spec', async () => {
    kube.create({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'm', labels: { app: 'm' } },
      spec: {
        replicas: 1,
        template: {
          spec: {
            containers: [
              { name: 'a', image: 'a:1', ports: [{ containerPort: 80 }] },
              { name: 'b', image: 'b:1' },
            ],
          },
        },
      },
    });
    const path = '/apis/apps/v1/namespaces/default/deployments/m';
    const merged = await call(
      kube,
      'PATCH',
      path,
      { metadata: { labels: { tier: 'gpu' } }, status: { replicas: 9 } },
      'application/merge-patch+json',
    );
    assert.deepEqual(merged.body.metadata.labels, { app: 'm', tier: 'gpu' });
    assert.equal(merged.body.metadata.generation, 1, 'labels do not bump generation');
    assert.deepEqual(merged.body.status, {}, 'status is not written through the main resource');
    const strategic = await call(
      kube,
      'PATCH',
      path,
      {
        spec: {
          template: { spec: { '$setElementOrder/containers': [{ name: 'a' }, { name: 'b' }], containers: [{ name: 'a', image: 'a:2' }] } },
        },
      },
      'application/strategic-merge-patch+json',
    );
    assert.deepEqual(strategic.body.spec.template.spec.containers, [
      { name: 'a', image: 'a:2', ports: [{ containerPort: 80 }] },
      { name: 'b', image: 'b:1' },
    ]);
    assert.equal(strategic.body.metadata.generation, 2);
    const jsonPatched = await call(
      kube,
      'PATCH',
      path,
      [
        { op: 'replace', path: '/spec/replicas', value: 3 },
        { op: 'remove', path: '/metadata/labels/tier' },
      ],
      'application/json-patch+json',
    );
    assert.equal(jsonPatched.body.spec.replicas, 3);
    assert.deepEqual(jsonPatched.body.metadata.labels, { app: 'm' });
    const status = await call(kube, 'PATCH', `${path}/status`, { status: { readyReplicas: 2 } }, 'application/merge-patch+json');
    assert.equal(status.body.status.readyReplicas, 2);
    const scale = await call(kube, 'PATCH', `${path}/scale`, { spec: { replicas: 0 } }, 'application/merge-patch+json');
    assert.equal(scale.body.kind, 'Scale');
    assert.equal(kube.get('deployments', 'default', 'm')?.spec?.replicas, 0);
    const lwsStrategic = await call(
      kube,
      'PATCH',
      '/apis/leaderworkerset.x-k8s.io/v1/namespaces/default/leaderworkersets/none',
      {},
      'application/strategic-merge-patch+json',
    );
    assert.equal(lwsStrategic.status, 404);
    kube.create({ apiVersion: 'leaderworkerset.x-k8s.io/v1', kind: 'LeaderWorkerSet', metadata: { name: 'l' }, spec: {} });
    const unsupported = await call(
      kube,
      'PATCH',
      '/apis/leaderworkerset.x-k8s.io/v1/namespaces/default/leaderworkersets/l',
      {},
      'application/strategic-merge-patch+json',
    );
    assert.equal(unsupported.status, 415, 'custom resources refuse strategic merge patch, as on a real cluster');
    kube.remove('deployments', 'default', 'm');
    kube.remove('lws', 'default', 'l');
  });

  test('watch flushes headers before the first event and streams newline-delimited JSON', async () => {
    const from = kube.resourceVersion();
    const w = await rawWatch(`${kube.url}/api/v1/namespaces/default/pods?watch=1&resourceVersion=${from}`);
    try {
      assert.equal(w.status, 200);
      assert.equal(w.headers['transfer-encoding'], 'chunked');
      assert.equal(w.headers['content-type'], 'application/json');
      assert.equal(w.events.length, 0);
      assert.equal(kube.openWatches('pods'), 1);
      kube.create(pod('w1'));
      kube.setPodReady('default', 'w1', true);
      kube.remove('pods', 'default', 'w1');
      const events = await w.waitForEvents(3);
      assert.deepEqual(
        events.map((e) => e.type),
        ['ADDED', 'MODIFIED', 'DELETED'],
      );
      assert.equal(events[0]!.object.kind, 'Pod');
      assert.ok(Number(events[2]!.object.metadata?.resourceVersion) > Number(events[1]!.object.metadata?.resourceVersion));
    } finally {
      w.close();
    }
  });

  test('watch replays from a resourceVersion, and answers 410 Expired once history is compacted', async () => {
    const from = kube.resourceVersion();
    kube.create(pod('r1'));
    kube.remove('pods', 'default', 'r1');
    const replay = await rawWatch(`${kube.url}/api/v1/namespaces/default/pods?watch=true&resourceVersion=${from}`);
    assert.deepEqual(
      (await replay.waitForEvents(2)).map((e) => `${e.type} ${e.object.metadata?.name}`),
      ['ADDED r1', 'DELETED r1'],
    );
    replay.close();

    kube.compactHistory();
    const expired = await rawWatch(`${kube.url}/api/v1/namespaces/default/pods?watch=true&resourceVersion=${from}`);
    assert.equal(expired.status, 200);
    await expired.ended;
    assert.equal(expired.events.length, 1);
    assert.equal(expired.events[0]!.type, 'ERROR');
    assert.deepEqual(
      { ...expired.events[0]!.object, message: undefined },
      { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: undefined, reason: 'Expired', code: 410 },
    );
    const current = await rawWatch(`${kube.url}/api/v1/namespaces/default/pods?watch=true&resourceVersion=${kube.resourceVersion()}`);
    assert.equal(kube.openWatches('pods'), 1, 'a watch from the current resourceVersion is still fine');
    current.close();

    kube.failWatchesWith410(1, 'http');
    const gone = await call(kube, 'GET', '/api/v1/namespaces/default/pods?watch=1');
    assert.equal(gone.status, 410);
    assert.equal(gone.body.code, 410);
  });

  test('a watcher with a label selector sees an object that stops matching as DELETED', async () => {
    const w = await rawWatch(
      `${kube.url}/api/v1/namespaces/default/pods?watch=1&labelSelector=app%3Dx&resourceVersion=${kube.resourceVersion()}`,
    );
    try {
      kube.create(pod('s1', { app: 'other' }));
      kube.patch('pods', 'default', 's1', { metadata: { labels: { app: 'x' } } });
      kube.patch('pods', 'default', 's1', { metadata: { labels: { app: 'x', ready: 'y' } } });
      kube.patch('pods', 'default', 's1', { metadata: { labels: { app: 'gone' } } });
      kube.remove('pods', 'default', 's1');
      const events = await w.waitForEvents(3);
      await new Promise((r) => setTimeout(r, 50)); // a bounded wait on purpose: no fourth event may follow
      assert.deepEqual(
        events.map((e) => e.type),
        ['ADDED', 'MODIFIED', 'DELETED'],
      );
    } finally {
      w.close();
    }
  });

  test('without a resourceVersion a watch starts with the current objects; bookmarks and timeoutSeconds', async () => {
    kube.create(pod('b1'));
    const w = await rawWatch(`${kube.url}/api/v1/namespaces/default/pods?watch=1&allowWatchBookmarks=true&timeoutSeconds=1`);
    const [added] = await w.waitForEvents(1);
    assert.equal(added!.type, 'ADDED');
    assert.equal(added!.object.metadata?.name, 'b1');
    kube.sendBookmarks();
    const events = await w.waitForEvents(2);
    assert.deepEqual(
      { type: events[1]!.type, rv: events[1]!.object.metadata?.resourceVersion },
      { type: 'BOOKMARK', rv: kube.resourceVersion() },
    );
    const started = Date.now();
    await w.ended;
    assert.ok(Date.now() - started < 1500, 'the stream ends cleanly after timeoutSeconds');
    assert.equal(kube.openWatches(), 0);
    kube.remove('pods', 'default', 'b1');
  });

  test('dropWatches() cuts connections; stop() refuses connections until restart() on the same port', async () => {
    const w = await rawWatch(`${kube.url}/api/v1/namespaces/default/pods?watch=1&resourceVersion=${kube.resourceVersion()}`);
    assert.equal(kube.dropWatches(), 1);
    await assert.rejects(w.ended);
    assert.equal(kube.openWatches(), 0);
    await kube.stop();
    await assert.rejects(call(kube, 'GET', '/version'), /ECONNREFUSED/);
    kube.create(pod('while-down'));
    await kube.restart();
    const list = await call(kube, 'GET', '/api/v1/namespaces/default/pods');
    assert.deepEqual(
      list.body.items.map((p: any) => p.metadata.name),
      ['while-down'],
    );
    kube.remove('pods', 'default', 'while-down');
    assert.ok((kube.requests['list pods'] ?? 0) >= 1);
  });

  test('graceful pod deletion: deletionTimestamp first, removal after the delay', async () => {
    const graceful = await startFakeKube({ gracefulPodDeletion: { delayMs: 200 } });
    try {
      graceful.create(pod('g1'));
      const w = await rawWatch(`${graceful.url}/api/v1/namespaces/default/pods?watch=1&resourceVersion=${graceful.resourceVersion()}`);
      const deleted = await call(graceful, 'DELETE', '/api/v1/namespaces/default/pods/g1');
      assert.equal(deleted.status, 200);
      assert.ok(deleted.body.metadata.deletionTimestamp);
      assert.ok(graceful.get('pods', 'default', 'g1'), 'still there while terminating');
      const events = await w.waitForEvents(2, 2000);
      assert.deepEqual(
        events.map((e) => e.type),
        ['MODIFIED', 'DELETED'],
      );
      assert.equal(graceful.get('pods', 'default', 'g1'), undefined);
      w.close();

      graceful.create(pod('g2'));
      graceful.remove('pods', 'default', 'g2', { graceful: true });
      assert.ok(graceful.get('pods', 'default', 'g2')?.metadata.deletionTimestamp);
      graceful.finalizePodDeletion('default', 'g2');
      assert.equal(graceful.get('pods', 'default', 'g2'), undefined);
    } finally {
      await graceful.close();
    }
  });
});
