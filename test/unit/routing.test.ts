// Routing policies' contracts: least-load, session (rendezvous), prefixaware (rendezvous with bounded loads), the header override.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Endpoint, EngineLoad } from '../../src/router/core/endpoint.js';
import { testEndpoint, type WritableEndpoint } from '../support/endpoints.js';
import { ROUTING_LOGICS } from '../../src/router/config/router-flags.js';
import { createPolicy } from '../../src/router/routing/index.js';
import type { RouteRequest, RoutingPolicy } from '../../src/router/routing/policy.js';

/** Policies are pure over the candidates they are handed: these tests hand them endpoints they change themselves. */
function endpoint(i: number, inFlight = 0, engineLoad?: EngineLoad): WritableEndpoint {
  return testEndpoint(`http://10.0.0.${i}:8000`, { id: `e${i}`, inFlight, ...(engineLoad ? { engineLoad } : {}) });
}

const range = (n: number): WritableEndpoint[] => Array.from({ length: n }, (_, i) => endpoint(i));

function req(body: Record<string, unknown> = {}, headers: Record<string, string | string[]> = {}): RouteRequest {
  return { model: 'm', headers, body: { model: 'm', ...body } };
}

function chat(system: string, ...turns: string[]): RouteRequest {
  return req({
    messages: [{ role: 'system', content: system }, ...turns.map((content, i) => ({ role: i % 2 === 0 ? 'user' : 'assistant', content }))],
  });
}

/** A deterministic uniform source, so random choices are repeatable. */
function seeded(seed = 1): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 2 ** 32;
  };
}

const NOW = 1_000_000;
const fresh = (otherLoad: number, waiting = 0): EngineLoad => ({
  at: NOW - 100,
  running: otherLoad,
  waiting,
  kvUsage: 0,
  otherLoad,
  others: otherLoad,
  ours: 0,
});
const stale = (otherLoad: number): EngineLoad => ({
  at: NOW - 3_001,
  running: otherLoad,
  waiting: 0,
  kvUsage: 0,
  otherLoad,
  others: otherLoad,
  ours: 0,
});

function tally(policy: RoutingPolicy, candidates: readonly Endpoint[], request: RouteRequest, times: number): Map<string, number> {
  const seen = new Map<string, number>();
  for (let i = 0; i < times; i++) {
    const e = policy.pick(candidates, request) as Endpoint;
    seen.set(e.id, (seen.get(e.id) ?? 0) + 1);
  }
  return seen;
}

const BIG = 'You are a careful assistant for the ACME support desk. Answer briefly, cite the manual, never guess. '.repeat(30);

test('every policy name builds without options and picks nothing from nothing', () => {
  for (const name of ROUTING_LOGICS) {
    const policy = createPolicy(name);
    // kvaware with no index wired (no KV-cache events) is prefixaware
    assert.equal(policy.name, name === 'kvaware' ? 'prefixaware' : name);
    assert.equal(policy.pick([], chat('hello', 'hi')), undefined);
    const only = endpoint(1);
    assert.equal(policy.pick([only], chat('hello', 'hi')), only, name);
    assert.equal(policy.pick([only], chat('hello', 'hi'), new Set([only])), undefined, name);
  }
});

test('least-load: the endpoint with the fewest requests in flight, among equals at random', () => {
  const policy = createPolicy('least-load', { now: () => NOW, random: seeded() });
  const candidates = [endpoint(0, 3), endpoint(1, 1), endpoint(2, 2)];
  assert.deepEqual([...tally(policy, candidates, req(), 50)], [['e1', 50]]);
  const equal = range(8);
  assert.equal(tally(policy, equal, req(), 400).size, 8, 'equal endpoints all get traffic: no herding on the first');
});

test('least-load avoids an engine with a long queue even when this router sends it nothing', () => {
  const policy = createPolicy('least-load', { now: () => NOW, random: seeded() });
  const queued = endpoint(0, 0, fresh(8 + 12, 12));
  const busyish = endpoint(1, 2, fresh(1));
  const idle = endpoint(2, 1, fresh(0));
  assert.deepEqual([...tally(policy, [queued, busyish, idle], req(), 50)], [['e2', 50]]);
  // with the idle one gone, the queued engine still loses to a lightly loaded one
  assert.deepEqual([...tally(policy, [queued, busyish], req(), 50)], [['e1', 50]]);
});

test('least-load: stale engine metrics are unknown load, not idle', () => {
  const policy = createPolicy('least-load', { now: () => NOW, random: seeded(), engineStatsIntervalMs: 1000 });
  const busy = endpoint(0, 0, fresh(6));
  const lastSaidIdle = endpoint(1, 0, stale(0));
  const idle = endpoint(2, 0, fresh(0));
  assert.deepEqual([...tally(policy, [busy, lastSaidIdle, idle], req(), 100)], [['e2', 100]], 'a stale "idle" never beats a fresh idle');
  // against busy engines only, an unknown one counts as busy as the busiest: it shares, it does not take everything
  const seen = tally(policy, [busy, lastSaidIdle], req(), 400);
  assert.ok((seen.get('e0') ?? 0) > 100 && (seen.get('e1') ?? 0) > 100, JSON.stringify([...seen]));
  // the same snapshot while fresh is believed
  assert.deepEqual([...tally(policy, [busy, endpoint(1, 0, fresh(0))], req(), 50)], [['e1', 50]]);
  // nothing known at all (no scraper, TGI): in-flight counts alone decide
  assert.deepEqual([...tally(policy, [endpoint(0, 2, stale(0)), endpoint(1, 1)], req(), 50)], [['e1', 50]]);
});

test('least-load honours failover exclusions', () => {
  const policy = createPolicy('least-load', { now: () => NOW, random: seeded() });
  const [a, b, c] = [endpoint(0, 0), endpoint(1, 5), endpoint(2, 9)];
  assert.equal(policy.pick([a, b, c], req(), new Set([a])), b);
  assert.equal(policy.pick([a, b, c], req(), new Set([a, b, c])), undefined);
});

const SESSION = { sessionKey: 'x-session-id', now: () => NOW, random: seeded() };
const session = (id: string): RouteRequest => req({ messages: [{ role: 'user', content: 'hi' }] }, { 'x-session-id': id });

test('session: one key, one endpoint; every replica agrees whatever the order it lists endpoints in', () => {
  const a = createPolicy('session', SESSION);
  const b = createPolicy('session', SESSION);
  const candidates = range(6);
  const reversed = [...candidates].reverse();
  const used = new Set<string>();
  for (let k = 0; k < 200; k++) {
    const first = a.pick(candidates, session(`user-${k}`)) as WritableEndpoint;
    candidates[k % 6]!.inFlight = k % 5; // load does not move a session
    assert.equal(a.pick(candidates, session(`user-${k}`)), first);
    assert.equal(b.pick(reversed, session(`user-${k}`)), first);
    used.add(first.id);
  }
  assert.equal(used.size, 6, 'sessions spread over every endpoint');
});

test('session: when an endpoint leaves only its sessions move, and they spread over the rest; it comes back to the same sessions', () => {
  const policy = createPolicy('session', SESSION);
  const all = range(5);
  const without2 = all.filter((e) => e.id !== 'e2');
  const before = new Map<string, string>();
  for (let k = 0; k < 1000; k++) before.set(`s${k}`, (policy.pick(all, session(`s${k}`)) as Endpoint).id);
  const movedTo = new Map<string, number>();
  for (const [key, was] of before) {
    const now = (policy.pick(without2, session(key)) as Endpoint).id;
    if (was === 'e2') movedTo.set(now, (movedTo.get(now) ?? 0) + 1);
    else assert.equal(now, was, `${key} moved though its endpoint stayed`);
  }
  assert.equal(movedTo.size, 4, 'the departed endpoint’s sessions spread over all four others');
  const share = [...before.values()].filter((id) => id === 'e2').length;
  assert.ok(share > 120 && share < 280, `e2 held ${share} of 1000 sessions`);
  for (const [key, was] of before) assert.equal((policy.pick(all, session(key)) as Endpoint).id, was);
});

test('session: no key (or an empty one) is routed by least-load; a repeated header uses its first value', () => {
  const policy = createPolicy('session', SESSION);
  const candidates = [endpoint(0, 4), endpoint(1, 0), endpoint(2, 4)];
  assert.deepEqual([...tally(policy, candidates, req(), 20)], [['e1', 20]]);
  assert.deepEqual([...tally(policy, candidates, req({}, { 'x-session-id': '' }), 20)], [['e1', 20]]);
  assert.equal(
    policy.pick(candidates, req({}, { 'x-session-id': ['abc', 'def'] })),
    policy.pick(candidates, req({}, { 'x-session-id': 'abc' })),
  );
  assert.equal(policy.pick(candidates, req({}, { 'x-session-id': 'abc' }), new Set(candidates)), undefined);
});

const PREFIX = { now: () => NOW, random: seeded() };

test('prefixaware: prompts sharing their leading blocks share an endpoint on every replica; different prefixes spread', () => {
  const a = createPolicy('prefixaware', PREFIX);
  const b = createPolicy('prefixaware', PREFIX);
  const candidates = range(8);
  const shuffled = [
    candidates[3]!,
    candidates[7]!,
    candidates[0]!,
    candidates[5]!,
    candidates[1]!,
    candidates[6]!,
    candidates[2]!,
    candidates[4]!,
  ];
  const used = new Set<string>();
  for (let k = 0; k < 64; k++) {
    const system = `Tenant ${k}. ${BIG}`;
    const first = a.pick(candidates, chat(system, 'What is the refund policy?')) as Endpoint;
    // a later turn of the conversation, and a different question under the same long system prompt
    assert.equal(a.pick(candidates, chat(system, 'What is the refund policy?', 'It is 30 days.', 'And for opened items?')), first);
    assert.equal(a.pick(candidates, chat(system, 'Where is my parcel?')), first);
    assert.equal(b.pick(shuffled, chat(system, 'What is the refund policy?')), first);
    used.add(first.id);
  }
  assert.equal(used.size, 8);
});

test('prefixaware: sequential requests with one prefix stay on one endpoint; completions use the prompt', () => {
  const policy = createPolicy('prefixaware', PREFIX);
  const candidates = range(4);
  const e = policy.pick(candidates, req({ prompt: BIG + ' Q1' })) as Endpoint;
  for (let i = 0; i < 20; i++) {
    const chosen = policy.pick(candidates, req({ prompt: BIG + ` Q${i}` })) as WritableEndpoint;
    chosen.inFlight++;
    assert.equal(chosen, e);
    chosen.inFlight--;
  }
});

test('prefixaware: bounded load under a hot prefix — no endpoint above ceil((1 + epsilon) x mean), spill in the same order everywhere', () => {
  for (const epsilon of [0, 0.25, 1]) {
    const a = createPolicy('prefixaware', { ...PREFIX, prefixBalanceEpsilon: epsilon });
    const b = createPolicy('prefixaware', { ...PREFIX, prefixBalanceEpsilon: epsilon });
    const left = range(5);
    const right = range(5).reverse();
    const hot = chat(BIG, 'the same question from everyone');
    let total = 0;
    for (let k = 0; k < 200; k++) {
      const e = a.pick(left, hot) as WritableEndpoint;
      const mirror = b.pick(right, hot) as WritableEndpoint;
      assert.equal(mirror.id, e.id, 'a replica with the same in-flight counts spills the same way');
      e.inFlight++;
      mirror.inFlight++;
      total++;
      const bound = Math.ceil(((1 + epsilon) * total) / left.length);
      for (const x of left)
        assert.ok(x.inFlight <= bound, `epsilon ${epsilon}: ${x.id} has ${x.inFlight} in flight, bound ${bound} at ${total}`);
    }
    if (epsilon === 0)
      assert.deepEqual(
        left.map((x) => x.inFlight),
        [40, 40, 40, 40, 40],
      );
  }
});

test('prefixaware: the prefix winner is kept while it is within the bound, and failover skips excluded endpoints', () => {
  const policy = createPolicy('prefixaware', PREFIX);
  const candidates = range(4);
  const request = chat(BIG, 'q');
  const home = policy.pick(candidates, request) as WritableEndpoint;
  for (const e of candidates) e.inFlight = 3;
  assert.equal(policy.pick(candidates, request), home, '3 in flight each: the bound is ceil(1.25 x 13 / 4) = 5');
  home.inFlight = 5;
  const spill = policy.pick(candidates, request) as Endpoint;
  assert.notEqual(spill, home);
  home.inFlight = 3;
  const next = policy.pick(candidates, request, new Set([home])) as Endpoint;
  assert.notEqual(next, home);
  assert.equal(policy.pick(candidates, request, new Set(candidates)), undefined);
});

test('prefixaware: a request without a prompt is routed by least-load', () => {
  const policy = createPolicy('prefixaware', PREFIX);
  const candidates = [endpoint(0, 2), endpoint(1, 0), endpoint(2, 2)];
  assert.deepEqual([...tally(policy, candidates, req({ documents: ['a'] }), 20)], [['e1', 20]]);
});

test('x-llm-router-routing picks another policy for one request, only with --allow-routing-header', () => {
  const candidates = range(4);
  const hdr = (name: string): RouteRequest => ({ ...chat(BIG, 'q'), headers: { 'x-llm-router-routing': name } });
  const off = createPolicy('roundrobin');
  assert.equal(tally(off, candidates, hdr('prefixaware'), 8).size, 4, 'ignored when not allowed');
  const on = createPolicy('roundrobin', { allowRoutingHeader: true, ...PREFIX });
  assert.equal(on.name, 'roundrobin');
  assert.equal(tally(on, candidates, hdr('prefixaware'), 8).size, 1);
  assert.equal(tally(on, candidates, hdr('PrefixAware '), 8).size, 1, 'case and spaces do not matter');
  assert.equal(tally(on, candidates, hdr('no-such-policy'), 8).size, 4, 'an unknown name falls back to the configured policy');
  assert.equal(tally(on, candidates, chat(BIG, 'q'), 8).size, 4);
});
