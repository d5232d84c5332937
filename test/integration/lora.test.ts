// Issue 16 checks: LoRA adapters loaded on demand, against real router processes and LoRA-enabled simulators that
// answer as vLLM does (load and unload paths, adapters in /v1/models with a parent, max_lora in /metrics). Two router
// replicas share the engines: they give the same 404 and 503, and a load the other one made counts as a load. Then a
// router with --engine-kind sglang in front of a simulator that answers as SGLang does (its load and unload paths and
// answers, slots in its server info, adapters named BASE:ADAPTER).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { Client } from 'undici';
import { stopAll } from '../support/process.js';
import { promtoolCheckMetrics } from '../support/prometheus.js';
import {
  call,
  chat,
  endpointState,
  FAST_PROBES,
  firstSnapshot,
  simRequests,
  simStats,
  startRouter,
  type Answer,
  type Running,
} from '../support/router.js';
import { startSimHere, stopSimsHere, type SimHere } from '../support/sim-here.js';
import { eventually, until } from '../support/within.js';
import type { LoraCall } from '../../src/tools/sim/lora.js';
import { withTool } from '../support/tools.js';

interface ModelEntry {
  id: string;
  status: string;
  parent?: string;
  loaded_endpoints?: number;
}

const ADAPTERS = [
  'ad1@base=/adapters/ad1',
  'burst@base=/adapters/burst',
  'bad@base=/adapters/bad',
  'twin@base=/adapters/twin',
  'e1@base2=/adapters/e1',
  'e2@base2=/adapters/e2',
  'e3@base2=/adapters/e3',
  'zad@zero=/adapters/zad',
  'pdad@pdbase=/adapters/pdad',
].join(',');

const lora = (maxLoras: number, ...extra: string[]): string[] => [
  '--enable-lora',
  '--max-loras',
  String(maxLoras),
  '--lora-load-delay-ms',
  '100',
  '--ttft-ms',
  '1',
  '--itl-ms',
  '1',
  ...extra,
];

async function post(router: string, model: string): Promise<Answer> {
  return call(`${router}/v1/chat/completions`, { body: chat(model) });
}

/** The load and unload calls a simulator answered for `name`. */
async function callsFor(sim: SimHere, name: string): Promise<LoraCall[]> {
  return ((await simStats(sim.url)).lora?.calls ?? []).filter((c) => c.name === name);
}

async function models(router: string): Promise<Map<string, ModelEntry>> {
  const list = (await call(`${router}/v1/models`)).json<{ data: ModelEntry[] }>().data;
  return new Map(list.map((m) => [m.id, m]));
}

/** The routers (processes) and the simulators (in this process) a suite started. */
async function stopEverything(): Promise<void> {
  await Promise.all([stopAll(), stopSimsHere()]);
}

/** status, error code and model-state header: what a client is told */
function answerOf(res: Answer): string {
  const code = res.status === 200 ? '' : res.json<{ error: { code: string } }>().error.code;
  return `${res.status} ${code} ${res.headers['x-llm-router-model-state'] ?? ''}`.trim();
}

describe('LoRA adapters on demand', { timeout: 90_000 }, () => {
  let a: SimHere;
  let b: SimHere;
  let c: SimHere;
  let prefill: SimHere;
  let decode: SimHere;
  let router: Running;
  /** a second replica that probes ready engines only every 30 s: it learns of others' loads late */
  let replica: Running;

  before(async () => {
    [a, b, c, prefill, decode] = await Promise.all([
      startSimHere(['--model', 'base', '--id', 'sim-a', ...lora(8, '--lora-missing-paths', '/adapters/bad')]),
      startSimHere(['--model', 'base', '--id', 'sim-b', ...lora(2)]),
      startSimHere(['--model', 'base2', '--id', 'sim-c', ...lora(3, '--lora-modules', 'keep=/adapters/keep')]),
      startSimHere(['--model', 'pdbase', '--id', 'sim-prefill', '--role', 'prefill', ...lora(4)]),
      startSimHere(['--model', 'pdbase', '--id', 'sim-decode', '--role', 'decode', ...lora(4)]),
    ]);
    const args = (probes: readonly string[]): string[] => [
      '--static-backends',
      [a, b, c, prefill, decode].map((s) => s.url).join(','),
      '--static-models',
      'base,base,base2,pdbase,pdbase',
      '--static-backend-roles',
      'both,both,both,prefill,decode',
      '--lora-adapters',
      ADAPTERS,
      '--known-models',
      'zero',
      ...probes,
    ];
    [router, replica] = await Promise.all([
      startRouter(args(FAST_PROBES)),
      startRouter(args([...FAST_PROBES, '--probe-ready-interval', '30'])),
    ]);
    // every engine ready, and its adapter slots scraped from its /metrics (max_lora), on both replicas
    for (const r of [router, replica]) {
      await eventually(
        `engines ready with their slots at ${r.url}`,
        async () => (await call(`${r.url}/engines`)).json<{ endpoints: { state: string; adapterSlots: number | null }[] }>().endpoints,
        (list) => list.length === 5 && list.every((e) => e.state === 'ready' && e.adapterSlots !== null),
      );
    }
  });
  after(stopEverything);

  test('an undeclared, unserved adapter is 404 and a declared one of a base at zero is 503 scaled-to-zero, on both replicas', async () => {
    for (const r of [router, replica]) {
      assert.equal(answerOf(await post(r.url, 'nope')), '404 model_not_found');
      assert.equal(answerOf(await post(r.url, 'zad')), '503 model_unavailable scaled-to-zero');
      const list = await models(r.url);
      const zad = list.get('zad');
      assert.deepEqual([zad?.parent, zad?.loaded_endpoints, zad?.status], ['zero', 0, 'scaled-to-zero']);
      assert.equal(list.get('nope'), undefined);
      // the engine's own adapter (--lora-modules) is served, though no source declares it
      assert.equal(list.get('keep')?.status, 'ready');
    }
    // nothing was asked of any engine
    for (const s of [a, b, c]) assert.deepEqual((await simStats(s.url)).lora?.calls, []);
  });

  test('a declared adapter no engine holds: loaded once with its declared path, then served there with no new load', async () => {
    const before = (await models(router.url)).get('ad1');
    assert.equal(before?.status, 'ready', 'a declared adapter of a ready base is ready: the first request loads it');
    assert.equal(before?.loaded_endpoints, 0);
    const first = await post(router.url, 'ad1');
    assert.equal(first.status, 200, first.text);
    assert.equal(first.json<{ model: string }>().model, 'ad1');
    // the endpoint with the most free slots took it
    assert.deepEqual(await callsFor(a, 'ad1'), [{ op: 'load', name: 'ad1', path: '/adapters/ad1', status: 200 }]);
    assert.deepEqual(await callsFor(b, 'ad1'), []);
    for (let i = 0; i < 3; i++) assert.equal((await post(router.url, 'ad1')).headers['x-sim-engine'], 'sim-a');
    assert.equal((await callsFor(a, 'ad1')).length, 1, 'no new load');
    assert.equal((await simStats(a.url)).lora?.requests.ad1, 4);
    const after = (await models(router.url)).get('ad1');
    assert.deepEqual([after?.status, after?.loaded_endpoints, after?.parent], ['ready', 1, 'base']);
  });

  test('five concurrent first requests for one adapter: one load call', async () => {
    const answers = await Promise.all(Array.from({ length: 5 }, () => post(router.url, 'burst')));
    assert.deepEqual(
      answers.map((r) => r.status),
      [200, 200, 200, 200, 200],
    );
    const calls = [...(await callsFor(a, 'burst')), ...(await callsFor(b, 'burst'))];
    assert.deepEqual(calls, [{ op: 'load', name: 'burst', path: '/adapters/burst', status: 200 }]);
  });

  test('slots full: the least recently used adapter the router loaded is unloaded, never the one the engine started with', async () => {
    // sim-c has 3 slots and was started with `keep`
    for (const m of ['e1', 'e2', 'e1']) assert.equal((await post(router.url, m)).status, 200);
    assert.deepEqual((await simStats(c.url)).lora?.loaded, ['keep', 'e1', 'e2']);
    // e2 is the least recently used now: it gives up its slot for e3
    assert.equal((await post(router.url, 'e3')).status, 200);
    const lora = (await simStats(c.url)).lora;
    assert.deepEqual(
      lora?.calls.filter((x) => x.op === 'unload'),
      [{ op: 'unload', name: 'e2', path: null, status: 200 }],
    );
    assert.deepEqual(lora?.loaded, ['keep', 'e1', 'e3']);
    const list = await models(router.url);
    assert.deepEqual(
      ['e1', 'e2', 'e3', 'keep'].map((m) => list.get(m)?.loaded_endpoints),
      [1, 0, 1, 1],
    );
    // the operator's timeline shows the loads and the unload
    const { timeline } = await firstSnapshot<{ timeline: Record<string, unknown>[] }>(router.url);
    assert.ok(timeline.some((e) => e.type === 'adapter-unload' && e.adapter === 'e2' && e.endpoint === c.url && e.reason === 'evicted'));
    assert.ok(timeline.some((e) => e.type === 'adapter-load' && e.adapter === 'e3' && e.result === 'loaded'));
  });

  test('a load that fails: 502 adapter_load_failed with the engine status, its words in the log; the next request tries another endpoint', async (t) => {
    // the router places the load on the least loaded engine as it scraped them (sim-a: more free slots): a scrape taken
    // while an earlier test's request ran on sim-a would send it to sim-b. Wait for scrapes taken after they ended
    const done = Date.now();
    await eventually(
      'the router sees sim-a and sim-b idle',
      async () =>
        (await call(`${router.url}/engines`))
          .json<{ endpoints: { url: string; load: { running: number; waiting: number; at: string } | null }[] }>()
          .endpoints.filter((e) => e.url === a.url || e.url === b.url)
          .map((e) => e.load),
      (loads) => loads.every((l) => l === null || (Date.parse(l.at) > done && l.running + l.waiting === 0)),
    );
    const failed = await post(router.url, 'bad');
    assert.equal(failed.status, 502, failed.text);
    const error = failed.json<{ error: { code: string; message: string } }>().error;
    assert.equal(error.code, 'adapter_load_failed');
    // the engine's words and address are the operator's: the log has them, the client the status
    assert.match(error.message, /could not load the adapter "bad" \(it answered 404\)/);
    assert.doesNotMatch(failed.text, /No adapter found|\/adapters\/bad|127\.0\.0\.1/);
    assert.ok(
      router.proc
        .output()
        .split('\n')
        .some((l) => l.includes('adapter load failed') && l.includes('No adapter found for /adapters/bad')),
    );
    const next = await post(router.url, 'bad');
    assert.equal(next.status, 200, next.text);
    assert.equal(next.headers['x-sim-engine'], 'sim-b');
    assert.deepEqual(
      (await callsFor(a, 'bad')).map((x) => x.status),
      [404],
    );
    assert.deepEqual(
      (await callsFor(b, 'bad')).map((x) => x.status),
      [200],
    );
    const metrics = (await call(`${router.url}/metrics`)).text;
    assert.match(metrics, /^llm_router_adapter_loads_total\{adapter="bad",result="failed"\} 1$/m);
    assert.match(metrics, /^llm_router_adapter_loads_total\{adapter="bad",result="loaded"\} 1$/m);
    assert.match(metrics, /^llm_router_errors_total\{model="bad",code="adapter_load_failed"\} 1$/m);
    // loads, unloads (e2), their durations, requests per adapter: promtool finds nothing; no name a client made up
    assert.match(metrics, /^llm_router_adapter_unloads_total\{adapter="e2",reason="evicted"\} 1$/m);
    assert.match(metrics, /^llm_router_adapter_requests_total\{adapter="ad1",waited="true"\} 1$/m);
    assert.doesNotMatch(metrics, /nope/);
    await withTool(t, 'promtool', 'promtool check metrics finds nothing', async () => {
      assert.deepEqual(await promtoolCheckMetrics(metrics), { code: 0, output: '' });
    });
  });

  test('two replicas load the same adapter on one engine: the second gets 400 "already loaded", which is a load', async () => {
    assert.equal((await post(router.url, 'twin')).status, 200);
    const done = Date.now();
    // the replica places a load by the engines' load as it scraped them: a scrape of sim-a taken while the router's
    // request ran there would send it to sim-b instead. Wait for one taken after that request ended
    await eventually(
      'the replica sees sim-a idle',
      async () =>
        (await call(`${replica.url}/engines`))
          .json<{ endpoints: { url: string; load: { running: number; waiting: number; at: string } | null }[] }>()
          .endpoints.find((e) => e.url === a.url)?.load,
      (load) => load === null || load === undefined || (Date.parse(load.at) > done && load.running + load.waiting === 0),
    );
    // the replica has not probed since: it does not know sim-a holds twin, and asks it to load it too
    const second = await post(replica.url, 'twin');
    assert.equal(second.status, 200, second.text);
    assert.equal(second.headers['x-sim-engine'], 'sim-a');
    assert.deepEqual(
      (await callsFor(a, 'twin')).map((x) => x.status),
      [200, 400],
    );
    assert.equal((await models(replica.url)).get('twin')?.loaded_endpoints, 1);
    assert.match(
      (await call(`${replica.url}/metrics`)).text,
      /^llm_router_adapter_loads_total\{adapter="twin",result="already-loaded"\} 1$/m,
    );
  });

  test('an adapter of a P/D model is loaded on the prefill and the decode endpoint, and both serve it', async () => {
    const res = await call(`${router.url}/v1/chat/completions`, { body: chat('pdad', { stream: true }) });
    assert.equal(res.status, 200, res.text);
    assert.match(res.text, /data: \[DONE\]/);
    for (const s of [prefill, decode])
      assert.deepEqual(await callsFor(s, 'pdad'), [{ op: 'load', name: 'pdad', path: '/adapters/pdad', status: 200 }]);
    const [p, d] = await Promise.all([simRequests(prefill.url), simRequests(decode.url)]);
    assert.equal(JSON.parse(p.at(-1)?.body.toString() ?? '{}').model, 'pdad');
    assert.equal(JSON.parse(d.at(-1)?.body.toString() ?? '{}').model, 'pdad');
    assert.equal((await simStats(decode.url)).pd.remote, 1, 'the decode engine got the prompt from the prefill engine');
  });

  test('an engine that restarts without the adapter: learned from its /v1/models, and loaded again on the next request', async () => {
    // down until the router has seen it go (not for a fixed time); the engine is in this process, so it is told directly
    await a.engine.setFault('refuse');
    await endpointState(router.url, a.url, 'failed');
    await a.engine.setFault('none');
    // back up with only its start-up adapters: the router learns that from its listing, not from what it loaded
    await endpointState(router.url, a.url, 'ready');
    await until('ad1 no longer listed', async () => (await models(router.url)).get('ad1')?.loaded_endpoints === 0);
    const res = await post(router.url, 'ad1');
    assert.equal(res.status, 200, res.text);
    const loads = [...(await callsFor(a, 'ad1')), ...(await callsFor(b, 'ad1'))].filter((x) => x.op === 'load');
    assert.equal(loads.length, 2, `loaded again, once: ${JSON.stringify(loads)}`);
  });
});

/** A call on a connection of its own, so that under --workers the calls spread over the workers. */
function fresh(url: string, body?: string): Promise<Answer> {
  return call(url, { ...(body !== undefined ? { body } : {}), newConnection: true });
}

describe('LoRA adapters under --workers 2', { timeout: 90_000 }, () => {
  let sim: SimHere;
  /** one slot; a stream of cx lasts ~4 s (40 tokens, 100 ms apart); other answers are one token */
  let crossSim: SimHere;
  /** one router (a primary and two workers) in front of both engines: each test asks for its own engine's adapters */
  let router: Running;

  before(async () => {
    [sim, crossSim] = await Promise.all([
      startSimHere(['--model', 'wbase', '--id', 'sim-w', ...lora(4)]),
      startSimHere(['--model', 'cbase', '--id', 'sim-cross', ...lora(1), '--itl-ms', '100', '--output-tokens', '40']),
    ]);
    router = await startRouter([
      '--workers',
      '2',
      '--static-backends',
      `${sim.url},${crossSim.url}`,
      '--static-models',
      'wbase,cbase',
      '--lora-adapters',
      'wk@wbase=/adapters/wk,wz@wzero=/adapters/wz,cx@cbase=/adapters/cx,cy@cbase=/adapters/cy',
      '--known-models',
      'wzero',
      ...FAST_PROBES,
    ]);
    await until('two workers listening', () => router.proc.output().split('llm-router listening').length - 1 === 2);
  });
  after(async () => {
    // SIGTERM, so that the primary stops its workers and waits for them (stopAll's SIGKILL leaves that to them)
    await router?.stop();
    await stopEverything();
  });

  test('every worker answers alike; first requests that land on both workers are all served, with one load or a second one answered already-loaded', async () => {
    const listing = async (): Promise<string> => {
      const list = (await fresh(`${router.url}/v1/models`)).json<{ data: ModelEntry[] }>().data;
      return JSON.stringify(list.filter((m) => m.id.startsWith('w')).map((m) => [m.id, m.status, m.loaded_endpoints ?? null]));
    };
    /** six connections in a row give `expected`: every worker says it */
    const everyWorkerLists = (what: string, expected: readonly (readonly [string, string, number | null])[]) =>
      until(what, async () => {
        for (let i = 0; i < 6; i++) if ((await listing()) !== JSON.stringify(expected)) return false;
        return true;
      });
    await everyWorkerLists('both workers see the base ready', [
      ['wbase', 'ready', null],
      ['wk', 'ready', 0],
      ['wz', 'scaled-to-zero', 0],
      ['wzero', 'scaled-to-zero', null],
    ]);
    // each name on six connections in a row, which the primary hands to the workers in turn
    for (let i = 0; i < 6; i++)
      assert.equal(answerOf(await fresh(`${router.url}/v1/chat/completions`, chat('nope'))), '404 model_not_found');
    for (let i = 0; i < 6; i++)
      assert.equal(answerOf(await fresh(`${router.url}/v1/chat/completions`, chat('wz'))), '503 model_unavailable scaled-to-zero');
    // both workers gave each answer (their access lines name them): "alike" compared two workers, not one twice
    const access = router.proc
      .output()
      .split('\n')
      .filter((l) => l.includes('"msg":"request"'));
    for (const name of ['nope', 'wz']) {
      const by = new Set(access.filter((l) => l.includes(`"model":"${name}"`)).map((l) => (JSON.parse(l) as { worker: number }).worker));
      assert.equal(by.size, 2, `${name} answered by workers ${[...by].join(', ')}`);
    }
    const answers = await Promise.all(Array.from({ length: 8 }, () => fresh(`${router.url}/v1/chat/completions`, chat('wk'))));
    assert.deepEqual(
      answers.map((r) => r.status),
      Array(8).fill(200),
    );
    const loads = await callsFor(sim, 'wk');
    // each worker loads at most once; the engine answers a second load of a loaded adapter 400, which counts as loaded
    assert.ok(loads.length >= 1 && loads.length <= 2, JSON.stringify(loads));
    assert.deepEqual(
      loads.map((l) => l.status),
      loads.length === 1 ? [200] : [200, 400],
    );
    await everyWorkerLists('every worker lists wk loaded once', [
      ['wbase', 'ready', null],
      ['wk', 'ready', 1],
      ['wz', 'scaled-to-zero', 0],
      ['wzero', 'scaled-to-zero', null],
    ]);
    // the operator's timeline: a load made by one worker is on every worker's, marked with the worker that made it
    const loaders = new Set<number>();
    await until('every worker shows every load of wk', async () => {
      const workers = new Map<number, { own: number; relayed: number[] }>();
      for (let i = 0; i < 4; i++) {
        const s = await eventsSnapshot(router.url);
        const loadsOfWk = s.timeline.filter((e) => e.type === 'adapter-load' && e.adapter === 'wk');
        workers.set(s.state.instance.worker as number, {
          own: loadsOfWk.filter((e) => e.worker === undefined).length,
          relayed: loadsOfWk.flatMap((e) => (e.worker === undefined ? [] : [e.worker])),
        });
      }
      if (workers.size !== 2) return false;
      for (const [id, w] of workers) {
        if (w.own > 0) loaders.add(id);
        for (const from of w.relayed) assert.notEqual(from, id, 'a worker is never told its own news');
      }
      // every load appears once on each worker: as its own where it was made, relayed (with that worker) elsewhere
      return [...workers.values()].every((w) => w.own + w.relayed.length === loads.length);
    });
    assert.ok(loaders.size >= 1);
  });

  test('an adapter in use on one worker is never unloaded by another worker that needs its slot', async () => {
    await until('the engine ready on every worker', async () => {
      for (let i = 0; i < 4; i++) if ((await models(router.url)).get('cbase')?.status !== 'ready') return false;
      return true;
    });
    const short = (model: string) => JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 });
    /** A connection of its own, and the worker it reached (named by the access line of a 404 sent on it). */
    let probes = 0;
    const pinned = async (): Promise<{ client: Client; worker: number }> => {
      const client = new Client(router.url);
      const id = `pin-${probes++}`;
      const res = await client.request({
        path: '/v1/chat/completions',
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-request-id': id },
        body: short('no-such-model'),
      });
      await res.body.dump();
      await router.proc.waitForOutput(`"requestId":"${id}"`);
      const line = router.proc
        .output()
        .split('\n')
        .find((l) => l.includes(`"requestId":"${id}"`)) as string;
      return { client, worker: (JSON.parse(line) as { worker: number }).worker };
    };
    const on = async (worker: number): Promise<Client> => {
      for (let i = 0; i < 12; i++) {
        const p = await pinned();
        if (p.worker === worker) return p.client;
        await p.client.close();
      }
      throw new Error(`no connection reached worker ${worker}`);
    };
    const post = async (client: Client, body: string) => {
      const res = await client.request({
        path: '/v1/chat/completions',
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
      });
      return { status: res.statusCode, text: await res.body.text() };
    };

    // worker L loads cx (it may unload it: it loaded it)
    const first = await pinned();
    const loader = first.worker;
    const loaded = await post(first.client, short('cx'));
    assert.equal(loaded.status, 200, loaded.text);
    assert.deepEqual(await callsFor(crossSim, 'cx'), [{ op: 'load', name: 'cx', path: '/adapters/cx', status: 200 }]);
    await first.client.close();

    // the other worker streams on cx ...
    const other = await on(loader === 1 ? 2 : 1);
    await until('the other worker sees cx on the engine', async () => {
      const r = await post(other, short('cx'));
      return r.status === 200;
    });
    const streamRes = await other.request({
      path: '/v1/chat/completions',
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'cx', messages: [{ role: 'user', content: 'a long one' }], stream: true }),
    });
    assert.equal(streamRes.statusCode, 200);
    const streamed = streamRes.body.text();
    await until('the stream running on the engine', async () => (await simStats(crossSim.url)).running === 1);

    // ... while the loader needs the one slot for cy: cx is idle there, but not on the other worker
    const loaderClient = await on(loader);
    const second = await post(loaderClient, short('cy'));
    assert.equal(second.status, 200, second.text);
    // (the other worker may have asked for its own load of cx, answered 400 already loaded)
    assert.deepEqual(
      (await callsFor(crossSim, 'cx')).filter((c) => c.op === 'unload'),
      [],
      'cx was not unloaded while the other worker streamed on it',
    );
    assert.match(await streamed, /data: \[DONE\]/);
    await Promise.all([other.close(), loaderClient.close()]);
  });
});

interface EventsSnapshot {
  state: { instance: { worker: number | null } };
  timeline: { type: string; adapter?: string; worker?: number }[];
}

/** The first event of GET /events (the state and the recent timeline), on a connection of its own. */
function eventsSnapshot(base: string): Promise<EventsSnapshot> {
  return new Promise((resolve, reject) => {
    const req = http.get(`${base}/events`, { agent: false, timeout: 10_000 }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        text += chunk;
        const m = /event: snapshot\ndata: (.*)\n\n/.exec(text);
        if (!m) return;
        res.destroy();
        resolve(JSON.parse(m[1] as string) as EventsSnapshot);
      });
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error('no snapshot from /events')));
    req.on('error', reject);
  });
}

/** A router in front of the SGLang-flavoured simulator, with its two declared adapters. */
function sglangRouter(sim: SimHere, ...extra: string[]): string[] {
  return [
    '--engine-kind',
    'sglang',
    '--static-backends',
    sim.url,
    '--static-models',
    'sbase',
    '--lora-adapters',
    's1@sbase=/adapters/s1,s2@sbase=/adapters/s2',
    ...FAST_PROBES,
    ...extra,
  ];
}

describe('LoRA adapters on SGLang engines', { timeout: 60_000 }, () => {
  let sim: SimHere;
  let router: Running;

  before(async () => {
    // two adapters run in one batch, but it registers one at most: the router's slots there are 1
    sim = await startSimHere(['--engine-kind', 'sglang', '--model', 'sbase', '--id', 'sim-sglang', ...lora(2, '--max-loaded-loras', '1')]);
    router = await startRouter(sglangRouter(sim));
    await eventually(
      'the SGLang engine ready',
      async () => (await call(`${router.url}/engines`)).json<{ endpoints: { state: string }[] }>().endpoints,
      (list) => list.length === 1 && list[0]?.state === 'ready',
    );
  });
  after(stopEverything);

  test('the simulator is strict as SGLang: the adapter name alone is no model, an adapter not loaded is a 400, no vLLM paths', async () => {
    assert.equal((await post(sim.url, 's1')).status, 404);
    const unloaded = await post(sim.url, 'sbase:s1');
    assert.equal(unloaded.status, 400, unloaded.text);
    assert.match(unloaded.text, /not loaded: s1/);
    const vllmPath = await call(`${sim.url}/v1/load_lora_adapter`, {
      body: JSON.stringify({ lora_name: 's1', lora_path: '/adapters/s1' }),
    });
    // no such route: the simulator answers a POST to a path it does not serve 405
    assert.equal(vllmPath.status, 405);
    assert.deepEqual((await simStats(sim.url)).lora?.calls, []);
  });

  test('a declared adapter no engine holds: loaded once with its declared path, the engine sees it as sbase:s1, then no new load', async () => {
    const first = await post(router.url, 's1');
    assert.equal(first.status, 200, first.text);
    // the client sees the name the engine answers with, as for aliases
    assert.equal(first.json<{ model: string }>().model, 'sbase:s1');
    assert.deepEqual(await callsFor(sim, 's1'), [{ op: 'load', name: 's1', path: '/adapters/s1', status: 200 }]);
    assert.equal((await post(router.url, 's1')).status, 200);
    assert.equal((await callsFor(sim, 's1')).length, 1, 'no new load');
    const sent = (await simRequests(sim.url)).slice(-2).map((r) => (JSON.parse(r.body.toString()) as { model: string }).model);
    assert.deepEqual(sent, ['sbase:s1', 'sbase:s1']);
    assert.equal((await simStats(sim.url)).lora?.requests.s1, 2);
    // its slots come from its server info (max_loaded_loras), as it exports no adapter metric
    const engines = (await call(`${router.url}/engines`)).json<{ endpoints: { adapterSlots: number | null }[] }>().endpoints;
    assert.equal(engines[0]?.adapterSlots, 1);
    assert.equal((await models(router.url)).get('s1')?.loaded_endpoints, 1);
  });

  test('slots full: the idle adapter the router loaded is unloaded first, then the other one loaded and served', async () => {
    const second = await post(router.url, 's2');
    assert.equal(second.status, 200, second.text);
    const lora = (await simStats(sim.url)).lora;
    assert.deepEqual(lora?.calls.slice(-2), [
      { op: 'unload', name: 's1', path: null, status: 200 },
      { op: 'load', name: 's2', path: '/adapters/s2', status: 200 },
    ]);
    assert.deepEqual(lora?.loaded, ['s2']);
    const list = await models(router.url);
    assert.deepEqual(
      ['s1', 's2'].map((m) => list.get(m)?.loaded_endpoints),
      [0, 1],
    );
  });

  test('an engine that lost an adapter answers 400 "not loaded": the router loads it again before the client hears of it', async () => {
    // a replica that re-reads the engine's listing only every 30 s still believes the engine holds s2
    const late = await startRouter(sglangRouter(sim, '--probe-ready-interval', '30'));
    await until('the late replica sees s2 on the engine', async () => (await models(late.url)).get('s2')?.loaded_endpoints === 1);
    // another replica (here: the test) unloads it behind its back
    const unload = await call(`${sim.url}/unload_lora_adapter`, { body: JSON.stringify({ lora_name: 's2' }) });
    assert.equal(unload.status, 200, unload.text);
    const res = await post(late.url, 's2');
    assert.equal(res.status, 200, res.text);
    // two calls reached the engine: the one it refused (not loaded), and the one after the load
    const sent = (await simRequests(sim.url)).filter((r) => r.path === '/v1/chat/completions').slice(-2);
    assert.deepEqual(
      sent.map((r) => (JSON.parse(r.body.toString()) as { model: string }).model),
      ['sbase:s2', 'sbase:s2'],
    );
    assert.deepEqual((await callsFor(sim, 's2')).slice(-1), [{ op: 'load', name: 's2', path: '/adapters/s2', status: 200 }]);
    // any other 400 is the client's: held only to be judged, then passed on as the engine sent it, with no load
    const loads = (await callsFor(sim, 's2')).length;
    const refused = await call(`${late.url}/v1/chat/completions`, { body: chat('s2'), headers: { 'x-sim-status': '400' } });
    assert.equal(refused.status, 400);
    assert.match(refused.text, /Simulated failure for this request \(x-sim-status 400\)/);
    assert.equal((await callsFor(sim, 's2')).length, loads);
    await late.stop();
  });
});
