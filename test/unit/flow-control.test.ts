// Flow control's parts (src/router/flow): the queue's order (strict priority between bands, tenants in turn within a
// band, first come first served within a tenant), the pool's saturation from the engines' metrics and this router's
// own requests since, and the controller: pass at once below saturation, wait above it, shed, caps, time-outs, a
// client that leaves, and release as room appears.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { EngineLoad } from '../../src/router/core/endpoint.js';
import { ClientGone } from '../../src/router/core/client-gone.js';
import type { ResponseSink } from '../../src/router/core/exchange.js';
import { FlowController, type FlowAdmission, type FlowControlOptions } from '../../src/router/flow/controller.js';
import { FlowQueue, type Waiting } from '../../src/router/flow/flow-queue.js';
import { endpointScore, poolSaturation } from '../../src/router/flow/saturation.js';
import { FakeClock } from '../support/clock.js';
import { testEndpoint, type WritableEndpoint } from '../support/endpoints.js';
import { EventEmitter } from 'node:events';

const T = { queueDepth: 5, kvCache: 0.8, stalenessMs: 200 };

function item(tenant: string, priority: number, n: number): Waiting & { n: number } {
  return { tenant, priority, bytes: 10, enqueuedAt: 0, deadline: 1000 + n, gone: false, n };
}

test('queue: higher bands first; tenants of a band in turn; first come first served within a tenant', () => {
  const q = new FlowQueue<Waiting & { n: number }>();
  // tenant a sends 6, b 2, c (priority 10) 1, d (priority -1) 1
  let n = 0;
  for (let i = 0; i < 6; i++) q.push(item('a', 0, n++));
  for (let i = 0; i < 2; i++) q.push(item('b', 0, n++));
  q.push(item('d', -1, n++));
  q.push(item('c', 10, n++));
  assert.equal(q.count, 10);
  const order: string[] = [];
  for (let w = q.take(); w !== undefined; w = q.take()) order.push(`${w.tenant}${w.n}`);
  assert.deepEqual(order, ['c9', 'a0', 'b6', 'a1', 'b7', 'a2', 'a3', 'a4', 'a5', 'd8']);
  assert.equal(q.count, 0);
  assert.equal(q.bytes, 0);
});

test('queue: a request taken out keeps no turn; a tenant back after leaving starts a new turn once, not twice', () => {
  const q = new FlowQueue<Waiting & { n: number }>();
  const a0 = item('a', 0, 0);
  q.push(a0);
  q.push(item('b', 0, 1));
  assert.equal(q.remove(a0), true);
  assert.equal(q.remove(a0), false, 'once');
  // a comes back while its old, now empty, flow still stands in the turn order
  q.push(item('a', 0, 2));
  q.push(item('a', 0, 3));
  q.push(item('b', 0, 4));
  const order: number[] = [];
  for (let w = q.take(); w !== undefined; w = q.take()) order.push(w.n);
  // a keeps its place in the turn order (first), and takes one turn in each round, as b does
  assert.deepEqual(order, [2, 1, 3, 4]);
});

test('queue: expiry takes out what is due, in any band or tenant', () => {
  const q = new FlowQueue<Waiting & { n: number }>();
  q.push({ ...item('a', 0, 0), deadline: 50 });
  q.push({ ...item('b', 0, 1), deadline: 500 });
  q.push({ ...item('c', 3, 2), deadline: 40 });
  assert.deepEqual(
    q.expire(100).map((w) => w.n),
    [2, 0],
  );
  assert.equal(q.count, 1);
  assert.equal(q.take()?.n, 1);
});

const fresh = (fields: Partial<EngineLoad>, at = 1_000_000 - 50): EngineLoad => ({
  at,
  running: 0,
  waiting: 0,
  kvUsage: 0,
  otherLoad: 0,
  others: 0,
  ours: 0,
  ...fields,
});

test("saturation: an endpoint's most constrained resource; stale or missing metrics are full; the pool is their mean", () => {
  const now = 1_000_000;
  const e = testEndpoint('http://e:1', { engineLoad: fresh({ waiting: 2, kvUsage: 0.4 }) });
  assert.equal(endpointScore(e, now, T), 0.5, 'kv 0.4 / 0.8 beats waiting 2 / 5');
  e.engineLoad = fresh({ waiting: 4, kvUsage: 0.4 });
  assert.equal(endpointScore(e, now, T), 0.8);
  e.engineLoad = fresh({ waiting: 0, kvUsage: 0.1 }, now - 201);
  assert.equal(endpointScore(e, now, T), 1, 'stale');
  assert.equal(endpointScore(testEndpoint('http://x:1'), now, T), 1, 'never scraped');
  const idle = testEndpoint('http://i:1', { engineLoad: fresh({}) });
  assert.equal(poolSaturation([e, idle], 0, now, T), 0.5);
  // five requests released and not yet at an engine: waiting spread over the pool (no engine says what one takes of
  // its KV cache); with engines running, each as a running request's share where that fills more
  assert.equal(poolSaturation([idle, idle], 5, now, T), 0.5);
  const busy = testEndpoint('http://r:1', { engineLoad: fresh({ running: 2, kvUsage: 0.4 }) });
  assert.ok(Math.abs(poolSaturation([busy, busy], 2, now, T) - (0.5 + 0.5 + (2 * 0.2) / 0.8) / 2) < 1e-9);
  assert.equal(poolSaturation([], 0, now, T), 1, 'no engine: nothing can take a request');
});

test("saturation: this router's own requests since the scrape count at once, those that ended give their place back", () => {
  const now = 1_000_000;
  // at the scrape: 4 running (kv 0.8), 1 waiting, 3 of them ours
  const e = testEndpoint('http://e:1', { inFlight: 3, engineLoad: fresh({ running: 4, waiting: 1, kvUsage: 0.8, ours: 3 }) });
  assert.equal(endpointScore(e, now, T), 1);
  // two more sent since: counted as waiting, or as running and taking a running request's share (0.2) of the KV cache
  e.inFlight = 5;
  assert.ok(Math.abs(endpointScore(e, now, T) - Math.max(3 / 5, 1.2 / 0.8)) < 1e-9, String(endpointScore(e, now, T)));
  // two of ours ended since the scrape: the waiting one took one place, one runs less (kv 0.8 x 3/4)
  e.inFlight = 1;
  assert.ok(Math.abs(endpointScore(e, now, T) - 0.75) < 1e-9, String(endpointScore(e, now, T)));
});

/** A sink the client can leave: enough of ResponseSink for ClientGone. */
function clientSink(): ResponseSink & { leave(): void } {
  const s = new EventEmitter() as unknown as ResponseSink & { leave(): void; destroyed: boolean; writableFinished: boolean };
  s.destroyed = false;
  s.writableFinished = false;
  s.leave = () => {
    s.destroyed = true;
    (s as unknown as EventEmitter).emit('close');
  };
  return s;
}

function setUp(extra: Partial<FlowControlOptions> = {}) {
  const clock = new FakeClock();
  const engines: WritableEndpoint[] = [testEndpoint('http://a:1'), testEndpoint('http://b:1')];
  // a scrape: three requests running on each engine, taking `kvUsage` of its KV cache
  const load = (kvUsage: number, waiting = 0): void => {
    for (const e of engines) e.engineLoad = fresh({ running: 3, kvUsage, waiting, ours: e.inFlight }, clock.now());
  };
  load(0);
  const refused: string[] = [];
  const c = new FlowController({
    thresholds: T,
    queueTimeoutMs: 5_000,
    maxRequests: 100,
    maxBytes: 1e9,
    bandMaxRequests: 100,
    bandMaxBytes: 1e9,
    candidates: () => engines,
    clock,
    observer: { refused: (_m, f, reason) => refused.push(`${f.tenant}:${reason}`) },
    ...extra,
  });
  return { c, clock, engines, load, refused };
}

const gone = (): ClientGone => new ClientGone(clientSink());
/** what an admission came to (a function: assertions before it do not narrow what it reads) */
const kindOf = (a: FlowAdmission | undefined): string | undefined => a?.kind;

test('controller: below saturation a request goes at once (no promise); saturated it waits, and goes when room appears', async () => {
  const { c, clock, load } = setUp();
  const first = c.admit('m', { tenant: 'a', priority: 0 }, 10, gone());
  assert.ok(!(first instanceof Promise) && first.kind === 'go');
  first.ticket.forwarding();
  // the engines report their KV cache full
  load(0.9);
  const got: { settled?: FlowAdmission } = {};
  const waiting = c.admit('m', { tenant: 'a', priority: 0 }, 10, gone());
  assert.ok(waiting instanceof Promise);
  void waiting.then((a) => {
    got.settled = a;
  });
  await clock.advance(100);
  assert.equal(got.settled, undefined, 'still saturated');
  assert.equal(c.queued('m'), 1);
  load(0.5);
  await clock.advance(25);
  assert.equal(kindOf(got.settled), 'go');
  assert.equal(c.queued('m'), 0);
});

test('controller: sheddable requests are refused at once when saturated; over the caps, queue_full', () => {
  const { c, load, refused } = setUp({ bandMaxRequests: 2 });
  load(0.9);
  const shed = c.admit('m', { tenant: 'd', priority: -1 }, 10, gone());
  assert.deepEqual(shed, { kind: 'refused', reason: 'overloaded', retryAfterSeconds: 1 });
  for (let i = 0; i < 2; i++) assert.ok(c.admit('m', { tenant: 'a', priority: 0 }, 10, gone()) instanceof Promise);
  assert.equal((c.admit('m', { tenant: 'a', priority: 0 }, 10, gone()) as FlowAdmission).kind, 'refused');
  // another band has its own cap
  assert.ok(c.admit('m', { tenant: 'c', priority: 5 }, 10, gone()) instanceof Promise);
  assert.deepEqual(refused, ['d:overloaded', 'a:queue_full']);
  c.stop();
});

test('controller: a request whose time is up is refused (queue_timeout); one whose client leaves is taken out at once', async () => {
  const { c, clock, load, refused } = setUp({ queueTimeoutMs: 1_000 });
  load(0.9);
  const sink = clientSink();
  const leaving = c.admit('m', { tenant: 'a', priority: 0 }, 10, new ClientGone(sink)) as Promise<FlowAdmission>;
  const timing = c.admit('m', { tenant: 'b', priority: 0 }, 10, gone()) as Promise<FlowAdmission>;
  assert.equal(c.queued('m'), 2);
  sink.leave();
  assert.deepEqual(await leaving, { kind: 'gone' });
  assert.equal(c.queued('m'), 1);
  await clock.advance(1_100);
  assert.deepEqual(await timing, { kind: 'refused', reason: 'queue_timeout', retryAfterSeconds: 1 });
  assert.equal(c.queued('m'), 0);
  assert.deepEqual(refused, ['b:queue_timeout']);
});

test('controller: as room appears, the higher band first, then the tenants in turn', async () => {
  const { c, clock, load, engines } = setUp();
  load(0.9);
  const order: string[] = [];
  const send = (tenant: string, priority: number, n: number): void => {
    const a = c.admit('m', { tenant, priority }, 10, gone()) as Promise<FlowAdmission>;
    void a.then((x) => {
      if (x.kind !== 'go') return;
      order.push(`${tenant}${n}`);
      // it reaches engine a: in flight there, taking a running request's share of its KV cache until the next scrape
      x.ticket.forwarding();
      engines[0]!.inFlight++;
    });
  };
  for (let i = 0; i < 4; i++) send('a', 0, i);
  send('b', 0, 0);
  send('c', 10, 0);
  // room for one request each scrape (kv 0.75 of 0.8 on both engines): what it released fills engine a again
  for (let i = 0; i < 6; i++) {
    load(0.75);
    await clock.advance(25);
  }
  assert.deepEqual(order, ['c0', 'a0', 'b0', 'a1', 'a2', 'a3']);
});

test('controller: a request that ends releases the next at once, before the next scrape; stop answers the rest', async () => {
  const { c, engines } = setUp();
  // R1 goes, and reaches engine a
  const r1 = c.admit('m', { tenant: 'a', priority: 0 }, 10, gone());
  assert.ok(!(r1 instanceof Promise) && r1.kind === 'go');
  r1.ticket.forwarding();
  engines[0]!.inFlight = 1;
  // the scrape: R1 running on a (kv 0.8), b as full from other clients
  engines[0]!.engineLoad = fresh({ running: 1, kvUsage: 0.8, ours: 1 }, 1_000_000);
  engines[1]!.engineLoad = fresh({ running: 1, kvUsage: 0.8, ours: 0 }, 1_000_000);
  const got: { r2?: FlowAdmission } = {};
  void (c.admit('m', { tenant: 'b', priority: 0 }, 10, gone()) as Promise<FlowAdmission>).then((a) => {
    got.r2 = a;
  });
  const r3 = c.admit('m', { tenant: 'c', priority: 0 }, 10, gone()) as Promise<FlowAdmission>;
  await Promise.resolve();
  assert.equal(got.r2, undefined, 'saturated: it waits');
  // R1 ends on a: its place is free before any scrape says so, and its end releases the next
  engines[0]!.inFlight = 0;
  r1.ticket.done();
  r1.ticket.done();
  await Promise.resolve();
  assert.equal(kindOf(got.r2), 'go');
  assert.equal(c.queued('m'), 1);
  c.stop();
  assert.deepEqual(await r3, { kind: 'refused', reason: 'shutdown', retryAfterSeconds: 1 });
  assert.deepEqual(c.admit('m', { tenant: 'a', priority: 0 }, 1, gone()), { kind: 'refused', reason: 'shutdown', retryAfterSeconds: 1 });
});
