// The reflector's supervision: backoff jitter, one log line per backoff step, and (on a fake clock, with a fake
// informer, so without real waiting or an API server) restarts, their backoff and its reset, and the periodic resync.
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { KubeConfig, type Informer, type KubernetesListObject, type KubernetesObject } from '@kubernetes/client-node';
import { FailureLog, jittered, Reflector } from '../../src/router/discovery/kubernetes/reflector.js';
import type { Logger } from '../../src/router/util/log.js';
import { FakeClock } from '../support/clock.js';

test('reflector backoff jitter: a delay in the upper half of the backoff, so replicas do not retry in step', () => {
  assert.equal(
    jittered(1000, () => 0),
    500,
  );
  assert.equal(
    jittered(1000, () => 1),
    1000,
  );
  const seen = new Set(Array.from({ length: 50 }, () => jittered(10_000)));
  assert.ok(seen.size > 10, 'spread out');
  for (const d of seen) assert.ok(d >= 5_000 && d <= 10_000);
});

test('failures of several kinds are logged once per backoff step, naming every kind that failed meanwhile', async () => {
  const lines: { resources: string[]; retryInMs: number }[] = [];
  const log = {
    warn: (o: { resources: string[]; retryInMs: number }) => lines.push(o),
  } as unknown as Logger;
  let now = 0;
  const failures = new FailureLog(log, () => now);
  for (const kind of ['pods', 'deployments', 'statefulsets', 'leaderworkersets']) failures.report(kind, 'ECONNREFUSED', 500);
  assert.deepEqual(
    lines.map((l) => l.resources),
    [['pods']],
    'the first failure is logged at once; the other kinds wait for the next step',
  );
  now = 400;
  for (const kind of ['pods', 'deployments']) failures.report(kind, 'ECONNREFUSED', 1_000);
  assert.equal(lines.length, 1, 'nothing within the step');
  now = 600;
  failures.report('pods', 'ECONNREFUSED', 2_000);
  assert.deepEqual(lines[1], {
    resources: ['deployments', 'leaderworkersets', 'pods', 'statefulsets'],
    retryInMs: 2_000,
    error: 'ECONNREFUSED',
  });
});

/** an informer's callbacks take an object or an error, by verb */
type Callback = (arg: never) => void;

/** An informer whose start() fails while `failing` is set, else lists; it can also report an error later, as a watch does. */
class FakeInformer implements Informer<KubernetesObject> {
  /** clock time of every start() */
  readonly starts: number[] = [];
  stops = 0;
  failing = false;
  private readonly handlers = new Map<string, Callback[]>();

  constructor(
    private readonly clock: FakeClock,
    private readonly list: () => Promise<KubernetesListObject<KubernetesObject>>,
  ) {}

  on(verb: string, cb: Callback): void {
    this.handlers.set(verb, [...(this.handlers.get(verb) ?? []), cb]);
  }

  off(verb: string, cb: Callback): void {
    this.handlers.set(
      verb,
      (this.handlers.get(verb) ?? []).filter((h) => h !== cb),
    );
  }

  async start(): Promise<void> {
    this.starts.push(this.clock.now());
    if (this.failing) throw new Error('connect ECONNREFUSED');
    await this.list();
  }

  async stop(): Promise<void> {
    this.stops++;
  }

  /** the watch broke after it had started */
  emitError(message: string): void {
    for (const cb of this.handlers.get('error') ?? []) (cb as (err: Error) => void)(new Error(message));
  }
}

interface Warning {
  readonly resources?: string[];
  readonly resource?: string;
  readonly retryInMs: number;
}

function recordingLog(lines: Warning[]): Logger {
  return { warn: (o: Warning) => lines.push(o), info: () => undefined } as unknown as Logger;
}

function startReflector(
  t: TestContext,
  clock: FakeClock,
  resource: string,
  opts: { log: Logger; failures?: FailureLog; resyncMs?: number; failing?: boolean },
): FakeInformer {
  let informer: FakeInformer | undefined;
  const reflector = new Reflector<KubernetesObject>({
    resource,
    path: `/api/v1/namespaces/default/${resource}`,
    list: async () => ({ metadata: { resourceVersion: '1' }, items: [] }),
    kubeConfig: new KubeConfig(),
    labelSelector: undefined,
    resyncMs: opts.resyncMs ?? 3_600_000,
    onChange: () => undefined,
    onSynced: () => undefined,
    log: opts.log,
    maxBackoffMs: 4_000,
    ...(opts.failures ? { failures: opts.failures } : {}),
    clock,
    // the upper half of the backoff, three quarters in: delay = 0.75 × backoff
    random: () => 0.5,
    informer: (list) => {
      informer = new FakeInformer(clock, list);
      informer.failing = opts.failing ?? false;
      return informer;
    },
  });
  t.after(() => reflector.stop());
  reflector.start();
  return informer as FakeInformer;
}

/** ms between successive starts */
function gaps(starts: readonly number[]): number[] {
  return starts.slice(1).map((at, i) => at - (starts[i] as number));
}

test('reflector: a failed watch restarts after a jittered backoff that doubles to its cap, and the backoff resets after a success', async (t) => {
  const clock = new FakeClock();
  const lines: Warning[] = [];
  const informer = startReflector(t, clock, 'pods', { log: recordingLog(lines) });
  await clock.advance(0);
  informer.failing = true;
  informer.emitError('watch connection reset');
  // 500, 1 000, 2 000, 4 000, then the cap of 4 000; each × 0.75
  await clock.advance(375 + 750 + 1_500 + 3_000 + 3_000 + 3_000);
  assert.deepEqual(gaps(informer.starts.slice(1)), [750, 1_500, 3_000, 3_000, 3_000]);
  assert.deepEqual(
    lines.map((l) => l.retryInMs),
    [375, 750, 1_500, 3_000, 3_000, 3_000, 3_000],
    'one warning per failure (the last start failed too), naming the pause',
  );
  informer.failing = false;
  await clock.advance(3_000);
  const okAt = informer.starts.length;
  informer.failing = true;
  informer.emitError('watch connection reset');
  await clock.advance(375 + 750);
  assert.deepEqual(gaps(informer.starts.slice(okAt - 1)), [375, 750], 'after a good start the backoff starts over at 500 ms');
});

test('reflector: kinds failing together against one API server log one line per backoff step', async (t) => {
  const clock = new FakeClock();
  const lines: Warning[] = [];
  const log = recordingLog(lines);
  const failures = new FailureLog(log, () => clock.now());
  const pods = startReflector(t, clock, 'pods', { log, failures, failing: true });
  const deployments = startReflector(t, clock, 'deployments', { log, failures, failing: true });
  await clock.advance(0);
  await clock.advance(375 + 750 + 1_500);
  assert.equal(pods.starts.length, 4);
  assert.equal(deployments.starts.length, 4);
  assert.deepEqual(
    lines.map((l) => l.resources),
    [['pods'], ['deployments', 'pods'], ['deployments', 'pods'], ['deployments', 'pods']],
    'eight failures, four steps, four lines',
  );
});

test('reflector: the watch is restarted from its resourceVersion every resync period', async (t) => {
  const clock = new FakeClock();
  const informer = startReflector(t, clock, 'pods', { log: recordingLog([]), resyncMs: 60_000 });
  await clock.advance(59_999);
  assert.equal(informer.starts.length, 1);
  await clock.advance(1);
  assert.equal(informer.stops, 1);
  assert.equal(informer.starts.length, 2);
  await clock.advance(120_000);
  assert.deepEqual(gaps(informer.starts), [60_000, 60_000, 60_000]);
});
