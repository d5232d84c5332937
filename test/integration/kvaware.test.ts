// kvaware end to end: two simulators (in this process: the routers are the subject) publishing their prefix caches'
// KV-cache events over zeromq, two router replicas (processes) following them. A prompt cached on B goes to B through
// either replica, 10 of 10 times; once B has evicted it and A holds it, both replicas send it to A. Nothing is shared
// between the replicas but the engines' own events.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { call, FAST_PROBES, firstSnapshot, type Running, startRouter } from '../support/router.js';
import { stopAll } from '../support/process.js';
import { type SimHere, startSimHere, stopSimsHere } from '../support/sim-here.js';
import { kvawareArgsHere } from '../support/simC-kv.js';
import { eventually } from '../support/within.js';

const MODEL = 'kv-model';

/** the routers first (they follow the engines' events), then the in-process engines */
async function stopEverything(): Promise<void> {
  await stopAll();
  await stopSimsHere();
}

function words(seed: string, n: number): string {
  return Array.from({ length: n }, (_, i) => `${seed}${i}`).join(' ');
}

async function complete(base: string, prompt: string): Promise<string> {
  const res = await call(`${base}/v1/completions`, { body: JSON.stringify({ model: MODEL, prompt, max_tokens: 1 }) });
  assert.equal(res.status, 200, res.text);
  return String(res.headers['x-sim-engine']);
}

interface EngineView {
  readonly url: string;
  readonly kvEvents: { readonly connected: boolean; readonly blocks: number } | null;
}

async function blocksOn(router: Running): Promise<Map<string, number>> {
  const res = await call(`${router.url}/engines`);
  const body = res.json<{ endpoints: EngineView[] }>();
  return new Map(body.endpoints.map((e) => [e.url, e.kvEvents?.connected ? e.kvEvents.blocks : -1]));
}

/**
 * Engines A and B publishing KV-cache events (with `extra` simulator flags, B with `extraB` if given), and `replicas`
 * kvaware routers following both.
 * `first`, if given, is run on the engines before the routers start (the routers then learn its blocks from the replay on
 * joining, and are waited for only until their event streams are connected); else both engines are empty.
 */
async function twoEngines(
  extra: readonly string[],
  replicas: number,
  opts: { extraB?: readonly string[]; first?: (a: SimHere, b: SimHere) => void } = {},
): Promise<{ a: SimHere; b: SimHere; routers: Running[] }> {
  const { first, extraB = extra } = opts;
  const simArgs = ['--model', MODEL, '--kv-events-port', '0', '--kv-events-replay-port', '0'];
  const [a, b] = await Promise.all([startSimHere([...simArgs, ...extra, '--id', 'A']), startSimHere([...simArgs, ...extraB, '--id', 'B'])]);
  first?.(a, b);
  const empty = first === undefined ? 0 : -1;
  const routers = await Promise.all(
    Array.from({ length: replicas }, () => startRouter([...FAST_PROBES, ...kvawareArgsHere([a, b], MODEL)])),
  );
  await Promise.all(
    routers.map((r) =>
      eventually(
        'both engines ready and their event streams connected',
        () => blocksOn(r),
        (m) => (empty === 0 ? m.get(a.url) === 0 && m.get(b.url) === 0 : (m.get(a.url) ?? -1) >= 0 && (m.get(b.url) ?? -1) >= 0),
      ),
    ),
  );
  return { a, b, routers };
}

describe("kvaware: routing by the engines' KV-cache events", { timeout: 90_000 }, () => {
  let a: SimHere;
  let b: SimHere;
  const routers: Running[] = [];

  before(async () => {
    // 64 blocks of 16 tokens each: a 300-token prompt is 18 blocks, four others push it out
    const started = await twoEngines(['--prefix-cache-blocks', '64'], 2);
    a = started.a;
    b = started.b;
    routers.push(...started.routers);
  });
  after(stopEverything);

  test('a prompt cached on B goes to B through each replica, 10 of 10; after B evicts it and A holds it, to A', async () => {
    const shared = words('doc', 300);
    assert.equal(await complete(b.url, shared), 'B');
    for (const r of routers)
      await eventually(
        "B's stored blocks indexed",
        () => blocksOn(r),
        (m) => (m.get(b.url) ?? 0) >= 18 && m.get(a.url) === 0,
      );
    for (const r of routers)
      for (let i = 0; i < 10; i++) assert.equal(await complete(r.url, `${shared} question ${i} ${words('tail', 20)}`), 'B', `request ${i}`);

    // B's cache fills with other prompts: the shared prefix is evicted (BlockRemoved); A then caches it
    for (let i = 0; i < 5; i++) await complete(b.url, words(`other${i}x`, 300));
    assert.equal(await complete(a.url, shared), 'A');
    for (const r of routers)
      await eventually(
        'the eviction on B and the store on A indexed',
        () => blocksOn(r),
        (m) => (m.get(a.url) ?? 0) >= 18,
      );
    for (const r of routers) for (let i = 0; i < 10; i++) assert.equal(await complete(r.url, `${shared} again ${i}`), 'A', `request ${i}`);

    const metrics = (await call(`${routers[0]?.url}/metrics`)).text;
    assert.match(metrics, /llm_router_kv_events_total\{type="BlockStored"\} [1-9]/);
    assert.match(metrics, /llm_router_kv_events_total\{type="BlockRemoved"\} [1-9]/);
    assert.match(metrics, /llm_router_kvaware_matched_ratio_count [1-9]/);
  });

  test('a request whose tokenizer fails is routed by prefixaware and answered, counted as a fallback', async () => {
    // a prompt of many strings is a batch: it has no one token list, so kvaware cannot match it
    const res = await call(`${routers[0]?.url}/v1/completions`, {
      body: JSON.stringify({ model: MODEL, prompt: ['one', 'two'], max_tokens: 1 }),
    });
    assert.equal(res.status, 200, res.text);
    const metrics = (await call(`${routers[0]?.url}/metrics`)).text;
    assert.match(metrics, /llm_router_kvaware_fallback_total\{reason="unsupported-body"\} [1-9]/);
  });
});

interface JoinReplayView {
  readonly firstSeq: number | null;
  readonly lastSeq: number | null;
  readonly batches: number;
  readonly blocks: number;
  readonly complete: boolean;
  readonly error: string | null;
}

async function joinReplayOf(router: Running, url: string): Promise<JoinReplayView | null | undefined> {
  const res = await call(`${router.url}/engines`);
  const e = res
    .json<{ endpoints: { url: string; kvEvents: { ranks: { joinReplay: JoinReplayView | null }[] } | null }[] }>()
    .endpoints.find((x) => x.url === url);
  return e?.kvEvents?.ranks[0]?.joinReplay;
}

describe('kvaware: a router replica started after the engines cached prompts', { timeout: 90_000 }, () => {
  let x: SimHere;
  let y: SimHere;

  before(async () => {
    const simArgs = ['--model', MODEL, '--kv-events-port', '0', '--kv-events-replay-port', '0', '--prefix-cache-blocks', '1000'];
    [x, y] = await Promise.all([startSimHere([...simArgs, '--id', 'X']), startSimHere([...simArgs, '--id', 'Y'])]);
  });
  after(stopEverything);

  test("asks each engine's replay socket on joining, and sends the next turns of ten prompts cached on X to X", async () => {
    // ten conversations' first turns, cached on X before any router follows its events (nobody receives them)
    const firsts = Array.from({ length: 10 }, (_, i) => words(`conv${i}x`, 300));
    for (const p of firsts) assert.equal(await complete(x.url, p), 'X');
    const router = await startRouter([...FAST_PROBES, ...kvawareArgsHere([x, y], MODEL)]);
    const join = await eventually(
      "the replay of X's buffer, asked on joining",
      () => joinReplayOf(router, x.url),
      (j) => j !== null && j !== undefined,
    );
    assert.ok(join);
    assert.equal(join.complete, true, JSON.stringify(join));
    assert.equal(join.firstSeq, 0);
    assert.ok(join.batches >= 10 && join.blocks >= 10 * 18, JSON.stringify(join));
    assert.equal(join.error, null);
    await eventually(
      'Y joined too (nothing buffered)',
      () => joinReplayOf(router, y.url),
      (j) => j?.complete === true && j.batches === 0,
    );
    // before any request: X published nothing since the router started, and its blocks are indexed all the same
    assert.ok(((await blocksOn(router)).get(x.url) ?? 0) >= 10 * 18, 'indexed from the replay alone');
    let onX = 0;
    for (const [i, p] of firsts.entries()) if ((await complete(router.url, `${p} next turn ${i} ${words('more', 20)}`)) === 'X') onX++;
    assert.ok(onX >= 9, `${onX} of 10 next turns went to X`);
  });
});

describe("kvaware on the operator's page (GET /events)", { timeout: 90_000 }, () => {
  let sim: SimHere;
  let router: Running;

  before(async () => {
    // a second engine: with one candidate there is nothing to decide and nothing is tokenized
    const simArgs = ['--model', MODEL, '--kv-events-port', '0', '--kv-events-replay-port', '0'];
    const [one, other] = await Promise.all([startSimHere([...simArgs, '--id', 'A']), startSimHere([...simArgs, '--id', 'B'])]);
    sim = one;
    router = await startRouter([...FAST_PROBES, ...kvawareArgsHere([sim, other], MODEL)]);
    await eventually(
      'the event stream connected',
      () => blocksOn(router),
      (m) => m.get(sim.url) === 0,
    );
  });
  after(stopEverything);

  test("the state's kv part: the endpoint's stream, and the model's decisions by KV match and by fallback", async () => {
    const shared = words('page', 100);
    await complete(sim.url, shared);
    await eventually(
      'its blocks indexed',
      () => blocksOn(router),
      (m) => (m.get(sim.url) ?? 0) >= 6,
    );
    for (let i = 0; i < 3; i++) {
      const res = await call(`${router.url}/v1/completions`, {
        body: JSON.stringify({ model: MODEL, prompt: `${shared} q${i}`, max_tokens: 1 }),
        headers: { 'x-request-id': `kv-q${i}` },
      });
      assert.equal(res.status, 200, res.text);
    }
    const batch = await call(`${router.url}/v1/completions`, {
      body: JSON.stringify({ model: MODEL, prompt: ['a', 'b'], max_tokens: 1 }),
      headers: { 'x-request-id': 'kv-batch' },
    });
    assert.equal(batch.status, 200);

    // each access-log line says how its request was routed: the policy, the blocks matched of the prompt's or why none
    await router.proc.waitForOutput('"requestId":"kv-batch"');
    const lines = router.proc
      .output()
      .split('\n')
      .filter((l) => l.includes('"msg":"request"'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const line = (id: string) => lines.find((l) => l.requestId === id) as Record<string, unknown>;
    for (let i = 0; i < 3; i++) {
      const l = line(`kv-q${i}`);
      assert.equal(l.policy, 'kvaware');
      assert.equal(l.endpoint, sim.url);
      assert.ok((l.matchedBlocks as number) >= 6 && (l.matchedBlocks as number) <= (l.blocks as number), JSON.stringify(l));
      assert.equal(l.fallback, undefined);
    }
    assert.equal(line('kv-batch').policy, 'kvaware');
    assert.equal(line('kv-batch').fallback, 'unsupported-body');

    const kv = (await firstSnapshot<{ state: { kv: KvPart | null } }>(router.url)).state.kv;
    assert.ok(kv, 'kvaware is in use: the state has its kv part');
    const e = kv.endpoints.find((x) => x.url === sim.url);
    assert.ok(e?.connected && e.ranks === 1 && e.ranksConnected === 1, JSON.stringify(kv.endpoints));
    assert.ok(e.blocks >= 6 && e.lastEventAt !== null && e.lastError === null, JSON.stringify(e));
    const m = kv.models.find((x) => x.model === MODEL);
    assert.ok(m, JSON.stringify(kv.models));
    assert.equal(m.matched, 3, 'three requests by KV match');
    assert.equal(m.fallbacks['unsupported-body'], 1, 'the batch fell back');
    assert.equal(m.decisions, 4);
    assert.ok(m.meanMatchedRatio !== null && m.meanMatchedRatio > 0.5 && m.meanMatchedRatio <= 1, String(m.meanMatchedRatio));
  });
});

interface KvPart {
  endpoints: {
    url: string;
    connected: boolean;
    ranks: number;
    ranksConnected: number;
    blocks: number;
    lastEventAt: number | null;
    lastError: string | null;
  }[];
  models: { model: string; decisions: number; matched: number; fallbacks: Record<string, number>; meanMatchedRatio: number | null }[];
}

describe("kvaware in tokens: the holder's queued prefills against computing elsewhere", { timeout: 90_000 }, () => {
  let a: SimHere;
  let router: Running;
  const doc = words('doc', 300);

  before(async () => {
    // 20 ms a token the cache does not hold on A: a 100-token question keeps its prefill (and the router's count of it)
    // open for 2 s, far longer than sending a dozen requests takes on a busy machine. B at 5 ms a token holds a
    // question (400 tokens to compute there) as long: the router weighs tokens, not the engines' speeds. The document
    // is cached on A only, before the router starts (A's prefill of 300 tokens takes 6 s: sent without waiting, its
    // blocks are cached at once, and the router learns them from A's replay on joining)
    const started = await twoEngines(['--prefill-ms-per-token', '20'], 1, {
      extraB: ['--prefill-ms-per-token', '5'],
      first: (engine) => {
        // its answer is not waited for (nor asserted): it may still be prefilling when the engines are stopped
        void call(`${engine.url}/v1/completions`, {
          body: JSON.stringify({ model: MODEL, prompt: doc, max_tokens: 1 }),
          timeoutMs: 30_000,
        }).catch(() => undefined);
      },
    });
    a = started.a;
    router = started.routers[0] as Running;
  });
  after(stopEverything);

  test('a document cached on A: its questions go to A until the prefills queued there cost more than computing it on B', async () => {
    await eventually(
      "A's blocks of the document indexed",
      () => blocksOn(router),
      (m) => (m.get(a.url) ?? 0) >= 18,
      20_000,
    );
    // each question leaves 112 tokens to compute on A (288 of its 400 are held there), or 400 on B plus a second copy of
    // the 288 A alone holds (x3): 976; so A takes questions until 8 are queued there (1,008), then B and A share
    const asked = await Promise.all(
      Array.from({ length: 16 }, (_, i) =>
        call(`${router.url}/v1/completions`, {
          body: JSON.stringify({ model: MODEL, prompt: `${doc} ${words(`question${i}x`, 100)}`, max_tokens: 1 }),
          timeoutMs: 30_000,
        }),
      ),
    );
    const by = asked.map((r) => String(r.headers['x-sim-engine']));
    const onA = by.filter((e) => e === 'A').length;
    assert.ok(onA >= 8 && onA <= 14, `A took ${onA} of 16: ${by.join(',')}`);
    // B computed the document once: a copy no longer costs more than A's queue, and its later questions may go to B
  });
});
