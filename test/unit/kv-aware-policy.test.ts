// kvaware's contract over a hand-made index: the cheapest candidate in tokens wins (what it would compute, a second
// copy of what one other engine alone holds weighing 3 a token, plus the work queued on it); no tokens and ties go to
// prefixaware's order; each request counts once.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Endpoint } from '../../src/router/core/endpoint.js';
import type { BlockKey } from '../../src/router/kv/block-key.js';
import type { KvIndexView, KvMatch, RequestBlocks } from '../../src/router/kv/types.js';
import { createPolicy } from '../../src/router/routing/index.js';
import type { KvFallbackReason } from '../../src/router/kv/types.js';
import type { RouteRequest } from '../../src/router/routing/policy.js';
import type { EngineLoad } from '../../src/router/core/endpoint.js';
import { testEndpoint, type WritableEndpoint } from '../support/endpoints.js';

const KEYS: readonly BlockKey[] = [11, 12, 13, 14, 15, 16, 17, 18, 19, 20];

/** endpoint id -> the keys it holds (on GPU unless listed in offload) */
class FakeIndex implements KvIndexView {
  constructor(
    readonly gpu: Map<string, Set<BlockKey>>,
    readonly offload = new Map<string, Set<BlockKey>>(),
  ) {}
  match(keys: readonly BlockKey[], endpointIds: readonly string[]): ReadonlyMap<string, KvMatch> {
    const out = new Map<string, KvMatch>();
    for (const id of endpointIds) {
      let gpu = 0;
      let total = 0;
      let gpuRun = true;
      for (const k of keys) {
        const onGpu = this.gpu.get(id)?.has(k) === true;
        const held = onGpu || this.offload.get(id)?.has(k) === true;
        if (!held) break;
        total++;
        if (gpuRun && onGpu) gpu++;
        else gpuRun = false;
      }
      if (total > 0) out.set(id, { gpu, total });
    }
    return out;
  }
  blockSize(): number | undefined {
    return 16;
  }
}

const eps = (n: number): WritableEndpoint[] =>
  Array.from({ length: n }, (_, i) => testEndpoint(`http://10.0.0.${i}:8000`, { id: `e${i}` }));

function req(): RouteRequest {
  return { model: 'm', headers: {}, body: { model: 'm', prompt: 'the prompt' } };
}

/** 16 tokens a block: KEYS are a 160-token prompt */
const blocksOf = (keys: readonly BlockKey[], bySize?: ReadonlyMap<number, readonly BlockKey[]>): RequestBlocks => ({
  tokens: keys.length * 16,
  keysAt: (size) => bySize?.get(size) ?? keys,
});

function setUp(
  index: KvIndexView,
  keys: readonly BlockKey[] | KvFallbackReason = KEYS,
  pendingMs = 0,
  opts: { now?: () => number; blockSizeOf?: (e: Endpoint) => number; bySize?: ReadonlyMap<number, readonly BlockKey[]> } = {},
) {
  const seen = { matched: [] as number[], fallbacks: [] as string[], asked: 0 };
  const policy = createPolicy('kvaware', {
    ...(opts.now ? { now: opts.now } : {}),
    kv: {
      index,
      keys: {
        keys: async () => {
          seen.asked++;
          return typeof keys === 'string' ? keys : blocksOf(keys, opts.bySize);
        },
        blockSizeOf: opts.blockSizeOf ?? (() => 16),
      },
      pendingMs,
      observer: {
        matched: (_m, matched) => seen.matched.push(matched),
        fallback: (_m, reason) => seen.fallbacks.push(reason),
      },
    },
  });
  return { policy, seen };
}

async function pick(policy: ReturnType<typeof createPolicy>, candidates: readonly Endpoint[], r = req()): Promise<Endpoint | undefined> {
  await policy.prepare?.(candidates, r);
  return policy.pick(candidates, r);
}

test('kvaware: the endpoint holding the longest leading run wins, 10 of 10 times', async () => {
  const c = eps(4);
  const index = new FakeIndex(
    new Map([
      ['e1', new Set(KEYS.slice(0, 3))],
      ['e2', new Set(KEYS.slice(0, 8))],
      // holds later blocks but not the first: no leading match
      ['e3', new Set(KEYS.slice(1))],
    ]),
  );
  const { policy, seen } = setUp(index);
  for (let i = 0; i < 10; i++) assert.equal((await pick(policy, c))?.id, 'e2');
  assert.deepEqual(seen.matched, Array(10).fill(8));
  assert.deepEqual(seen.fallbacks, []);
});

test('kvaware: a block on the GPU counts more than one offloaded', async () => {
  const c = eps(2);
  const index = new FakeIndex(new Map([['e0', new Set(KEYS.slice(0, 4))]]), new Map([['e1', new Set(KEYS.slice(0, 6))]]));
  const { policy } = setUp(index);
  // e0: 4 GPU blocks = 4; e1: 6 offloaded blocks x 0.5 = 3
  assert.equal((await pick(policy, c))?.id, 'e0');
});

test('kvaware: no tokens, or nothing held anywhere on idle engines, goes by prefixaware, counted once with its reason', async () => {
  const c = eps(4);
  const prefix = createPolicy('prefixaware');
  const expected = prefix.pick(c, req());
  for (const [keys, reason] of [
    ['timeout', 'timeout'],
    [[], 'too-short'],
    [[999], 'no-match'],
  ] as const) {
    const { policy, seen } = setUp(new FakeIndex(new Map([['e1', new Set(KEYS)]])), keys);
    const r = req();
    assert.equal(await pick(policy, c, r), expected);
    // a failover pick of the same request is not another decision
    policy.pick(c, r, new Set([expected as Endpoint]));
    assert.deepEqual(seen.fallbacks, [reason]);
  }
});

test('kvaware: equal matches are broken by prefixaware order, the same on every replica', async () => {
  const c = eps(4);
  const index = new FakeIndex(
    new Map([
      ['e0', new Set(KEYS)],
      ['e3', new Set(KEYS)],
    ]),
  );
  const a = setUp(index).policy;
  const b = setUp(index).policy;
  const first = await pick(a, c);
  assert.ok(first?.id === 'e0' || first?.id === 'e3');
  for (let i = 0; i < 5; i++) assert.equal(await pick(b, c), first);
});

test('kvaware: failover skips the excluded holder for the next best', async () => {
  const c = eps(3);
  const index = new FakeIndex(
    new Map([
      ['e0', new Set(KEYS)],
      ['e2', new Set(KEYS.slice(0, 5))],
    ]),
  );
  const { policy } = setUp(index);
  const r = req();
  assert.equal((await pick(policy, c, r))?.id, 'e0');
  assert.equal(policy.pick(c, r, new Set([c[0]!]))?.id, 'e2');
});

test('kvaware: a prompt just sent to an engine counts as held there until its events arrive, then expires', async () => {
  const c = eps(4);
  const index = new FakeIndex(new Map());
  const { policy, seen } = setUp(index, KEYS, 60_000);
  const first = await pick(policy, c);
  // nothing is indexed yet: the first goes by prefixaware, the burst behind it follows it
  for (let i = 0; i < 5; i++) assert.equal(await pick(policy, c), first);
  assert.deepEqual(seen.fallbacks, ['no-match']);
  assert.deepEqual(seen.matched, Array(5).fill(KEYS.length));
  // without it, the same burst has nothing to go by but prefixaware: still one engine, but counted as no match
  const off = setUp(new FakeIndex(new Map()), KEYS, 0);
  await pick(off.policy, c);
  await pick(off.policy, c);
  assert.deepEqual(off.seen.fallbacks, ['no-match', 'no-match']);
});

test('kvaware: where the router sent a prompt counts only until its time is up; then the events alone decide', async () => {
  const c = eps(2);
  const gpu = new Map<string, Set<BlockKey>>();
  let now = 1_000_000;
  const { policy } = setUp(new FakeIndex(gpu), KEYS, 1000, { now: () => now });
  const first = (await pick(policy, c)) as Endpoint;
  const other = c.find((e) => e !== first) as Endpoint;
  // the other engine reports the whole prompt (another replica sent it there); the first engine only two blocks
  gpu.set(other.id, new Set(KEYS));
  gpu.set(first.id, new Set(KEYS.slice(0, 2)));
  now += 500;
  // still within its time, the first send counts as the whole prompt: a tie, broken by prefixaware's order
  assert.ok([first, other].includes((await pick(policy, c)) as Endpoint));
  now += 2000;
  assert.equal(await pick(policy, c), other);
});

test('kvaware: once an engine reports a prefix, where the router sent it no longer counts (its evictions are heard)', async () => {
  const c = eps(2);
  const gpu = new Map<string, Set<BlockKey>>();
  const { policy } = setUp(new FakeIndex(gpu), KEYS, 60_000);
  const first = (await pick(policy, c)) as Endpoint;
  const other = c.find((e) => e !== first) as Endpoint;
  // the first engine evicted it before reporting anything; the other reports holding half of it: 10 of 10 go there
  gpu.set(other.id, new Set(KEYS.slice(0, 5)));
  for (let i = 0; i < 10; i++) assert.equal(await pick(policy, c), other);
});

const NOW = 1_000_000;
const load = (others: number, ours: number, at = NOW - 100): EngineLoad => ({
  at,
  running: others + ours,
  waiting: 0,
  kvUsage: 0,
  otherLoad: others,
  others,
  ours,
});

test('kvaware: the only holder keeps a conversation until its queue costs more than a copy elsewhere', async () => {
  const c = eps(4);
  const index = new FakeIndex(new Map([['e2', new Set(KEYS)]]));
  const { policy, seen } = setUp(index);
  // idle: e2 computes nothing; anywhere else computes 160 tokens and copies what e2 alone holds (x3): 480
  assert.equal((await pick(policy, c))?.id, 'e2');
  // prompts of 160 tokens under way on e2 (sent without a decision for e2: each counted whole); two: 320 < 480
  const work: Array<ReturnType<NonNullable<typeof policy.dispatched>>> = [];
  const under = async (i: number) => {
    const r = { model: 'm', headers: {}, body: { model: 'm', prompt: `other ${i}` } };
    await policy.prepare?.(c, r);
    work.push(policy.dispatched?.(c[2]!, r));
  };
  await under(0);
  await under(1);
  assert.equal((await pick(policy, c))?.id, 'e2');
  await under(2);
  await under(3);
  // 640 tokens queued: computing it elsewhere is cheaper now, routed by load (counted as overloaded)
  const away = await pick(policy, c);
  assert.notEqual(away?.id, 'e2');
  assert.equal(seen.fallbacks.at(-1), 'overloaded');
  // their answers begin: the queue is gone, the holder takes it again
  for (const w of work) w?.firstByte();
  assert.equal((await pick(policy, c))?.id, 'e2');
  // ended after the first byte changes nothing more; each closes once
  for (const w of work) w?.ended();
  assert.equal((await pick(policy, c))?.id, 'e2');
});

test('kvaware: a prefix several engines hold goes to the least loaded, and to an engine without it once they queue', async () => {
  const c = eps(4);
  const head = new Set(KEYS.slice(0, 4));
  const index = new FakeIndex(
    new Map([
      ['e0', head],
      ['e1', head],
      ['e2', head],
    ]),
  );
  const { policy, seen } = setUp(index);
  // e0 and e1 have a prompt under way: the idle holder e2 takes it
  const busy = [];
  for (const e of [c[0]!, c[1]!]) {
    const r = { model: 'm', headers: {}, body: { model: 'm', prompt: `busy ${e.id}` } };
    await policy.prepare?.(c, r);
    busy.push(policy.dispatched?.(e, r));
  }
  assert.equal((await pick(policy, c))?.id, 'e2');
  // e2 busy too: the engine that holds none of it computes 64 tokens more, cheaper than waiting for 160
  const r = { model: 'm', headers: {}, body: { model: 'm', prompt: 'busy e2' } };
  await policy.prepare?.(c, r);
  busy.push(policy.dispatched?.(c[2]!, r));
  assert.equal((await pick(policy, c))?.id, 'e3');
  assert.equal(seen.fallbacks.at(-1), 'overloaded');
});

test('kvaware: other clients count beyond their share of this router, and stale metrics count as the busiest', async () => {
  const c = eps(4);
  const index = new FakeIndex(new Map([['e2', new Set(KEYS)]]));
  // other replicas run on each engine what this router ran there: nothing beyond their share, the holder keeps it
  for (const e of c) e.engineLoad = load(3, 3);
  const { policy } = setUp(index, KEYS, 0, { now: () => NOW });
  assert.equal((await pick(policy, c))?.id, 'e2');
  // a client of its own runs 10 more requests on e2 (10 x 160 tokens > 480): elsewhere
  c[2]!.engineLoad = load(13, 3);
  assert.notEqual((await pick(policy, c))?.id, 'e2');
  // nothing held anywhere: e1's metrics are stale, so it counts as loaded as the busiest (e0: 2 beyond its share)
  const shared = new FakeIndex(new Map());
  for (const e of c) e.engineLoad = load(0, 0);
  c[0]!.engineLoad = load(2, 0);
  c[1]!.engineLoad = load(0, 0, NOW - 10_000);
  const fresh = setUp(shared, KEYS, 0, { now: () => NOW }).policy;
  for (let i = 0; i < 8; i++) assert.ok(['e2', 'e3'].includes((await pick(fresh, c))?.id as string));
});

test('kvaware: one candidate is taken without tokenizing, counted as one-endpoint', async () => {
  const c = eps(1);
  const { policy, seen } = setUp(new FakeIndex(new Map()));
  assert.equal((await pick(policy, c))?.id, 'e0');
  assert.equal(seen.asked, 0);
  assert.deepEqual(seen.fallbacks, ['one-endpoint']);
});

test("kvaware: each endpoint's keys at its own block size; one engine's size changes no other's match", async () => {
  const c = eps(3);
  const at32: readonly BlockKey[] = [71, 72, 73, 74, 75];
  // e2's engine has 32-token blocks; its index entries are keys at 32 (its 16-token keys would be another chain)
  const index = new FakeIndex(
    new Map([
      ['e0', new Set(KEYS.slice(0, 3))],
      ['e2', new Set(at32.slice(0, 4))],
    ]),
  );
  const sizes = new Map([['e2', 32]]);
  const { policy, seen } = setUp(index, KEYS, 0, {
    blockSizeOf: (e) => sizes.get(e.id) ?? 16,
    bySize: new Map([[32, at32]]),
  });
  // e2 holds 4 x 32 = 128 tokens, e0 3 x 16 = 48
  assert.equal((await pick(policy, c))?.id, 'e2');
  assert.deepEqual(seen.matched, [4]);
  // e2 back to 16-token blocks: its 32-token entries match nothing, e0's match is what it was
  sizes.delete('e2');
  assert.equal((await pick(policy, c))?.id, 'e0');
  assert.deepEqual(seen.matched, [4, 3]);
});

test('kvaware: a prompt shorter than a block goes by load (nothing to match), not behind queued prefills', async () => {
  const c = eps(3);
  const fallbacks: string[] = [];
  // a long prompt (KEYS: 160 tokens) and a short one (no full block)
  const policy = createPolicy('kvaware', {
    kv: {
      index: new FakeIndex(new Map()),
      keys: { keys: async (r) => blocksOf(r.body.prompt === 'long' ? KEYS : []), blockSizeOf: () => 16 },
      observer: { matched: () => undefined, fallback: (_m, reason) => fallbacks.push(reason) },
    },
  });
  const hashed = createPolicy('prefixaware').pick(c, req()) as Endpoint;
  // the long prompt's prefill under way where prefixaware's hash would send the short one
  const long = { model: 'm', headers: {}, body: { model: 'm', prompt: 'long' } };
  await policy.prepare?.(c, long);
  policy.dispatched?.(hashed, long);
  assert.notEqual(await pick(policy, c), hashed);
  assert.deepEqual(fallbacks, ['too-short']);
});
