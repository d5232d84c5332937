// Issue 5 checks: the hold queue, demand signals, the KEDA scaler over real gRPC, learned Retry-After, stuck-wake alarm.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import { startFakeKube, type FakeKube } from '../support/fake-kube/index.js';
import { stopAll } from '../support/process.js';
import { kedaClient } from '../support/keda.js';
import { addReadyPod, deployment } from '../support/kube-objects.js';
import { call, chat, FAST_PROBES, kedaPort, metric, simStats, startRouter, waitModelStatus, type Running } from '../support/router.js';
import { startSimHere, stopSimsHere, type SimHere } from '../support/sim-here.js';
import { until } from '../support/within.js';

const deploymentOf = (name: string, model: string, replicas: number) => deployment(name, replicas, { labels: { model } });
const held = (router: string, model: string): Promise<number> => metric(router, 'llm_router_model_requests_held', { model });

describe('scale from zero', { timeout: 120_000 }, () => {
  let kube: FakeKube;
  /**
   * One ready engine for the models whose tests only need one that answers (it serves each of them; each test's pod
   * points at it): started once, beside the fake API server, instead of once per test.
   */
  let shared: SimHere;
  const k8s = ['--service-discovery', 'k8s', '--k8s-label-selector', 'app=llm', ...FAST_PROBES];
  const startK8sRouter = (extra: string[]): Promise<Running> => startRouter([...k8s, ...extra], { KUBECONFIG: kube.kubeconfigPath });

  before(async () => {
    [kube, shared] = await Promise.all([
      startFakeKube(),
      startSimHere(['--model', 'leave-model,org/keda-model,restart-model,stuck-model', '--id', 'shared']),
    ]);
  });
  after(async () => {
    await Promise.all([stopAll(), stopSimsHere()]);
    await kube.close();
  });

  test('a request for a model at zero is held until an engine has loaded, then answered 200; a full queue answers 429 queue_full', async () => {
    kube.create(deploymentOf('hold', 'held-model', 0));
    const router = await startK8sRouter(['--cold-start-wait', '30', '--cold-start-queue-size', '2']);
    const started = Date.now();
    const first = call(`${router.url}/v1/chat/completions`, { body: chat('held-model'), timeoutMs: 30_000 });
    const second = call(`${router.url}/v1/chat/completions`, { body: chat('held-model'), timeoutMs: 30_000 });
    await until('two requests held', async () => (await held(router.url, 'held-model')) === 2);
    const third = await call(`${router.url}/v1/chat/completions`, { body: chat('held-model') });
    assert.equal(third.status, 429);
    assert.equal(third.json<{ error: { code: string } }>().error.code, 'queue_full');
    assert.ok(Number(third.headers['retry-after']) >= 1);

    // the autoscaler wakes the model: a pod appears whose engine needs ~2 s to load
    kube.patch('deployments', 'default', 'hold', { spec: { replicas: 1 } });
    const sim = await startSimHere(['--model', 'held-model', '--startup-loading-seconds', '2']);
    addReadyPod(kube, 'hold-1', 'held-model', sim.port);
    const [a, b] = await Promise.all([first, second]);
    assert.deepEqual([a.status, b.status], [200, 200], 'no client saw an error');
    assert.ok(Date.now() - started >= 2_000, 'they waited for the load');
    assert.equal(await held(router.url, 'held-model'), 0);
    assert.ok(
      (await metric(router.url, 'llm_router_model_demand_total', { model: 'held-model' })) >= 3,
      'every arrival counts as demand, 429 included',
    );
    await router.stop();
  });

  test('a held client that disconnects leaves the queue at once and nothing is forwarded for it', async () => {
    kube.create(deploymentOf('leave', 'leave-model', 0));
    const router = await startK8sRouter(['--cold-start-wait', '30']);
    const controller = new AbortController();
    const pending = request(`${router.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: chat('leave-model'),
      signal: controller.signal,
    }).catch(() => undefined);
    await until('the request held', async () => (await held(router.url, 'leave-model')) === 1);
    assert.ok((await metric(router.url, 'llm_router_model_oldest_held_seconds', { model: 'leave-model' })) >= 0);
    controller.abort();
    await pending;
    await until('the queue empty', async () => (await held(router.url, 'leave-model')) === 0, 10_000);
    const receivedBefore = (await simStats(shared.url)).received;
    addReadyPod(kube, 'leave-1', 'leave-model', shared.port);
    await waitModelStatus(router.url, 'leave-model', 'ready');
    // a bounded wait on purpose: nothing may be forwarded for the client that left (a held request would go at once)
    await sleep(300);
    assert.equal((await simStats(shared.url)).received, receivedBefore, 'nothing forwarded for the client that left');
    kube.remove('pods', 'default', 'leave-1');
    await router.stop();
  });

  test('the KEDA external scaler answers IsActive and GetMetrics over gRPC, rising with held demand and falling after the grace period', async () => {
    kube.create(deploymentOf('keda', 'org/keda-model', 0));
    const router = await startK8sRouter([
      '--cold-start-wait',
      '30',
      '--keda-scaler-port',
      '0',
      '--scale-to-zero-grace-seconds',
      '2',
      '--log-level',
      'info',
    ]);
    const keda = kedaClient(`127.0.0.1:${await kedaPort(router)}`);
    const ref = { name: 'keda-model', namespace: 'default', scalerMetadata: { model: 'org/keda-model', targetValue: '4' } };
    try {
      assert.equal(await keda.isActive(ref), false);
      const spec = await keda.metricSpec(ref);
      assert.deepEqual(
        spec.map((s) => [s.metricName, s.targetSize]),
        [['llm-router-org-keda-model', 4]],
      );
      const metricValue = (): Promise<number> => keda.metric(ref);
      assert.equal(await metricValue(), 0);

      const stream = keda.stream(ref);
      const pushed = stream.pushed;

      const held = [1, 2, 3].map(() => call(`${router.url}/v1/chat/completions`, { body: chat('org/keda-model'), timeoutMs: 30_000 }));
      await until('three requests held, as the scaler sees them', async () => (await metricValue()) === 3);
      assert.equal(await keda.isActive(ref), true);

      kube.patch('deployments', 'default', 'keda', { spec: { replicas: 1 } });
      const engineAdded = Date.now(); // the requests end after this: the grace period cannot be over before +2 s
      addReadyPod(kube, 'keda-1', 'org/keda-model', shared.port);
      assert.deepEqual(
        (await Promise.all(held)).map((r) => r.status),
        [200, 200, 200],
      );
      assert.equal(await metricValue(), 0, 'nothing held or in flight');
      assert.equal(await keda.isActive(ref), true, 'still active within the grace period after the last request');
      await until('inactive after the grace period', async () => !(await keda.isActive(ref)), 10_000, 100);
      assert.ok(
        Date.now() - engineAdded >= 1_950,
        `inactive ${Date.now() - engineAdded} ms after the engine came: not before the 2 s grace`,
      );
      // the stream is pushed on the scaler's 1 s timer
      await until('the third push', () => pushed.length >= 3, 10_000);
      assert.deepEqual(pushed.slice(0, 3), [false, true, false], 'StreamIsActive pushed each change');
      stream.cancel();
      await assert.rejects(keda.isActive({ name: 'x', namespace: 'default', scalerMetadata: {} }), /model/);
    } finally {
      keda.close();
      await router.stop();
    }
  });

  test('Retry-After reflects the measured cold start and decreases while the model loads', async () => {
    kube.create(deploymentOf('retry', 'retry-model', 1));
    const router = await startK8sRouter(['--retry-after', '17']);
    const before = await call(`${router.url}/v1/chat/completions`, { body: chat('retry-model') });
    assert.equal(before.headers['retry-after'], '17', 'the flag default until something is measured');

    const first = await startSimHere(['--model', 'retry-model', '--startup-loading-seconds', '3']);
    addReadyPod(kube, 'retry-1', 'retry-model', first.port);
    await until(
      'the first pod serving',
      async () => (await call(`${router.url}/v1/chat/completions`, { body: chat('retry-model') })).status === 200,
      20_000,
      100,
    );

    // a new pod of the same model: the router expects it to take about as long
    kube.remove('pods', 'default', 'retry-1');
    const [, second] = await Promise.all([first.stop(), startSimHere(['--model', 'retry-model', '--startup-loading-seconds', '3'])]);
    addReadyPod(kube, 'retry-2', 'retry-model', second.port);
    const seen: number[] = [];
    // asks every 250 ms while the pod loads, noting each Retry-After
    await until(
      'the second pod serving',
      async () => {
        const res = await call(`${router.url}/v1/chat/completions`, { body: chat('retry-model') });
        if (res.headers['x-llm-router-model-state'] === 'loading') seen.push(Number(res.headers['retry-after']));
        return res.status === 200;
      },
      20_000,
      250,
    );
    assert.ok(seen.length >= 4, `several answers while loading: ${seen}`);
    // near the 3 s measured (a busy machine measures a bit more): not the flag default of 17
    assert.ok(seen[0]! >= 2 && seen[0]! <= 7, `first Retry-After near 3: ${seen}`);
    assert.ok(seen.at(-1)! <= 2 && seen.at(-1)! < seen[0]!, `it decreased while loading: ${seen}`);
    for (let i = 1; i < seen.length; i++) assert.ok(seen[i]! <= seen[i - 1]!, `never increases: ${seen}`);
    await router.stop();
  });

  test('an engine already up when the router starts is no cold start: scaled to 0, Retry-After is --retry-after and nothing is measured', async () => {
    kube.create(deploymentOf('restart', 'restart-model', 1));
    addReadyPod(kube, 'restart-1', 'restart-model', shared.port);
    const router = await startK8sRouter(['--retry-after', '10']);
    await waitModelStatus(router.url, 'restart-model', 'ready');
    assert.equal((await call(`${router.url}/v1/chat/completions`, { body: chat('restart-model') })).status, 200);

    // the model is scaled to zero
    kube.patch('deployments', 'default', 'restart', { spec: { replicas: 0 } });
    kube.remove('pods', 'default', 'restart-1');
    await waitModelStatus(router.url, 'restart-model', 'scaled-to-zero');
    const res = await call(`${router.url}/v1/chat/completions`, { body: chat('restart-model') });
    assert.equal(res.status, 503);
    assert.equal(res.headers['x-llm-router-model-state'], 'scaled-to-zero');
    assert.equal(res.headers['retry-after'], '10', 'nothing was measured: the flag, not the ~0.1 s from discovery to first probe');
    const text = (await call(`${router.url}/metrics`)).text;
    assert.doesNotMatch(text, /^llm_router_model_cold_start_seconds_count\{model="restart-model"/m, 'no cold start observed');
    await router.stop();
  });

  test('stuck wake: demand with no endpoint for longer than the alarm time sets the gauge and logs once; an endpoint clears it', async () => {
    kube.create(deploymentOf('stuck', 'stuck-model', 0));
    const router = await startK8sRouter(['--wake-alarm-seconds', '0.5', '--log-level', 'info']);
    // demand goes on (a request every 150 ms) until the alarm is raised
    await until(
      'the stuck-wake gauge set',
      async () => {
        await call(`${router.url}/v1/chat/completions`, { body: chat('stuck-model') });
        return (await metric(router.url, 'llm_router_model_wake_stalled', { model: 'stuck-model' })) === 1;
      },
      10_000,
      150,
    );
    // the warning is logged as the gauge is set, but reaches us through a pipe, not with the /metrics answer
    await router.proc.waitForOutput('stuck wake: the model has had demand');
    assert.equal(router.proc.output().split('stuck wake: the model has had demand').length - 1, 1, 'logged once per episode');
    addReadyPod(kube, 'stuck-1', 'stuck-model', shared.port);
    await until(
      'the stuck-wake gauge cleared',
      async () => (await metric(router.url, 'llm_router_model_wake_stalled', { model: 'stuck-model' })) === 0,
    );
    await router.stop();
  });
});
