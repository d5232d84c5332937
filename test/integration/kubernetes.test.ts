// Issue 4 checks against the fake API server, with the real client-node informers in the router process and
// the real kubectl changing the cluster.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { startFakeKube, type FakeKube } from '../support/fake-kube/index.js';
import { stopAll } from '../support/process.js';
import { addReadyPod, deployment } from '../support/kube-objects.js';
import {
  call,
  chat,
  engines,
  FAST_PROBES,
  setFault,
  simStats,
  startRouter,
  streamOn,
  waitModelStatus,
  type Running,
} from '../support/router.js';
import { startSimHere, stopSimsHere, type SimHere } from '../support/sim-here.js';
import { eventually, until } from '../support/within.js';
import { requireTool } from '../support/tools.js';
import { scratchDir } from '../support/scratch.js';

const exec = promisify(execFile);
const SELECTOR = 'app=llm';

// The three groups below run at the same time (each over an API server of its own, on models and engines of its own);
// the tests of a group run one after the other.
describe('kubernetes discovery', { timeout: 120_000, concurrency: true }, () => {
  let kube: FakeKube;
  let kubectlDir: string;
  /**
   * Processes started once for the file, not once per test (each test adds and removes its own pods and workloads):
   * an engine for the tests that only need one that answers (model-x, w, d), a vLLM P/D pair (pd-k8s; its decode side
   * also serves pd-nx), and a router with the default flags for the tests that only read what it discovers, over an
   * API server of its own that deletes pods gracefully when asked to (`sharedKube`). The seed incident and the P/D
   * system test change `kube` (kubectl's cluster) and share its two routers: A, and W with two workers (the seed
   * incident's router B), each started when the first of them needs it. The tests that count API requests, break the
   * watches or stop the API server use `solo`, each with a router of its own.
   */
  let solo: FakeKube;
  let kubeRouters: { a?: Running; w?: Running } = {};
  let engine: SimHere;
  let pdPrefill: SimHere;
  let pdDecode: SimHere;
  let sharedKube: FakeKube;
  let shared: Running;
  const kubectl = async (...args: string[]): Promise<string> =>
    (await exec('kubectl', ['--kubeconfig', kube.kubeconfigPath, '--cache-dir', kubectlDir, ...args], { timeout: 20_000 })).stdout;
  const routerArgs = ['--service-discovery', 'k8s', '--k8s-label-selector', SELECTOR, '--k8s-resync-seconds', '3', ...FAST_PROBES];
  const startK8sRouter = (extra: string[] = [], k: FakeKube = kube): Promise<Running> =>
    startRouter([...routerArgs, ...extra], { KUBECONFIG: k.kubeconfigPath });
  /** Router A over `kube`, started now unless a test started it already. */
  const routerA = async (): Promise<Running> => {
    kubeRouters.a ??= await startK8sRouter();
    return kubeRouters.a;
  };
  /** Router W over `kube` (two workers), started now unless a test started it already; resolves once both listen. */
  const routerW = async (): Promise<Running> => {
    if (!kubeRouters.w) {
      const w = await startK8sRouter(['--workers', '2']);
      await until('two workers listening', () => w.proc.output().split('llm-router listening').length - 1 === 2);
      kubeRouters.w = w;
    }
    return kubeRouters.w;
  };

  before(async () => {
    const pd = ['--ttft-ms', '1', '--itl-ms', '1'];
    [kube, solo, sharedKube, engine, pdPrefill, pdDecode] = await Promise.all([
      startFakeKube(),
      startFakeKube(),
      startFakeKube({ gracefulPodDeletion: true }),
      startSimHere(['--model', 'model-x,w,d', '--id', 'steady']),
      startSimHere(['--model', 'pd-k8s', ...pd, '--role', 'prefill', '--id', 'k8s-prefill']),
      startSimHere(['--model', 'pd-k8s,pd-nx', ...pd, '--role', 'decode', '--id', 'k8s-decode']),
    ]);
    shared = await startRouter(routerArgs, { KUBECONFIG: sharedKube.kubeconfigPath });
    kubectlDir = scratchDir('kubectl-cache-');
  });
  after(async () => {
    await Promise.all([stopAll(), stopSimsHere()]);
    await Promise.all([kube.close(), solo.close(), sharedKube.close()]);
  });

  async function answers(routers: Running[], model: string): Promise<string[]> {
    return Promise.all(
      routers.map(async (r) => {
        const res = await call(`${r.url}/v1/chat/completions`, { body: chat(model) });
        const code = res.status === 200 ? '' : res.json<{ error: { code: string } }>().error.code;
        return `${res.status} ${code} ${res.headers['x-llm-router-model-state'] ?? ''}`.trim();
      }),
    );
  }

  async function allAnswer(routers: Running[], model: string, expected: string): Promise<void> {
    let last: string[] = [];
    await until(`${model} -> ${expected}`, async () => {
      last = await answers(routers, model);
      return last.every((a) => a === expected);
    }).catch(() => assert.fail(`${model}: expected ${expected} from every router, got ${JSON.stringify(last)}`));
  }

  // in order: the P/D system test reuses the routers the seed incident started
  describe('the cluster kubectl changes: routers A and W', { concurrency: 1 }, () => {
    test('the seed incident: a model at zero replicas is 503 on every router whenever it started; scale up, down and delete agree', {
      skip: requireTool('kubectl'),
    }, async () => {
      const dir = scratchDir('manifests-');
      writeFileSync(path.join(dir, 'x.json'), JSON.stringify(deployment('x', 0, { labels: { model: 'model-x' } })));
      await kubectl('create', '-f', path.join(dir, 'x.json'), '--validate=false');

      const a = await routerA();
      await until('router A ready', async () => (await call(`${a.url}/ready`)).status === 200);
      assert.deepEqual(await answers([a], 'model-x'), ['503 model_unavailable scaled-to-zero']);
      assert.deepEqual(await answers([a], 'model-y'), ['404 model_not_found']);

      await kubectl('scale', 'deployment', 'x', '--replicas=1');
      await allAnswer([a], 'model-x', '503 model_unavailable loading');
      addReadyPod(kube, 'x-1', 'model-x', engine.port);
      const b = await routerW(); // B: two workers, for the P/D system test that shares it
      await allAnswer([a, b], 'model-x', '200');
      assert.deepEqual(await answers([a, b], 'model-y'), ['404 model_not_found', '404 model_not_found']);

      await kubectl('scale', 'deployment', 'x', '--replicas=0');
      await kubectl('delete', 'pod', 'x-1', '--wait=false');
      await allAnswer([a, b], 'model-x', '503 model_unavailable scaled-to-zero');

      await kubectl('delete', 'deployment', 'x', '--wait=false');
      await allAnswer([a, b], 'model-x', '404 model_not_found');
    });

    test('P/D as a system: role workloads at zero are 503 scaled-to-zero on every replica and worker, whenever started; then every one agrees on each step up', async () => {
      const sglang = { 'llm-router/pd-protocol': 'sglang' };
      const role = (model: string, r: string) => ({ labels: { model, 'llm-d.ai/role': r } });
      kube.create(deployment('sg-prefill', 0, role('pd-sg', 'prefill'), sglang));
      kube.create(deployment('sg-decode', 0, role('pd-sg', 'decode'), sglang));
      kube.create(deployment('nx-prefill', 0, role('pd-nx', 'prefill')));
      kube.create(deployment('nx-decode', 0, role('pd-nx', 'decode')));
      // the engines start beside router A (they are no pods until the steps up below add them)
      // (the vllm-nixl decode engine is the file's shared one)
      const starting = Promise.all([
        startSimHere([
          '--model',
          'pd-sg',
          '--role',
          'decode',
          '--pd-protocol',
          'sglang',
          '--id',
          'sg-d',
          '--ttft-ms',
          '1',
          '--itl-ms',
          '1',
        ]),
        startSimHere(['--model', 'pd-sg', '--role', 'prefill', '--pd-protocol', 'sglang', '--id', 'sg-p']),
      ]);
      // A and W are the seed incident's routers when it ran just before (then they learn of these workloads by their
      // watches), else they start now, after them (then by their first list)
      const a = await routerA();
      await until('router A ready', async () => (await call(`${a.url}/ready`)).status === 200);
      // started later, with two workers: each answer is asked on four connections in a row, which go to both workers
      const w = await routerW();
      const askAll = async (model: string): Promise<string[]> => {
        const seen = new Set<string>();
        for (const r of [a, w])
          for (let i = 0; i < (r === w ? 4 : 1); i++) {
            const res = await call(`${r.url}/v1/chat/completions`, { body: chat(model), newConnection: true });
            const error = res.status === 200 ? undefined : res.json<{ error: { code: string; message: string } }>().error;
            const missing = /no ready [a-z ]+ engine/.exec(error?.message ?? '')?.[0];
            seen.add([res.status, error?.code, res.headers['x-llm-router-model-state'], missing].filter(Boolean).join(' '));
          }
        return [...seen];
      };
      const agree = async (model: string, expected: string): Promise<void> => {
        let last: string[] = [];
        await until(
          `${model} -> ${expected}`,
          async () => {
            last = await askAll(model);
            return last.length === 1 && last[0] === expected;
          },
          15_000,
          100,
        ).catch(() => assert.fail(`${model}: expected ${expected} from every router and worker, got ${JSON.stringify(last)}`));
      };
      // the message names the roles a request needs: sglang both, vllm-nixl the decode (it can go decode-only)
      await agree('pd-sg', '503 model_unavailable scaled-to-zero no ready prefill or decode engine');
      await agree('pd-nx', '503 model_unavailable scaled-to-zero no ready decode engine');
      const access = w.proc
        .output()
        .split('\n')
        .filter((l) => l.includes('"msg":"request"') && l.includes('"model":"pd-sg"'));
      assert.equal(new Set(access.map((l) => (JSON.parse(l) as { worker: number }).worker)).size, 2, 'both workers answered');

      // the decode side scales up first
      kube.patch('deployments', 'default', 'sg-decode', { spec: { replicas: 1 } });
      kube.patch('deployments', 'default', 'nx-decode', { spec: { replicas: 1 } });
      const [sgDecode, sgPrefill] = await starting;
      const nxDecode = pdDecode;
      const localBefore = (await simStats(nxDecode.url)).pd.local;
      addReadyPod(kube, 'sg-decode-0', 'pd-sg', sgDecode.port, role('pd-sg', 'decode'));
      addReadyPod(kube, 'nx-decode-0', 'pd-nx', nxDecode.port, role('pd-nx', 'decode'));
      // sglang cannot run decode-only: the prefill role is missing, and every router says so; vllm-nixl serves decode-only
      await agree('pd-sg', '503 model_unavailable scaled-to-zero no ready prefill engine');
      await agree('pd-nx', '200');
      assert.ok((await simStats(nxDecode.url)).pd.local - localBefore >= 5, 'the decode engine ran the prompts itself');

      // then the prefill side
      kube.patch('deployments', 'default', 'sg-prefill', { spec: { replicas: 1 } });
      addReadyPod(kube, 'sg-prefill-0', 'pd-sg', sgPrefill.port, {
        ...role('pd-sg', 'prefill'),
        annotations: { 'sglang.ai/bootstrap-port': String(sgPrefill.port) },
      });
      await agree('pd-sg', '200');
      assert.ok((await simStats(sgPrefill.url)).pd.prefilled >= 5, 'the prefill engine took part in every answer');
      for (const name of ['sg-prefill-0', 'sg-decode-0', 'nx-decode-0']) kube.remove('pods', 'default', name);
      for (const name of ['sg-prefill', 'sg-decode', 'nx-prefill', 'nx-decode']) kube.remove('deployments', 'default', name);
      kubeRouters = {};
      await Promise.all([a.stop(), w.stop(), sgPrefill.stop(), sgDecode.stop()]);
    });
  });

  // in order: each test leaves the shared router with none of its endpoints
  describe('the shared router', { concurrency: 1 }, () => {
    test('model names from the annotation, the model label, --served-model-name and `vllm serve MODEL`; LoRA adapters from llm-router/lora-adapters', async () => {
      const k = sharedKube;
      const r = shared;
      k.create(deployment('by-annotation', 0, {}, { 'llm-router/models': 'ann-1,ann-2' }));
      k.create(deployment('by-label', 0, { labels: { model: 'from-label' } }));
      k.create(deployment('by-served-name', 0, { args: ['--model', 'org/weights', '--served-model-name', 'served-a', 'served-b'] }));
      k.create(deployment('by-serve', 2, { args: ['vllm serve org/Llama-3.1-8B --port 8000'] }));
      // the LoRA adapters of a base model, on its workload (issue 16)
      k.create(
        deployment('lora-base', 0, {}, { 'llm-router/models': 'lbase', 'llm-router/lora-adapters': 'lad=/adapters/lad, not-a-pair' }),
      );
      await until('ready', async () => (await call(`${r.url}/ready`)).status === 200);
      type Listed = { id: string; status: string; parent?: string };
      // the router learns of the workloads by its watch: all eight names, then their states
      const models = await eventually(
        'the eight declared names',
        async () => (await call(`${r.url}/v1/models`)).json<{ data: Listed[] }>().data,
        (listed) => listed.length >= 8,
      );
      const status = Object.fromEntries(models.map((m) => [m.id, m.status]));
      assert.deepEqual(status, {
        'ann-1': 'scaled-to-zero',
        'ann-2': 'scaled-to-zero',
        'from-label': 'scaled-to-zero',
        'served-a': 'scaled-to-zero',
        'served-b': 'scaled-to-zero',
        'org/Llama-3.1-8B': 'loading',
        lbase: 'scaled-to-zero',
        lad: 'scaled-to-zero',
      });
      assert.equal(models.find((m) => m.id === 'lad')?.parent, 'lbase');
      // a declared adapter of a base at zero is 503 like its base; an adapter nobody declares or serves is 404
      assert.deepEqual(await answers([r], 'lad'), ['503 model_unavailable scaled-to-zero']);
      assert.deepEqual(await answers([r], 'not-a-pair'), ['404 model_not_found']);
      await r.proc.waitForOutput(/llm-router\/lora-adapters: \\"not-a-pair\\" must look like NAME=PATH/);
      for (const name of ['by-annotation', 'by-label', 'by-served-name', 'by-serve', 'lora-base']) k.remove('deployments', 'default', name);
      await until('declarations gone', async () => (await call(`${r.url}/v1/models`)).json<{ data: unknown[] }>().data.length === 0);
    });

    test('a pod that turns terminating or not-Ready stops getting new requests while its stream finishes', async () => {
      // the shared router, over the API server that deletes pods gracefully when asked to
      const [kube2, r] = [sharedKube, shared];
      const other = engine; // the pod that stays: 'steady'
      const slow = await startSimHere(['--model', 'd', '--id', 'old', '--ttft-ms', '5', '--itl-ms', '100', '--output-tokens', '20']);
      // the endpoints of this test's two pods (the shared router's others belong to other tests, gone by now)
      const mine = async () => (await engines(r.url)).filter((e) => e.url === slow.url || e.url === other.url);
      kube2.create(deployment('d', 2, { labels: { model: 'd' } }));
      addReadyPod(kube2, 'd-old', 'd', slow.port);
      addReadyPod(kube2, 'd-new', 'd', other.port);
      await until('both ready', async () => (await mine()).filter((e) => e.state === 'ready').length === 2);

      const stream = await streamOn(r.url, 'd', 'old', { max_tokens: 20 });
      const body = stream.body.text();
      kube2.remove('pods', 'default', 'd-old', { graceful: true });
      await until('old pod draining', async () => (await mine()).some((e) => e.state === 'draining'));
      const after = await Promise.all(Array.from({ length: 4 }, () => call(`${r.url}/v1/chat/completions`, { body: chat('d') })));
      assert.deepEqual(
        after.map((x) => x.headers['x-sim-engine']),
        ['steady', 'steady', 'steady', 'steady'],
      );
      const text = await body;
      assert.match(text, /\[DONE\]/, 'the stream on the terminating pod finished');
      kube2.finalizePodDeletion('default', 'd-old');
      await until('old pod gone', async () => (await mine()).length === 1);

      kube2.setPodReady('default', 'd-new', false);
      await until('not-ready pod removed', async () => (await mine()).length === 0);
      assert.deepEqual(await answers([r], 'd'), ['503 model_unavailable loading']);
      kube2.remove('pods', 'default', 'd-new');
      kube2.remove('deployments', 'default', 'd');
      await until('model d gone', async () => (await answers([r], 'd'))[0] === '404 model_not_found');
      await slow.stop();
    });

    test('P/D: pods labelled llm-d.ai/role become the prefill and decode endpoints of one model; llm-router/probe-port moves the probes', async () => {
      const [k, r, prefill, decode] = [sharedKube, shared, pdPrefill, pdDecode];
      // the decode pod's engine port, probed while traffic goes to the decode port (a routing sidecar in a real pod)
      const enginePort = await startSimHere(['--model', 'pd-k8s', '--id', 'k8s-engine-port']);
      const [remoteBefore, prefilledBefore] = [(await simStats(decode.url)).pd.remote, (await simStats(prefill.url)).pd.prefilled];
      k.create(deployment('pd-prefill', 1, { labels: { model: 'pd-k8s', 'llm-d.ai/role': 'prefill' } }));
      k.create(deployment('pd-decode', 1, { labels: { model: 'pd-k8s', 'llm-d.ai/role': 'decode' } }));
      addReadyPod(k, 'pd-prefill-0', 'pd-k8s', prefill.port, { labels: { 'llm-d.ai/role': 'prefill' } });
      addReadyPod(k, 'pd-decode-0', 'pd-k8s', decode.port, {
        labels: { 'llm-d.ai/role': 'decode' },
        annotations: { 'llm-router/probe-port': String(enginePort.port) },
      });
      await waitModelStatus(r.url, 'pd-k8s', 'ready');
      type View = { url: string; role: string; probeUrl?: string };
      const views = (await call(`${r.url}/engines`)).json<{ endpoints: View[] }>().endpoints;
      assert.deepEqual(
        views.map((e) => [e.url, e.role, e.probeUrl]).sort(),
        [
          [`http://127.0.0.1:${decode.port}`, 'decode', `http://127.0.0.1:${enginePort.port}`],
          [`http://127.0.0.1:${prefill.port}`, 'prefill', undefined],
        ].sort(),
      );
      const res = await call(`${r.url}/v1/chat/completions`, { body: chat('pd-k8s') });
      assert.equal(res.status, 200);
      assert.equal(res.headers['x-sim-engine'], 'k8s-decode');
      assert.equal((await simStats(decode.url)).pd.remote, remoteBefore + 1);
      assert.equal((await simStats(prefill.url)).pd.prefilled, prefilledBefore + 1);
      // the probes go to the engine port: when it stops, the decode endpoint fails though its traffic port answers
      await setFault(enginePort.url, { mode: 'refuse' });
      await waitModelStatus(r.url, 'pd-k8s', 'unavailable');
      const refused = await call(`${r.url}/v1/chat/completions`, { body: chat('pd-k8s') });
      assert.equal(refused.status, 503);
      assert.match(refused.json<{ error: { message: string } }>().error.message, /no ready decode engine/);
      for (const name of ['pd-prefill-0', 'pd-decode-0']) k.remove('pods', 'default', name);
      for (const name of ['pd-prefill', 'pd-decode']) k.remove('deployments', 'default', name);
      await until('P/D endpoints gone', async () => (await engines(r.url)).length === 0);
      await enginePort.stop();
    });
  });

  // in order: one API server, whose requests these tests count, which they break and stop
  describe('an API server per router', { concurrency: 1 }, () => {
    test('the periodic resync restarts each watch from its resourceVersion: watches, not lists; a change made meanwhile still arrives', async () => {
      const kube = solo;
      const r = await startK8sRouter(['--k8s-resync-seconds', '1'], kube);
      await until('ready', async () => (await call(`${r.url}/ready`)).status === 200);
      kube.resetRequests();
      const watchesOf = (): number =>
        Object.entries(kube.requests)
          .filter(([k]) => k.startsWith('watch '))
          .reduce((n, [, v]) => n + v, 0);
      // two resync periods for each of the four kinds
      await until('each kind re-watched twice', async () => watchesOf() >= 8, 20_000);
      kube.create(deployment('resync', 0, { labels: { model: 'resync-model' } }));
      await waitModelStatus(r.url, 'resync-model', 'scaled-to-zero');
      const lists = Object.entries(kube.requests)
        .filter(([k]) => k.startsWith('list '))
        .reduce((n, [, v]) => n + v, 0);
      assert.equal(lists, 0, `no re-list: ${JSON.stringify(kube.requests)}`);
      kube.remove('deployments', 'default', 'resync');
      await r.stop();
    });

    test('a pod deleted while the watch was down is gone within one re-list; 410 triggers a re-list, not a loop', async () => {
      const [sim, kube] = [engine, solo];
      kube.create(deployment('w', 1, { labels: { model: 'w' } }));
      addReadyPod(kube, 'w-1', 'w', sim.port);
      const r = await startK8sRouter(['--k8s-resync-seconds', '60'], kube);
      await until('pod routable', async () => (await engines(r.url)).some((e) => e.state === 'ready'));

      kube.dropWatches();
      kube.remove('pods', 'default', 'w-1');
      kube.compactHistory();
      await until('pod gone from /engines', async () => (await engines(r.url)).length === 0, 15_000);
      assert.deepEqual(await answers([r], 'w'), ['503 model_unavailable loading']);

      kube.resetRequests();
      kube.failWatchesWith410(3, 'event');
      kube.dropWatches({ graceful: true }); // watches end cleanly; their resumption meets the 410s
      addReadyPod(kube, 'w-2', 'w', sim.port);
      await until('new pod routable', async () => (await answers([r], 'w'))[0] === '200', 15_000);
      // a bounded wait on purpose: a re-list loop would show as more lists within it
      await sleep(1_500);
      const lists = Object.entries(kube.requests)
        .filter(([k]) => k.startsWith('list '))
        .reduce((n, [, v]) => n + v, 0);
      assert.ok(lists >= 1 && lists <= 8, `re-listed after 410s without looping (${lists} lists: ${JSON.stringify(kube.requests)})`);
      kube.remove('pods', 'default', 'w-2');
      kube.remove('deployments', 'default', 'w');
      await r.stop();
    });

    test('a forbidden kind degrades with a log line and a metric; an API server down at startup keeps /ready 503 and known models served', async () => {
      const kube = solo;
      kube.setForbidden('statefulsets', true);
      const r = await startK8sRouter(['--log-level', 'info'], kube);
      await until('ready despite the forbidden kind', async () => (await call(`${r.url}/ready`)).status === 200);
      await r.proc.waitForOutput('no permission to list/watch statefulsets');
      const metrics = (await call(`${r.url}/metrics`)).text;
      assert.match(metrics, /llm_router_discovery_errors_total\{resource="statefulsets",reason="forbidden"\} [1-9]/);
      assert.match(metrics, /llm_router_discovery_state\{resource="statefulsets",state="forbidden"\} 1/);
      kube.setForbidden('statefulsets', false);
      await r.stop();

      kube.create(deployment('declared-in-cluster', 0, { labels: { model: 'cluster-model' } }));
      await kube.stop();
      const down = await startK8sRouter(['--known-models', 'static-one', '--sync-wait-seconds', '0.5'], kube);
      let pending: Promise<string[]> | undefined;
      try {
        await down.proc.waitForOutput('kubernetes list/watch failed');
        assert.equal((await call(`${down.url}/ready`)).status, 503);
        assert.deepEqual(await answers([down], 'static-one'), ['503 model_unavailable scaled-to-zero']);
        // not listed yet: never a fatal 404 for a model that may exist
        assert.deepEqual(await answers([down], 'cluster-model'), ['503 model_unavailable unavailable']);
        pending = answers([down], 'cluster-model');
      } finally {
        await kube.restart();
      }
      await until('ready once the API server is back', async () => (await call(`${down.url}/ready`)).status === 200, 20_000);
      assert.deepEqual(await answers([down], 'cluster-model'), ['503 model_unavailable scaled-to-zero']);
      assert.ok((await pending)![0]!.startsWith('503'));
      kube.remove('deployments', 'default', 'declared-in-cluster');
      await down.stop();
    });
  });
});
