// Scale from zero as a system: KEDA's answer is the demand of every router replica and worker, whichever it reaches;
// a replica that dies counts with its last snapshot for the grace period; held requests wake engines without delay.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startFakeKube, type FakeKube } from '../support/fake-kube/index.js';
import { kedaClient } from '../support/keda.js';
import { addReady } from '../support/kube-objects.js';
import { freePort, stopAll } from '../support/process.js';
import { call, chat, firstSnapshot, kedaPort, startRouter, type Running } from '../support/router.js';
import { startSimHere, stopSimsHere } from '../support/sim-here.js';
import { until, within } from '../support/within.js';

interface Demand {
  instance: string;
  workers: number;
  models: Record<
    string,
    {
      held: number;
      inFlight: number;
      arrivals: number;
      lastMinute?: number;
      lastArrivalAt: number | null;
      lastHoldTimeoutAt: number | null;
    }
  >;
}

const demand = async (r: Running): Promise<Demand> => (await call(`${r.adminUrl}/demand`)).json<Demand>();
const ref = (model: string) => ({ name: model, namespace: 'default', scalerMetadata: { model } });
const hold = (r: Running, model: string) =>
  call(`${r.url}/v1/chat/completions`, { body: chat(model), timeoutMs: 60_000 }).catch((err: Error) => err);

describe('scale from zero across replicas and workers', { timeout: 120_000 }, () => {
  after(() => Promise.all([stopAll(), stopSimsHere()]));

  test('two replicas: a request held on B shows through A; B killed: A counts its last snapshot until the grace period passes, then drops it', async () => {
    // the grace period's length is a parameter here, not the subject: 3 s still tells "kept for the grace period"
    // (checked for its first third) from "dropped at once" and from "kept forever"
    const graceSeconds = 3;
    const common = [
      '--known-models',
      'm',
      '--cold-start-wait',
      '60',
      '--scale-to-zero-grace-seconds',
      String(graceSeconds),
      '--keda-scaler-port',
      '0',
    ];
    // both admin ports named in advance, so that the two replicas start side by side
    const [aAdmin, bAdmin] = [await freePort(), await freePort()];
    // A lists itself too: harmless, it is recognised by its instance id and not counted twice
    const [b, a] = await Promise.all([
      startRouter([...common, '--admin-port', String(bAdmin)]),
      startRouter([...common, '--admin-port', String(aAdmin), '--scaler-peers', `http://127.0.0.1:${aAdmin},http://127.0.0.1:${bAdmin}`]),
    ]);
    const keda = kedaClient(`127.0.0.1:${await kedaPort(a)}`);
    try {
      assert.equal(await keda.isActive(ref('m')), false);
      assert.equal(await keda.metric(ref('m')), 0);
      const held = hold(b, 'm');
      await until('B holds the request', async () => (await demand(b)).models.m?.held === 1);
      assert.equal((await demand(a)).models.m?.held, 0, "A's own /demand is A's alone");
      // A's answers are shared for 250 ms (one round of peer requests for KEDA's back-to-back calls): not at once
      await until('A answers for B', async () => await keda.isActive(ref('m')));
      assert.equal(await keda.metric(ref('m')), 1);
      const stream = keda.stream(ref('m'));
      await until('StreamIsActive pushes true', () => stream.pushed.includes(true));

      await b.stop('SIGKILL');
      const killedAt = Date.now();
      assert.ok((await held) instanceof Error, "B's client lost its connection");
      // B's last snapshot keeps counting: the model does not turn inactive just because a replica died (checked every
      // 200 ms for a third of the grace period: a bounded wait on purpose, for something that must not change)
      while (Date.now() - killedAt < (graceSeconds * 1000) / 3) {
        assert.equal(await keda.metric(ref('m')), 1, 'B still counted right after it died');
        await new Promise((r) => setTimeout(r, 200));
      }
      await until('B dropped after the grace period', async () => (await keda.metric(ref('m'))) === 0, graceSeconds * 1000 + 10_000);
      assert.ok(Date.now() - killedAt >= graceSeconds * 1000 - 1_000, 'not dropped before the grace period');
      await until('inactive once B is dropped', async () => !(await keda.isActive(ref('m'))));
      await until('StreamIsActive pushes false', () => stream.pushed.at(-1) === false);
      stream.cancel();
      const logged = a.proc.output();
      assert.equal(logged.split('router peer did not answer GET /demand').length - 1, 1, 'the dead peer is logged once, not every poll');
    } finally {
      keda.close();
    }
  });

  test("--workers 2 with 4 held requests: the metric, /demand, the dashboard's demand per minute and /metrics say 4 whichever worker answers", async () => {
    const router = await startRouter([
      '--workers',
      '2',
      '--known-models',
      'w',
      '--cold-start-wait',
      '60',
      '--admin-port',
      '0',
      '--keda-scaler-port',
      '0',
    ]);
    // both workers log that they listen; wait for the second so that both take connections
    await until('two workers listening', () => router.proc.output().split('llm-router listening').length - 1 === 2);
    const port = await kedaPort(router);
    const held = [1, 2, 3, 4].map(() => hold(router, 'w'));
    await until('4 held in the instance', async () => (await demand(router)).models.w?.held === 4);
    const seen: number[] = [];
    for (let i = 0; i < 10; i++) {
      // a new connection each time, so the calls spread over the workers
      const keda = kedaClient(`127.0.0.1:${port}`);
      seen.push(await keda.metric(ref('w')));
      assert.equal(await keda.isActive(ref('w')), true);
      keda.close();
    }
    assert.deepEqual(seen, Array(10).fill(4));
    for (let i = 0; i < 5; i++) {
      const d = await demand(router);
      assert.equal(d.workers, 2);
      assert.equal(d.models.w?.held, 4);
      assert.equal(d.models.w?.arrivals, 4);
      assert.equal(d.models.w?.lastMinute, 4);
      // the dashboard opened after the requests came: its demand per minute is the router's record, every worker's
      const page = await firstSnapshot<{ state: { models: { id: string; demandPerMinute: number | null }[] } }>(router.adminUrl);
      assert.equal(page.state.models.find((m) => m.id === 'w')?.demandPerMinute, 4);
      const text = (await call(`${router.adminUrl}/metrics`)).text;
      assert.match(text, /^llm_router_model_requests_held\{model="w"\} 4$/m, 'the scrape sums every worker');
      assert.match(text, /^llm_router_model_demand_total\{model="w"\} 4$/m);
    }
    // a replica that shuts down answers its held requests at once (503 + Retry-After) so they retry elsewhere
    const stopping = router.stop();
    const answers = await within(10_000, 'the held requests at shutdown', Promise.all(held));
    for (const r of answers) {
      assert.ok(!(r instanceof Error), String(r));
      assert.equal(r.status, 503);
      assert.equal(r.json<{ error: { code: string } }>().error.code, 'model_unavailable');
      assert.ok(Number(r.headers['retry-after']) >= 1);
    }
    assert.equal(await stopping, 0);
  });

  describe('peers found in Kubernetes', () => {
    let kube: FakeKube;
    before(async () => {
      kube = await startFakeKube();
    });
    after(() => kube.close());

    const routerPod = (name: string, admin: Running) =>
      addReady(kube, {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: {
          name,
          namespace: 'default',
          labels: { app: 'llm-router' },
          annotations: { 'llm-router/admin-port': new URL(admin.adminUrl).port },
        },
        spec: { containers: [{ name: 'router', image: 'x' }] },
      });

    test('--scaler-peer-selector: the Ready router pods are the peers, at their llm-router/admin-port', async () => {
      const common = [
        '--known-models',
        'k',
        '--cold-start-wait',
        '60',
        '--keda-scaler-port',
        '0',
        '--scaler-peer-selector',
        'app=llm-router',
        '--k8s-namespace',
        'default',
      ];
      const env = { KUBECONFIG: kube.kubeconfigPath };
      // the pods are listed after both routers listen: their admin ports can be whatever port 0 gave them
      const [b, a] = await Promise.all([
        startRouter([...common, '--admin-port', '0'], env),
        startRouter([...common, '--admin-port', '0'], env),
      ]);
      routerPod('router-a', a);
      routerPod('router-b', b);
      const keda = kedaClient(`127.0.0.1:${await kedaPort(a)}`);
      try {
        const held = hold(b, 'k');
        await until('B holds the request', async () => (await demand(b)).models.k?.held === 1);
        await until('A sees it through the pod list', async () => (await keda.metric(ref('k'))) === 1);
        assert.equal(await keda.isActive(ref('k')), true);
        await b.stop();
        await held;
      } finally {
        keda.close();
        await a.stop();
      }
    });
  });

  test('held requests wake the prober: an engine that comes up is found at the wake interval, not the probe interval', async () => {
    const port = await freePort();
    // a 60 s probe interval: without the wake interval the held request would wait for the next probe
    const router = await startRouter([
      '--static-backends',
      `http://127.0.0.1:${port}`,
      '--static-models',
      'late',
      '--cold-start-wait',
      '60',
      '--probe-interval',
      '60',
      '--probe-wake-interval',
      '0.1',
    ]);
    const held = call(`${router.url}/v1/chat/completions`, { body: chat('late'), timeoutMs: 60_000 });
    await until('held', async () => (await demand(router)).models.late?.held === 1);
    await startSimHere(['--model', 'late', '--startup-loading-seconds', '1'], { port });
    const answer = await within(20_000, 'the held request, once the engine has loaded', held);
    assert.equal(answer.status, 200);
    await router.stop();
  });
});
