// A real @kubernetes/client-node 1.4 informer against the fake API server: listing, events, and how
// it behaves when watches drop, history expires, RBAC denies, or the API server goes away.
// The behaviour pinned here is summarised in test/support/fake-kube/README.md.
import { after, afterEach, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as k8s from '@kubernetes/client-node';
import { startFakeKube, type FakeKube } from '../support/fake-kube/index.js';
import { labelledPod as pod } from '../support/kube-objects.js';
import { eventually } from '../support/within.js';

type Seen = { readonly verb: string; readonly name: string; readonly detail?: string };

/** An informer on default/pods with labelSelector app=x, recording everything it emits. */
function podInformer(kube: FakeKube) {
  const kc = new k8s.KubeConfig();
  kc.loadFromFile(kube.kubeconfigPath);
  const api = kc.makeApiClient(k8s.CoreV1Api);
  const informer = k8s.makeInformer(
    kc,
    '/api/v1/namespaces/default/pods',
    () => api.listNamespacedPod({ namespace: 'default', labelSelector: 'app=x' }),
    'app=x',
  );
  const seen: Seen[] = [];
  const waiters = new Set<() => void>();
  const record = (s: Seen): void => {
    seen.push(s);
    for (const w of waiters) w();
  };
  for (const verb of ['add', 'update', 'delete'] as const) {
    informer.on(verb, (obj: k8s.V1Pod) => record({ verb, name: obj.metadata?.name ?? '' }));
  }
  informer.on('error', (err: any) => record({ verb: 'error', name: '', detail: String(err?.code ?? err?.statusCode ?? err?.name) }));
  informer.on('connect', () => record({ verb: 'connect', name: '' }));
  return {
    informer,
    seen,
    names: () =>
      informer
        .list()
        .map((p) => p.metadata?.name)
        .sort(),
    /** What was emitted from `from` on, without the connect notices. */
    events: (from = 0) =>
      seen
        .slice(from)
        .filter((s) => s.verb !== 'connect')
        .map((s) => `${s.verb} ${s.name}`.trim()),
    waitFor(predicate: (seen: Seen[]) => boolean, timeoutMs = 3000): Promise<void> {
      if (predicate(seen)) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const t = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`timed out; informer emitted ${JSON.stringify(seen)}`));
        }, timeoutMs);
        const check = (): void => {
          if (!predicate(seen)) return;
          clearTimeout(t);
          waiters.delete(check);
          resolve();
        };
        waiters.add(check);
      });
    },
  };
}

const has =
  (verb: string, name = '') =>
  (seen: Seen[]) =>
    seen.some((s) => s.verb === verb && s.name === name);
/** A bounded pause for checks that something does NOT happen (a reconnect, another list) within it. */
const quietFor = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Waits until the fake has exactly n open watches (the informer re-watching after a reconnect). */
const watching = (kube: FakeKube, n = 1): Promise<number> =>
  eventually(
    `${n} open watches`,
    () => kube.openWatches(),
    (open) => open === n,
    5_000,
    10,
  );

describe('client-node 1.4 informer against fake-kube', { timeout: 25_000 }, () => {
  let kube: FakeKube;
  let probe: ReturnType<typeof podInformer>;
  const stopped = new Set<ReturnType<typeof podInformer>>();

  before(async () => {
    kube = await startFakeKube();
  });
  afterEach(async () => {
    if (!stopped.has(probe)) await probe.informer.stop();
    stopped.add(probe);
    for (const p of kube.list('pods', 'default')) kube.remove('pods', 'default', p.metadata.name!);
    kube.setForbidden('pods', false);
  });
  after(async () => {
    await kube.close();
  });

  test('lists, then receives add/update/delete; an object leaving the selector is a delete', async () => {
    kube.create(pod('a'));
    kube.create(pod('other', { app: 'y' }));
    probe = podInformer(kube);
    await probe.informer.start();
    assert.deepEqual(probe.names(), ['a']);
    assert.equal(kube.requests['list pods'], 1);
    assert.equal(kube.openWatches('pods'), 1);

    kube.create(pod('b'));
    kube.setPodReady('default', 'b', true);
    kube.patch('pods', 'default', 'other', { metadata: { labels: { app: 'x' } } });
    kube.patch('pods', 'default', 'a', { metadata: { labels: { app: 'moved' } } });
    kube.remove('pods', 'default', 'b');
    await probe.waitFor(has('delete', 'b'));
    assert.deepEqual(probe.events(), ['add a', 'add b', 'update b', 'add other', 'delete a', 'delete b']);
    assert.deepEqual(probe.names(), ['other']);
  });

  test('a watch the server ends cleanly is resumed from the last resourceVersion: no error, no relist, missed delete replayed', async () => {
    kube.create(pod('a'));
    kube.create(pod('b'));
    probe = podInformer(kube);
    await probe.informer.start();
    const lists = kube.requests['list pods'] ?? 0;
    const from = probe.seen.length;

    kube.dropWatches({ graceful: true });
    kube.remove('pods', 'default', 'a');
    await probe.waitFor(has('delete', 'a'));
    await watching(kube);
    assert.deepEqual(probe.events(from), ['delete a']);
    assert.equal(kube.requests['list pods'], lists, 'resumed from its resourceVersion without listing');
    kube.create(pod('c'));
    await probe.waitFor(has('add', 'c'));
  });

  test('an abruptly dropped watch makes the informer emit error and stop; start() resumes and a relist after 410 reports the missed delete', async () => {
    kube.create(pod('a'));
    kube.create(pod('b'));
    probe = podInformer(kube);
    await probe.informer.start();
    const from = probe.seen.length;

    kube.dropWatches();
    await probe.waitFor(has('error'));
    assert.equal(probe.seen.find((s) => s.verb === 'error')?.detail, 'ERR_STREAM_PREMATURE_CLOSE');
    await quietFor(150);
    assert.equal(kube.openWatches(), 0, 'client-node does not reconnect by itself after an error');

    // while nobody watches: a delete, an update, an add, and the history that could replay them is gone
    kube.remove('pods', 'default', 'a');
    kube.setPodReady('default', 'b', true);
    kube.create(pod('c'));
    kube.compactHistory();
    const lists = kube.requests['list pods'] ?? 0;

    await probe.informer.start();
    await probe.waitFor(has('add', 'c'));
    assert.deepEqual(probe.events(from), ['error', 'delete a', 'update b', 'add c']);
    assert.equal(kube.requests['list pods'], lists + 1, 'watch from the old resourceVersion got 410 Expired, then one relist');
    assert.deepEqual(probe.names(), ['b', 'c']);
    await watching(kube);
  });

  test('410 Expired as an ERROR event or as HTTP 410 makes it relist once, not loop', async () => {
    kube.create(pod('a'));
    probe = podInformer(kube);
    await probe.informer.start();
    for (const mode of ['event', 'http'] as const) {
      const lists = kube.requests['list pods'] ?? 0;
      const watches = kube.requests['watch pods'] ?? 0;
      kube.failWatchesWith410(1, mode);
      kube.dropWatches({ graceful: true });
      await watching(kube);
      await quietFor(300); // no second relist, no further watch

      assert.equal(kube.requests['list pods'], lists + 1, `${mode}: one relist`);
      assert.equal(kube.requests['watch pods'], watches + 2, `${mode}: the failed watch and one more`);
    }
    assert.equal(probe.events().filter((e) => e === 'error').length, 0, 'a 410 is not reported as an error');
    kube.create(pod('b'));
    await probe.waitFor(has('add', 'b'));
  });

  test('RBAC denial: a 403 on list or watch is an error and the informer stops', async () => {
    kube.setForbidden('pods', true, ['list']);
    probe = podInformer(kube);
    await probe.informer.start();
    await probe.waitFor(has('error'));
    assert.equal(probe.seen.find((s) => s.verb === 'error')?.detail, '403', 'list failure: ApiException with code 403');
    assert.equal(kube.openWatches(), 0);

    kube.setForbidden('pods', true, ['watch']);
    const from = probe.seen.length;
    await probe.informer.start();
    await probe.waitFor((seen) => seen.slice(from).some((s) => s.verb === 'error'));
    assert.equal(probe.seen.slice(from).find((s) => s.verb === 'error')?.detail, '403', 'watch failure: Error with statusCode 403');

    kube.setForbidden('pods', false);
    kube.create(pod('a'));
    await probe.informer.start();
    await probe.waitFor(has('add', 'a'));
  });

  test('API server down and back: error on the cut, error on a start() while down, resumes after restart', async () => {
    kube.create(pod('a'));
    probe = podInformer(kube);
    await probe.informer.start();
    await kube.stop();
    await probe.waitFor(has('error'));
    const from = probe.seen.length;
    await probe.informer.start();
    await probe.waitFor((seen) => seen.slice(from).some((s) => s.verb === 'error'));
    assert.equal(probe.seen.slice(from).find((s) => s.verb === 'error')?.detail, 'ECONNREFUSED');

    kube.create(pod('b'));
    await kube.restart();
    await probe.informer.start();
    await probe.waitFor(has('add', 'b'));
    assert.deepEqual(probe.names(), ['a', 'b']);
  });

  test('stop() emits an AbortError through the error callback', async () => {
    probe = podInformer(kube);
    await probe.informer.start();
    await probe.informer.stop();
    stopped.add(probe);
    await probe.waitFor(has('error'));
    assert.equal(probe.seen.find((s) => s.verb === 'error')?.detail, 'AbortError');
    await watching(kube, 0);
  });
});
