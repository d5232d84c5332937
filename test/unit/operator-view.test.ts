// The pieces of the operator's view that are pure or in-process: client text made safe for the log, when a last error is past, the browser's Basic credentials, the timeline ring and what feeds
// it, the demand per minute, and the sentence that says why a model is in its state.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ModelCatalog } from '../../src/router/catalog/catalog.js';
import { lastErrorIsPast, type Endpoint } from '../../src/router/core/endpoint.js';
import { presentedKey } from '../../src/router/server/auth.js';
import { MinuteCount } from '../../src/router/scaling/minute-count.js';
import { DemandTracker } from '../../src/router/scaling/demand.js';
import { countersOnly, mergeWorkers } from '../../src/router/scaling/demand-snapshot.js';
import { explainModel } from '../../src/router/server/dashboard/explain.js';
import { TimelineRecorder } from '../../src/router/server/dashboard/recorder.js';
import { sharedHappening, Timeline, type TimelineEvent } from '../../src/router/server/dashboard/timeline.js';
import { errors } from '../../src/router/server/errors.js';
import { createLogger, loggable } from '../../src/router/util/log.js';

test('loggable: cut to 128 characters (a surrogate pair stays whole), then control characters escaped', () => {
  assert.equal(loggable('demo-chta'), 'demo-chta');
  assert.equal(loggable('a\nb\r\u001b[31mc\u007f\u0085\u2028'), 'a\\u000ab\\u000d\\u001b[31mc\\u007f\\u0085\\u2028');
  assert.equal(loggable('x'.repeat(10_000)), 'x'.repeat(128));
  const emoji = '\u{1F600}';
  assert.equal(loggable(emoji.repeat(200)), emoji.repeat(128));
  assert.equal(loggable(`${'y'.repeat(127)}\n`), `${'y'.repeat(127)}\\u000a`);
});

test('a last error is current until the endpoint is ready again after it, then past', () => {
  let now = 1_000;
  const c = new ModelCatalog({ now: () => now });
  c.setEndpoints('static', [{ id: 'a', url: 'http://a:8000', models: ['m'] }]);
  const e = (): Endpoint => c.endpoints()[0]!;
  c.setState(e(), 'discovered', 'connect ECONNREFUSED 127.0.0.1:8000');
  assert.equal(e().lastErrorAt, 1_000);
  assert.equal(lastErrorIsPast(e()), false, 'still starting: the error is the present');
  now = 2_000;
  c.setState(e(), 'ready');
  assert.equal(e().lastError, 'connect ECONNREFUSED 127.0.0.1:8000', 'the text is kept');
  assert.equal(lastErrorIsPast(e()), true, 'ready since: history');
  now = 3_000;
  // one probe timed out while ready (below the failure threshold): the state stays ready, the error is the present
  c.recordProbe(e(), { at: 3_000, ok: false, detail: 'timeout' });
  c.setState(e(), 'ready', 'timeout');
  assert.equal(lastErrorIsPast(e()), false);
  now = 4_000;
  c.recordProbe(e(), { at: 4_000, ok: true, detail: '/v1/models lists m' });
  assert.equal(lastErrorIsPast(e()), true, 'a good probe after it makes it past');
  c.setState(e(), 'failed', 'connect ECONNREFUSED');
  assert.equal(lastErrorIsPast(e()), false);
});

test('the key a browser sends with HTTP Basic is its password; Bearer and x-api-key are unchanged', () => {
  const basic = (s: string): string => `Basic ${Buffer.from(s).toString('base64')}`;
  assert.equal(presentedKey({ authorization: basic('operator:sk-1:with-colon') }), 'sk-1:with-colon');
  assert.equal(presentedKey({ authorization: basic(':sk-2') }), 'sk-2');
  assert.equal(presentedKey({ authorization: basic('no-password:') }), undefined);
  assert.equal(presentedKey({ authorization: basic('no-colon') }), undefined);
  assert.equal(presentedKey({ authorization: 'Basic !!!' }), undefined);
  assert.equal(presentedKey({ authorization: 'Bearer sk-3' }), 'sk-3');
  assert.equal(presentedKey({ 'x-api-key': 'sk-4' }), 'sk-4');
  assert.equal(errors.invalidApiKey('basic').headers?.['www-authenticate'], 'Basic realm="llm-router", charset="UTF-8"');
  assert.equal(errors.invalidApiKey().headers?.['www-authenticate'], 'Bearer');
});

test('the timeline keeps the last events in order, numbered, and tells its listeners', () => {
  let now = 0;
  const t = new Timeline(3, () => ++now);
  const heard: number[] = [];
  const off = t.subscribe((e) => heard.push(e.seq));
  for (let i = 0; i < 5; i++) t.add({ type: 'failover', model: `m${i}`, count: 1 });
  assert.deepEqual(
    t.recent().map((e) => [e.seq, e.at, e.type === 'failover' && e.model]),
    [
      [3, 3, 'm2'],
      [4, 4, 'm3'],
      [5, 5, 'm4'],
    ],
  );
  assert.deepEqual(
    t.recent(2).map((e) => e.seq),
    [4, 5],
  );
  off();
  t.add({ type: 'failover', model: 'late', count: 1 });
  assert.deepEqual(heard, [1, 2, 3, 4, 5]);
});

test('the recorder: endpoint and model state changes with why, cold starts kept per model, failovers in one event per model', (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const c = new ModelCatalog();
  const timeline = new Timeline();
  const events: TimelineEvent[] = [];
  timeline.subscribe((e) => events.push(e));
  c.setDeclarations('known-models', ['m']);
  const recorder = new TimelineRecorder(c, timeline, (model) => `why ${model} is ${c.model(model)?.status}`);
  recorder.start();
  assert.equal(typeof recorder.since('m'), 'number');
  c.setEndpoints('static', [{ id: 'a', url: 'http://a:8000', models: ['m'] }]);
  c.setState(c.endpoints()[0]!, 'ready');
  c.setDeclarations('known-models', []);
  c.setEndpoints('static', []);
  const shape = events.map((e) => {
    if (e.type === 'model-state') return `model ${e.model} ${e.from}->${e.to}: ${e.reason}`;
    if (e.type === 'endpoint-state') return `endpoint ${e.endpoint} ${e.from}->${e.to}`;
    return `${e.type} ${'endpoint' in e ? e.endpoint : ''}`;
  });
  assert.deepEqual(shape, [
    'endpoint-added http://a:8000',
    'model m scaled-to-zero->loading: why m is loading',
    'endpoint http://a:8000 discovered->ready',
    'model m loading->ready: why m is ready',
    'endpoint-removed http://a:8000',
    'model m ready->null: neither declared nor served any more',
  ]);

  for (let i = 0; i < 7; i++) recorder.coldStart({ model: 'x', kind: 'load', ms: 1_000 * i, at: i });
  assert.deepEqual(
    recorder.coldStarts('x').map((s) => s.ms),
    [2_000, 3_000, 4_000, 5_000, 6_000],
  );

  events.length = 0;
  for (let i = 0; i < 5; i++) recorder.failover('x');
  recorder.failover('y');
  assert.equal(events.length, 0, 'failovers wait for the window to end');
  t.mock.timers.tick(1_000);
  assert.deepEqual(
    events.map((e) => e.type === 'failover' && [e.model, e.count]),
    [
      ['x', 5],
      ['y', 1],
    ],
  );

  // streams broken mid-way (--migration-limit): continued or ended, one event per model per window
  events.length = 0;
  recorder.migration('x', true);
  recorder.migration('x', true);
  recorder.migration('x', false);
  assert.equal(events.length, 0);
  t.mock.timers.tick(1_000);
  assert.deepEqual(
    events.map((e) => e.type === 'migration' && [e.model, e.migrated, e.ended]),
    [['x', 2, 1]],
  );
  recorder.stop();
});

test('under --workers, what happens in one worker alone is shared with the others; what each observes is not', (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const c = new ModelCatalog();
  c.setDeclarations('known-models', ['m']);
  const shared: string[] = [];
  const timeline = new Timeline();
  const recorder = new TimelineRecorder(
    c,
    timeline,
    () => 'why',
    Date.now,
    (h) => shared.push(h.type),
  );
  recorder.start();
  c.setEndpoints('static', [{ id: 'a', url: 'http://a:8000', models: ['m'] }]);
  c.setState(c.endpoints()[0]!, 'ready');
  recorder.coldStart({ model: 'm', kind: 'load', ms: 1_000, at: 0 });
  recorder.adapterLoaded({ adapter: 'ad', endpoint: 'http://a:8000', result: 'loaded', seconds: 0.5, detail: '' });
  recorder.adapterUnloaded({ adapter: 'ad', endpoint: 'http://a:8000', reason: 'evicted', ok: true, detail: '' });
  recorder.failover('m');
  t.mock.timers.tick(1_000);
  assert.deepEqual(shared, ['adapter-load', 'adapter-unload', 'failover'], 'state changes and cold starts stay local');

  // another worker's news: added with where it came from, and told to nobody else
  recorder.relayed({ type: 'failover', model: 'm', count: 3 }, 2);
  const last = timeline.recent(1)[0]!;
  assert.deepEqual([last.type, last.worker], ['failover', 2]);
  assert.equal(shared.length, 3);
  assert.equal(timeline.recent().filter((e) => e.worker !== undefined).length, 1, 'own events carry no worker');
  recorder.stop();

  // what a relay may carry: the shared kinds with their names, nothing else
  assert.ok(sharedHappening({ type: 'failover', model: 'm', count: 1 }));
  assert.ok(sharedHappening({ type: 'migration', model: 'm', migrated: 1, ended: 0 }));
  assert.ok(sharedHappening({ type: 'adapter-load', adapter: 'a', endpoint: 'http://e', result: 'loaded', seconds: 1, detail: null }));
  for (const bad of [
    null,
    'failover',
    { type: 'model-state', model: 'm' },
    { type: 'failover', model: 1, count: 1 },
    { type: 'migration', model: 'm', migrated: '1', ended: 0 },
    { type: 'adapter-unload' },
  ])
    assert.equal(sharedHappening(bad), undefined, JSON.stringify(bad));
});

test("demand per minute: the router's own record of the last minute, right whenever it is asked, summed over workers", () => {
  const count = new MinuteCount();
  const t0 = 1_700_000_000_000;
  for (let s = 0; s < 30; s++) count.add(t0 + s * 1_000 + 500);
  assert.equal(count.total(t0 + 29_900), 30, 'asked after the traffic, not sampled while it ran');
  assert.equal(count.total(t0 + 59_000), 30, 'still within the minute');
  assert.equal(count.total(t0 + 75_000), 14, 'the first 16 seconds have left the window');
  assert.equal(count.total(t0 + 200_000), 0, 'nothing in the last minute');
  count.add(t0 + 200_000);
  count.add(t0 + 200_999);
  assert.equal(count.total(t0 + 201_000), 2, 'a bucket reused for a later second starts again');

  let now = t0;
  const tracker = (): DemandTracker =>
    new DemandTracker(
      new ModelCatalog(),
      { graceMs: 300_000, wakeAlarmMs: 60_000, now: () => now },
      createLogger({ level: 'silent', format: 'json' }),
    );
  const [w1, w2] = [tracker(), tracker()];
  for (let i = 0; i < 5; i++) w1.arrived('m');
  for (let i = 0; i < 7; i++) w2.arrived('m');
  w2.adapterArrived('m-lora');
  now += 30_000;
  const merged = mergeWorkers('i', now, [w1.snapshot('i', ['m', 'idle']), w2.snapshot('i', ['m', 'idle'])]);
  assert.equal(merged.models.m?.lastMinute, 12);
  assert.equal(merged.models.idle?.lastMinute, 0);
  assert.equal(merged.models['m-lora']?.lastMinute, 1);
  now += 61_000;
  assert.equal(w1.snapshot('i', ['m']).models.m?.lastMinute, 0);
  assert.equal(w1.snapshot('i', ['m']).models.m?.arrivals, 5, 'the counter since start stays');
  assert.equal(countersOnly(merged).models.m?.lastMinute, 0, "a silent worker's minute does not stand still");
});

test('why a model is in its state', () => {
  const c = new ModelCatalog();
  c.setDeclarations('kubernetes', ['m']);
  const view = () => c.model('m')!;
  const mine = () => c.endpoints().filter((e) => e.models.includes('m'));
  assert.equal(explainModel(view(), mine(), { held: 0, stalled: false }), 'no endpoint (declared by kubernetes)');
  assert.equal(
    explainModel(view(), mine(), { held: 2, stalled: true }),
    'no endpoint (declared by kubernetes); it has had demand past the wake alarm: check its autoscaler and workload; 2 requests held',
  );
  c.setDeclarations('kubernetes', [{ model: 'm', replicasWanted: true }]);
  assert.equal(
    explainModel(view(), mine(), { held: 0, stalled: false }),
    'replicas are wanted, but no endpoint is discovered yet (no Ready pod)',
  );
  c.setEndpoints('kubernetes', [{ id: 'p', url: 'http://p:8000', models: ['m'] }]);
  c.recordProbe(c.endpoints()[0]!, { at: 1, ok: false, detail: '/v1/models: 503' });
  c.setState(c.endpoints()[0]!, 'serving-api');
  assert.equal(
    explainModel(view(), mine(), { held: 1, stalled: false }),
    '1 endpoint coming up; http://p:8000 is serving-api: /v1/models: 503; 1 request held',
  );
  c.setState(c.endpoints()[0]!, 'failed', 'connect ECONNREFUSED');
  assert.equal(explainModel(view(), mine(), { held: 0, stalled: false }), 'every endpoint failed; http://p:8000: connect ECONNREFUSED');
  c.setServesInstead(c.endpoints()[0]!, ['Org/M']);
  assert.equal(
    explainModel(view(), mine(), { held: 0, stalled: false }),
    'http://p:8000 serves "Org/M", not "m": declare that name or an alias',
  );
  assert.deepEqual(view().why, { servesInstead: ['Org/M'] });
  c.setServesInstead(c.endpoints()[0]!, undefined);
  c.setState(c.endpoints()[0]!, 'ready');
  assert.equal(explainModel(view(), mine(), { held: 0, stalled: false }), '1 of 1 endpoint ready');
  c.setEndpoints('kubernetes', [
    { id: 'p', url: 'http://p:8000', models: ['m'] },
    { id: 'q', url: 'http://q:8000', models: ['m'] },
    { id: 'r', url: 'http://r:8000', models: ['m'] },
  ]);
  c.setState(c.endpoints().find((e) => e.id === 'r')!, 'failed', 'connect ECONNREFUSED');
  assert.equal(
    explainModel(view(), mine(), { held: 0, stalled: false }),
    '1 of 3 endpoints ready; 1 coming up; http://r:8000 failed: connect ECONNREFUSED',
  );
});
