// Demand summed over processes and replicas: the pure arithmetic, and the scaler's answers over real gRPC.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ModelCatalog } from '../../src/router/catalog/catalog.js';
import {
  countersOnly,
  EMPTY_MODEL_DEMAND,
  isActive,
  load,
  mergeWorkers,
  parseSnapshot,
  pending,
  systemTotals,
  withinAge,
  type DemandSnapshot,
} from '../../src/router/scaling/demand-snapshot.js';
import { AggregateDemand } from '../../src/router/scaling/demand-view.js';
import { DemandTracker } from '../../src/router/scaling/demand.js';
import { HoldQueue } from '../../src/router/scaling/hold-queue.js';
import { KedaScaler, parseTarget, type ModelLookup } from '../../src/router/scaling/keda.js';
import { createLogger } from '../../src/router/util/log.js';
import { GRPC, grpcCode, kedaClient } from '../support/keda.js';
import { until } from '../support/within.js';

const silent = createLogger({ level: 'silent', format: 'json' });
const snap = (instance: string, at: number, models: DemandSnapshot['models']): DemandSnapshot => ({ instance, at, workers: 1, models });
const m = (over: Partial<typeof EMPTY_MODEL_DEMAND>) => ({ ...EMPTY_MODEL_DEMAND, ...over });

test("workers of one instance add up (the last minute's arrivals too); the latest times win, and the oldest held request is the earliest", () => {
  const merged = mergeWorkers('pod-a', 100, [
    snap('w1', 90, { x: m({ held: 2, arrivals: 3, lastMinute: 2, lastArrivalAt: 50, oldestHeldAt: 45 }), y: m({}) }),
    snap('w2', 95, { x: m({ inFlight: 1, arrivals: 1, lastMinute: 1, lastArrivalAt: 70, lastEndAt: 60, queued: 2 }) }),
    snap('w3', 95, { x: m({ held: 1, arrivals: 1, lastArrivalAt: 30, oldestHeldAt: 30 }) }),
  ]);
  assert.deepEqual(merged, {
    instance: 'pod-a',
    at: 100,
    workers: 3,
    models: {
      x: {
        held: 3,
        inFlight: 1,
        arrivals: 5,
        lastMinute: 3,
        lastArrivalAt: 70,
        lastEndAt: 60,
        lastHoldTimeoutAt: null,
        oldestHeldAt: 30,
        queued: 2,
      },
      y: EMPTY_MODEL_DEMAND,
    },
  });
});

test('a snapshot from a router without oldestHeldAt is read, and merges as none held', () => {
  const { oldestHeldAt: _, ...older } = m({ held: 1, arrivals: 1 });
  const parsed = parseSnapshot(snap('old', 10, { x: older }));
  assert.ok(parsed);
  assert.equal(mergeWorkers('pod', 10, [parsed]).models.x?.oldestHeldAt, null);
});

test("replicas add up, and activity ages are taken on each sender's clock, so clocks need not agree", () => {
  // replica B's clock is an hour ahead; its last arrival was 2 s before its snapshot, received 1 s ago
  const a = { snapshot: snap('a', 10_000, { x: m({ held: 1, lastArrivalAt: 5_000 }) }), receivedAt: 10_000 };
  const b = { snapshot: snap('b', 3_600_000 + 9_000, { x: m({ inFlight: 2, lastEndAt: 3_600_000 + 7_000 }) }), receivedAt: 9_000 };
  const totals = systemTotals([a, b], 10_000);
  assert.deepEqual(totals.get('x'), { held: 1, inFlight: 2, queued: 0, arrivals: 0, sinceActivityMs: 3_000 });
  assert.equal(load(totals.get('x')), 3);
});

test('requests waiting in flow control are demand: summed over replicas (a router that predates them says none), active, in the load', () => {
  const a = { snapshot: { ...snap('a', 9_000, {}), models: { x: { ...EMPTY_MODEL_DEMAND, queued: 4, inFlight: 2 } } }, receivedAt: 10_000 };
  const b = {
    snapshot: {
      ...snap('b', 9_000, {}),
      models: { x: { held: 0, inFlight: 1, arrivals: 0, lastArrivalAt: null, lastEndAt: null, lastHoldTimeoutAt: null } },
    },
    receivedAt: 10_000,
  };
  const totals = systemTotals([a, b], 10_000);
  assert.equal(totals.get('x')?.queued, 4);
  assert.equal(load(totals.get('x')), 7);
  assert.equal(isActive({ held: 0, inFlight: 0, queued: 1, arrivals: 0, sinceActivityMs: undefined }, 1000), true);
  assert.equal(parseSnapshot(JSON.parse(JSON.stringify(a.snapshot)))?.models.x?.queued, 4);
  assert.equal(parseSnapshot({ ...a.snapshot, models: { x: { ...EMPTY_MODEL_DEMAND, queued: -1 } } }), undefined);
  assert.equal(pending(a.snapshot), 6);
  assert.equal(countersOnly(a.snapshot).models.x?.queued, 0);
});

test('active: held, in flight, or activity within the grace period; nothing known is inactive', () => {
  assert.equal(isActive(undefined, 1000), false);
  assert.equal(isActive({ held: 1, inFlight: 0, queued: 0, arrivals: 0, sinceActivityMs: undefined }, 1000), true);
  assert.equal(isActive({ held: 0, inFlight: 1, queued: 0, arrivals: 0, sinceActivityMs: undefined }, 1000), true);
  assert.equal(isActive({ held: 0, inFlight: 0, queued: 0, arrivals: 5, sinceActivityMs: 999 }, 1000), true);
  assert.equal(isActive({ held: 0, inFlight: 0, queued: 0, arrivals: 5, sinceActivityMs: 1000 }, 1000), false);
});

test('a snapshot that stopped coming counts until it is older than the grace period', () => {
  const r = { snapshot: snap('b', 0, {}), receivedAt: 1_000 };
  assert.equal(withinAge([r], 1_000 + 300, 300).length, 1);
  assert.equal(withinAge([r], 1_000 + 301, 300).length, 0);
});

test("a peer's answer is refused whole when malformed, never half-counted", () => {
  const good = snap('b', 1, { x: m({ held: 1 }) });
  assert.deepEqual(parseSnapshot(JSON.parse(JSON.stringify(good))), good);
  for (const bad of [
    null,
    {},
    { ...good, workers: 0 },
    { ...good, models: { x: { ...good.models.x, held: -1 } } },
    { ...good, models: { x: { held: 1 } } },
    { ...good, instance: '' },
  ]) {
    assert.equal(parseSnapshot(bad), undefined, JSON.stringify(bad));
  }
});

test('targetValue: absent is 8; a number is taken; anything else is refused', () => {
  assert.equal(parseTarget(undefined), 8);
  assert.equal(parseTarget({ model: 'x' }), 8);
  assert.equal(parseTarget({ targetValue: '2.5' }), 2.5);
  assert.equal(parseTarget({ target: '3' }), 3, 'the older key still works');
  for (const bad of ['abc', '0', '-1', 'NaN', 'Infinity', '4x'])
    assert.throws(() => parseTarget({ targetValue: bad }), /positive number/, bad);
});

test('a request that times out in the hold queue starts the grace period (demand happened)', async (t) => {
  // the queue's tick and its clock are both the test's
  t.mock.timers.enable({ apis: ['setInterval'] });
  let now = 1_000;
  const catalog = new ModelCatalog({ now: () => now });
  catalog.setDeclarations('k8s', [{ model: 'm', replicasWanted: false }]);
  let tracker!: DemandTracker;
  const hold = new HoldQueue(catalog, {
    waitMs: () => 500,
    maxPerModel: 10,
    releasePerEndpoint: 1,
    tickMs: 5,
    now: () => now,
    onTimeout: (model) => tracker.holdTimedOut(model),
  });
  tracker = new DemandTracker(catalog, { graceMs: 10_000, wakeAlarmMs: 60_000, now: () => now }, silent, (model) => hold.held(model));
  hold.start();
  const h = hold.hold('m');
  now += 600;
  t.mock.timers.tick(5);
  assert.equal(await h.outcome, 'timeout');
  hold.stop();
  const s = tracker.snapshot('i', ['m']);
  assert.equal(s.models.m?.lastHoldTimeoutAt, 1_600);
  assert.equal(s.models.m?.arrivals, 0, 'arrivals are counted by the request path, not the queue');
  assert.equal(isActive(systemTotals([{ snapshot: s, receivedAt: now }], now + 9_999).get('m'), 10_000), true);
  assert.equal(isActive(systemTotals([{ snapshot: s, receivedAt: now }], now + 10_000).get('m'), 10_000), false);
});

test('the scaler over gRPC: the sum over instances, NOT_FOUND for an unknown model, INVALID_ARGUMENT for a bad target, UNAVAILABLE before the first sync', async () => {
  let synced = false;
  const lookup = (model: string): ModelLookup =>
    model === 'org/m'
      ? { kind: 'known', model }
      : model === 'alias'
        ? { kind: 'known', model: 'org/m' }
        : synced
          ? { kind: 'unknown' }
          : { kind: 'not-synced' };
  const view = new AggregateDemand({
    instance: 'a',
    locals: async () => [{ snapshot: snap('a', Date.now(), { 'org/m': m({ held: 2 }) }), receivedAt: Date.now() }],
    peers: { poll: async () => [{ snapshot: snap('b', Date.now(), { 'org/m': m({ inFlight: 3 }) }), receivedAt: Date.now() }] } as never,
    graceMs: 60_000,
  });
  const scaler = new KedaScaler({ lookup, totals: async () => (await view.system()).models, graceMs: 60_000 }, silent);
  await scaler.start('127.0.0.1', 0);
  const keda = kedaClient(`127.0.0.1:${scaler.port}`);
  const ref = (meta: Record<string, string>) => ({ name: 'so', namespace: 'ns', scalerMetadata: meta });
  try {
    assert.equal(await keda.isActive(ref({ model: 'alias' })), true);
    assert.equal(await keda.metric(ref({ model: 'org/m' })), 5, 'held here plus in flight on the peer');
    const spec = await keda.metricSpec(ref({ model: 'org/m', targetValue: '2.5' }));
    assert.deepEqual(
      spec.map((s) => [s.metricName, s.targetSize, s.targetSizeFloat]),
      [['llm-router-org-m', 3, 2.5]],
    );

    const early = await grpcCode(keda.isActive(ref({ model: 'nope' })));
    assert.equal(early.code, GRPC.UNAVAILABLE, 'before discovery listed, "unknown" would be a guess');
    synced = true;
    for (const call of [
      keda.isActive(ref({ model: 'nope' })),
      keda.metric(ref({ model: 'nope' })),
      keda.metricSpec(ref({ model: 'nope' })),
    ]) {
      const e = await grpcCode(call);
      assert.equal(e.code, GRPC.NOT_FOUND);
      assert.match(e.details, /"nope"/);
    }
    const bad = await grpcCode(keda.metricSpec(ref({ model: 'org/m', targetValue: 'abc' })));
    assert.equal(bad.code, GRPC.INVALID_ARGUMENT);
    assert.match(bad.details, /"abc"/);
    assert.equal((await grpcCode(keda.isActive(ref({})))).code, GRPC.INVALID_ARGUMENT, 'no model at all');
    const stream = keda.stream(ref({ model: 'nope' }));
    await until('StreamIsActive to answer', () => stream.errors.length > 0, 5_000);
    assert.equal(stream.errors[0]?.code, GRPC.NOT_FOUND, 'StreamIsActive refuses an unknown model too');
  } finally {
    keda.close();
    await scaler.stop();
  }
});

test('peers from pods: Ready, not terminating, with an IP; the llm-router/admin-port annotation, else the default port', async () => {
  const { peerUrls } = await import('../../src/router/scaling/peer-pods.js');
  const ready = [{ type: 'Ready', status: 'True' }];
  const pod = (name: string, ip: string | undefined, extra: Record<string, unknown> = {}) => ({
    metadata: { name, ...(extra.metadata as object) },
    status: { ...(ip ? { podIP: ip } : {}), conditions: (extra.conditions as object[]) ?? ready },
  });
  const urls = peerUrls(
    [
      pod('a', '10.0.0.7'),
      pod('b', '10.0.0.8', { metadata: { annotations: { 'llm-router/admin-port': '9100' } } }),
      pod('c', 'fd00::5'),
      pod('d', '10.0.0.9', { conditions: [{ type: 'Ready', status: 'False' }] }),
      pod('e', undefined),
      pod('f', '10.0.0.10', { metadata: { deletionTimestamp: '2026-12-01T00:00:00Z' } }),
      pod('g', '10.0.0.11', { metadata: { annotations: { 'llm-router/admin-port': 'nope' } } }),
    ],
    9090,
  );
  assert.deepEqual(urls, ['http://10.0.0.11:9090', 'http://10.0.0.7:9090', 'http://10.0.0.8:9100', 'http://[fd00::5]:9090']);
});
