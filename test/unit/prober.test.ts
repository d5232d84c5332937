// The prober's schedule on a fake clock, with a fake engine check: which interval applies in which state, without
// real waiting and without a network.
import { Writable } from 'node:stream';
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { ModelCatalog } from '../../src/router/catalog/catalog.js';
import type { ProbeConfig } from '../../src/router/config/config.js';
import { Prober } from '../../src/router/health/prober.js';
import type { ProbeResult } from '../../src/router/health/rules.js';
import { createLogger } from '../../src/router/util/log.js';
import { FakeClock } from '../support/clock.js';

const CFG: ProbeConfig = {
  intervalMs: 1_000,
  wakeIntervalMs: 250,
  readyIntervalMs: 10_000,
  timeoutMs: 500,
  failureThreshold: 2,
  successThreshold: 1,
  startupTimeoutMs: 600_000,
  warmup: false,
};
const LOADING: ProbeResult = { verdict: 'serving-api', refused: false, detail: 'model not listed yet' };
const READY: ProbeResult = { verdict: 'ready', refused: false, detail: 'ok' };
const GONE: ProbeResult = { verdict: 'unreachable', refused: true, detail: 'ECONNREFUSED' };

interface Harness {
  readonly clock: FakeClock;
  readonly catalog: ModelCatalog;
  /** ms after start of every probe so far */
  readonly probes: number[];
  answer: ProbeResult;
  held: boolean;
  /** ms since start */
  elapsed(): number;
}

function startProber(t: TestContext): Harness {
  const clock = new FakeClock();
  const start = clock.now();
  const catalog = new ModelCatalog({ now: () => clock.now() });
  catalog.setEndpoints('static', [{ id: 'e', url: 'http://engine.invalid:8000', models: ['m'] }]);
  const h: Harness = { clock, catalog, probes: [], answer: LOADING, held: false, elapsed: () => clock.now() - start };
  const prober = new Prober(
    catalog,
    {
      kind: 'vllm',
      probe: CFG,
      apiKey: undefined,
      passiveFailureThreshold: 3,
      wanted: () => h.held,
      clock,
      check: async () => {
        h.probes.push(clock.now() - start);
        return h.answer;
      },
    },
    createLogger({ level: 'silent', format: 'json' }),
  );
  prober.start();
  t.after(() => prober.stop());
  return h;
}

function state(h: Harness): string {
  return (h.catalog.endpoints()[0] as { state: string }).state;
}

/** ms between successive probes, from the `from`-th on */
function gaps(h: Harness, from: number): number[] {
  return h.probes.slice(from + 1).map((at, i) => at - (h.probes[from + i] as number));
}

test('prober: a coming-up endpoint is probed every --probe-interval, a ready one every --probe-ready-interval', async (t) => {
  const h = startProber(t);
  await h.clock.advance(3_000);
  assert.deepEqual(h.probes, [0, 1_000, 2_000, 3_000], 'probed at once, then every probe interval');
  assert.equal(state(h), 'serving-api');
  h.answer = READY;
  await h.clock.advance(1_000);
  assert.equal(state(h), 'ready');
  await h.clock.advance(CFG.readyIntervalMs - 1);
  assert.equal(h.probes.length, 5, 'no probe before the ready interval is up');
  await h.clock.advance(1);
  assert.deepEqual(h.probes.slice(4), [4_000, 14_000]);
});

test('prober: while requests are held for its model, a coming-up or failed endpoint is probed at the wake interval', async (t) => {
  const h = startProber(t);
  h.held = true;
  await h.clock.advance(1_000);
  assert.deepEqual(h.probes, [0, 250, 500, 750, 1_000]);
  h.held = false;
  await h.clock.advance(2_000);
  // the probe at 1 000 was scheduled while requests were held
  assert.deepEqual(h.probes.slice(5), [1_250, 2_250], 'back to the probe interval once nothing is held');
  // failed: ready once, then gone
  h.answer = READY;
  await h.clock.advance(1_000);
  h.answer = GONE;
  await h.clock.advance(CFG.readyIntervalMs);
  assert.equal(state(h), 'failed');
  h.held = true;
  const failedAt = h.probes.length - 1;
  await h.clock.advance((h.probes[failedAt] as number) + 2_000 - h.elapsed());
  // the backoff's first step was set before anything was held; from then on, the wake interval
  assert.deepEqual(gaps(h, failedAt), [1_000, 250, 250, 250, 250]);
});

test('prober: a failed endpoint is probed with a backoff that doubles to 30 s, and starts over once it was ready again', async (t) => {
  const h = startProber(t);
  h.answer = READY;
  await h.clock.advance(0);
  assert.equal(state(h), 'ready');
  h.answer = GONE;
  await h.clock.advance(CFG.readyIntervalMs);
  assert.equal(state(h), 'failed', 'a refused connection fails a ready endpoint at once');
  const failedAt = h.probes.length - 1;
  await h.clock.advance(1_000 + 2_000 + 4_000 + 8_000 + 16_000 + 30_000 + 30_000);
  assert.deepEqual(gaps(h, failedAt), [1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000]);
  h.answer = READY;
  await h.clock.advance(30_000);
  assert.equal(state(h), 'ready');
  h.answer = GONE;
  await h.clock.advance(CFG.readyIntervalMs);
  assert.equal(state(h), 'failed');
  const again = h.probes.length - 1;
  await h.clock.advance(1_000 + 2_000);
  assert.deepEqual(gaps(h, again), [1_000, 2_000], 'the backoff starts over');
});

test('prober: what a probe reads of where the models are loaded from goes on the endpoint, once per change', async (t) => {
  const h = startProber(t);
  const events: string[] = [];
  h.catalog.onChange((e) => {
    if (e.type === 'model-roots') events.push([...e.endpoint.modelRoots].join());
  });
  h.answer = { ...READY, roots: new Map([['m', 'Qwen/Qwen3-8B']]) };
  await h.clock.advance(1_000);
  assert.deepEqual([...(h.catalog.endpoints()[0]?.modelRoots ?? [])], [['m', 'Qwen/Qwen3-8B']]);
  await h.clock.advance(30_000);
  assert.deepEqual(events, ['m,Qwen/Qwen3-8B'], 'the same answer again is no change');
  // an engine restarted with another model under the same name
  h.answer = { ...READY, roots: new Map([['m', '/models/other']]) };
  await h.clock.advance(15_000);
  assert.deepEqual(events, ['m,Qwen/Qwen3-8B', 'm,/models/other']);
});

test('prober: an engine serving another model makes its model unavailable at once, naming it, with one WARN line per endpoint and model', async (t) => {
  const clock = new FakeClock();
  const catalog = new ModelCatalog({ now: () => clock.now() });
  catalog.setDeclarations('static', ['qwen3-8b', 'other']);
  catalog.setEndpoints('static', [{ id: 'e', url: 'http://10.1.2.3:8000', models: ['qwen3-8b', 'other'] }]);
  let answer: ProbeResult = {
    verdict: 'serving-api',
    refused: false,
    detail: '/v1/models lists [Qwen/Qwen3-8B], not qwen3-8b, other',
    mismatch: { serves: ['Qwen/Qwen3-8B'], missing: ['qwen3-8b', 'other'] },
  };
  const lines: string[] = [];
  const out = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(
        ...chunk
          .toString()
          .split('\n')
          .filter((l) => l !== ''),
      );
      done();
    },
  });
  const log = createLogger({ level: 'info', format: 'json', out });
  const prober = new Prober(
    catalog,
    { kind: 'vllm', probe: CFG, apiKey: undefined, passiveFailureThreshold: 3, clock, check: async () => answer },
    log,
  );
  prober.start();
  t.after(() => prober.stop());
  await clock.advance(0);
  const r = catalog.resolve('qwen3-8b');
  assert.equal(r.kind, 'unavailable');
  assert.equal(r.kind === 'unavailable' && r.state, 'unavailable');
  assert.deepEqual(r.kind === 'unavailable' && r.why, { servesInstead: ['Qwen/Qwen3-8B'] });
  await clock.advance(120_000);
  const warns = lines.filter((l) => l.includes('engine serves a different model'));
  assert.equal(warns.length, 2, 'once per model, not per probe');
  assert.match(warns[0] as string, /"level":40/);
  assert.match(
    warns[0] as string,
    /http:\/\/10\.1\.2\.3:8000 serves \\"Qwen\/Qwen3-8B\\", not \\"qwen3-8b\\"; declare that name or an alias/,
  );
  answer = READY;
  await clock.advance(30_000);
  assert.equal(catalog.resolve('qwen3-8b').kind, 'routable');
  assert.equal(catalog.endpoints()[0]?.servesInstead, undefined);
});
