// kvaware's contract over a hand-made index: the longest cached prefix wins (GPU over offload), within prefixaware's
// load bound; no tokens, no match and ties go to prefixaware's order; each request counts once.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Endpoint } from '../../src/router/core/endpoint.js';
import type { BlockKey } from '../../src/router/kv/block-key.js';
import type { KvIndexView, KvMatch } from '../../src/router/kv/types.js';
import { createPolicy } from '../../src/router/routing/index.js';
import type { KvFallbackReason } from '../../src/router/kv/types.js';
import type { RouteRequest } from '../../src/router/routing/policy.js';
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

function setUp(index: KvIndexView, keys: readonly BlockKey[] | KvFallbackReason = KEYS, pendingMs = 0) {
  const seen = { matched: [] as number[], fallbacks: [] as string[] };
  const policy = createPolicy('kvaware', {
    kv: {
      index,
      keys: { keys: async () => keys },
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

test('kvaware: no endpoint above the load bound, however well it matches', async () => {
  const c = eps(4);
  c[2]!.inFlight = 6;
  const index = new FakeIndex(
    new Map([
      ['e2', new Set(KEYS)],
      ['e1', new Set(KEYS.slice(0, 2))],
    ]),
  );
  const { policy, seen } = setUp(index);
  // total 6, room = ceil(1.25 x 7 / 4) = 3: e2 is full, the next best holder takes it
  assert.equal((await pick(policy, c))?.id, 'e1');
  assert.deepEqual(seen.matched, [2]);
});

test('kvaware: no tokens or no match falls back to prefixaware, counted once per request with its reason', async () => {
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
  const policy = createPolicy('kvaware', {
    now: () => now,
    kv: { index: new FakeIndex(gpu), keys: { keys: async () => KEYS }, pendingMs: 1000 },
  });
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

test('kvaware: at low concurrency the only holder of a prompt keeps it, though one request over the bound', async () => {
  const c = eps(4);
  // one request in flight in all, on e1: room = ceil(1.25 x 2 / 4) = 1 would send the prompt away from its only holder
  c[1]!.inFlight = 1;
  const index = new FakeIndex(new Map([['e1', new Set(KEYS)]]));
  const { policy, seen } = setUp(index);
  assert.equal((await pick(policy, c))?.id, 'e1');
  assert.deepEqual(seen.matched, [KEYS.length]);
  assert.deepEqual(seen.fallbacks, []);
});

test('kvaware: over the bound only for a prefix longer by half the prompt, and by 2 requests at most', async () => {
  const c = eps(4);
  c[1]!.inFlight = 1;
  // e2, within the bound, holds 6 of 10: e1's 10 saves 40 % more, not enough to go over the bound
  const index = new FakeIndex(
    new Map([
      ['e1', new Set(KEYS)],
      ['e2', new Set(KEYS.slice(0, 6))],
    ]),
  );
  assert.equal((await pick(setUp(index).policy, c))?.id, 'e2');
  // e2 holds 4 of 10: e1 saves 60 % more and takes it
  index.gpu.set('e2', new Set(KEYS.slice(0, 4)));
  assert.equal((await pick(setUp(index).policy, c))?.id, 'e1');
  // e1 with all 4 in flight: bound ceil(1.25 x 5 / 4) = 2, stretch 2 + 2 = 4, full; the holder within the bound takes it
  c[1]!.inFlight = 4;
  assert.equal((await pick(setUp(index).policy, c))?.id, 'e2');
});
