// The subscriber against real zeromq sockets in this process (a PUB and a ROUTER as vLLM has them, on 127.0.0.1 with
// ports the OS picks): the live stream builds the index; a batch lost on the way is replayed from the first missing
// seq; without a replay socket, or when the engine's buffer no longer reaches back, the endpoint's blocks are dropped
// and rebuilt; a sequence that restarts clears; reconcile takes an endpoint's blocks with it. Every wait is bounded.
import { capturedLog } from '../support/captured-log.js';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { blockKeys } from '../../src/router/kv/block-key.js';
import { KvEvents } from '../../src/router/kv/kv-events.js';
import type { KvJoinReplay } from '../../src/router/kv/subscriber.js';
import { batch, FakeKvEngine, storedPositional, storedTagged } from '../support/kv-engine.js';
import { eventually, within } from '../support/within.js';
import { Router } from 'zeromq';

const BS = 4;
const WAIT = 15_000;

/** A logger whose lines the test can read. */

/** tokens 0..n-1 shifted by `base`, so chains of different bases share no block */
function tokens(n: number, base = 0): number[] {
  return Array.from({ length: n }, (_, i) => base + i);
}

/** A BlockStored for blocks [from, to) of `toks`, hashed h(i) = base hash + i, chained to block from-1. */
function storedRange(toks: number[], from: number, to: number, hashBase: bigint, tagged = false): unknown {
  const spec = {
    hashes: Array.from({ length: to - from }, (_, i) => hashBase + BigInt(from + i)),
    parent: from === 0 ? null : hashBase + BigInt(from - 1),
    tokens: toks.slice(from * BS, to * BS),
    blockSize: BS,
  };
  return tagged ? storedTagged(spec) : storedPositional(spec);
}

/** How many leading blocks of `toks` the endpoint holds (any tier), 0 when none. */
function held(kv: KvEvents, id: string, toks: number[]): number {
  return kv.index.match(blockKeys(toks, BS), [id]).get(id)?.total ?? 0;
}

const H = 0xf000_0000_0000_0000n; // engine hashes above 2^63, as vLLM's are

/** Waits for the replay the subscriber asks when it joins rank `rank`'s stream to end. */
async function joined(kv: KvEvents, id: string, rank = 0): Promise<KvJoinReplay> {
  return (await eventually(
    'the join replay',
    () => kv.statusOf(id)?.ranks[rank]?.joinReplay,
    (j) => j !== undefined,
    WAIT,
  )) as KvJoinReplay;
}

async function setup(opts: { replay?: boolean; bufferSize?: number; capacity?: number } = {}) {
  const engine = await FakeKvEngine.start(opts);
  const { log, lines } = capturedLog();
  const kv = new KvEvents({ log, replayTimeoutMs: 3000 });
  kv.reconcile([
    {
      endpointId: 'e1',
      eventsUrls: [engine.eventsUrl],
      replayUrls: [engine.replayUrl],
      ...(opts.capacity === undefined ? {} : { capacity: opts.capacity }),
    },
  ]);
  await within(WAIT, 'the subscription to reach the engine', engine.subscribed());
  // with a replay socket, the router first asks for what the engine buffered (nothing yet): the tests begin after it
  if (engine.replayUrl !== undefined) await joined(kv, 'e1');
  return {
    engine,
    kv,
    lines,
    async close() {
      await within(WAIT, 'closing', Promise.all([kv.close(), engine.close()]));
    },
  };
}

test('the live stream builds the index, chained across batches and both encodings; status follows it', async () => {
  const { engine, kv, close } = await setup();
  try {
    const t = tokens(6 * BS);
    await engine.publish(batch([storedRange(t, 0, 2, H)]));
    await engine.publish(batch([storedRange(t, 2, 4, H, true)])); // newer encoding, parent from the batch before
    await engine.publish(batch([storedRange(t, 4, 6, H)]));
    await eventually(
      'six blocks held',
      () => held(kv, 'e1', t),
      (n) => n === 6,
      WAIT,
    );
    const st = kv.statusOf('e1');
    assert.equal(st?.blocks, 6);
    assert.equal(st?.ranks[0]?.lastSeq, 2);
    assert.equal(st?.ranks[0]?.dpRank, 0);
    assert.equal(st?.gaps, 0);
    assert.ok(st?.lastEventAt !== undefined);
    await eventually(
      'connected',
      () => kv.statusOf('e1')?.connected,
      (c) => c === true,
      WAIT,
    );
    assert.equal(kv.index.blockSize('e1'), BS);
    const c = kv.counters();
    assert.equal(c.batches, 3);
    assert.equal(c.stored, 3);
    assert.equal(c.blocksStored, 6);
  } finally {
    await close();
  }
});

test('a batch lost on the way is replayed from the first missing seq, removals included', async () => {
  const { engine, kv, close } = await setup();
  try {
    const t = tokens(6 * BS);
    const other = tokens(2 * BS, 1000);
    await engine.publish(batch([storedRange(t, 0, 2, H), storedRange(other, 0, 2, H + 0x100n)])); // seq 0
    await eventually(
      'seq 0 applied',
      () => held(kv, 'e1', t),
      (n) => n === 2,
      WAIT,
    );
    // seq 1 and 2 are lost: 1 extends the chain, 2 removes the other chain; seq 3 extends again and is delivered
    await engine.publish(batch([storedRange(t, 2, 4, H)]), { drop: true });
    await engine.publish(batch([['BlockRemoved', [H + 0x100n, H + 0x101n], 'GPU']]), { drop: true });
    await engine.publish(batch([storedRange(t, 4, 6, H)]));
    await eventually(
      'the whole chain held',
      () => held(kv, 'e1', t),
      (n) => n === 6,
      WAIT,
    );
    assert.equal(held(kv, 'e1', other), 0, 'the lost removal was replayed');
    assert.deepEqual(engine.replaysAsked, [0, 1], 'asked for everything on joining, then from the first missing seq');
    const st = kv.statusOf('e1');
    assert.equal(st?.gaps, 1);
    assert.equal(st?.replays, 2);
    assert.equal(st?.rebuilds, 0);
    assert.equal(st?.ranks[0]?.lastSeq, 3);
  } finally {
    await close();
  }
});

test('without a replay socket a gap drops the endpoint blocks, rebuilt from the live stream', async () => {
  const { engine, kv, close } = await setup({ replay: false });
  try {
    const a = tokens(2 * BS);
    const b = tokens(2 * BS, 500);
    await engine.publish(batch([storedRange(a, 0, 2, H)]));
    await eventually(
      'a held',
      () => held(kv, 'e1', a),
      (n) => n === 2,
      WAIT,
    );
    await engine.publish(batch([['BlockRemoved', [H], 'GPU']]), { drop: true }); // a removal we never see
    await engine.publish(batch([storedRange(b, 0, 2, H + 0x200n)]));
    await eventually(
      'b held',
      () => held(kv, 'e1', b),
      (n) => n === 2,
      WAIT,
    );
    assert.equal(held(kv, 'e1', a), 0, 'blocks from before the gap are dropped');
    const st = kv.statusOf('e1');
    assert.equal(st?.gaps, 1);
    assert.equal(st?.rebuilds, 1);
    assert.equal(st?.replays, 0);
    assert.equal(st?.blocks, 2);
  } finally {
    await close();
  }
});

test('a replay that cannot reach back to the gap drops the blocks and applies what the engine still has', async () => {
  const { engine, kv, close } = await setup({ bufferSize: 3 });
  try {
    const a = tokens(2 * BS);
    const b = tokens(3 * BS, 700);
    await engine.publish(batch([storedRange(a, 0, 2, H)])); // seq 0
    await eventually(
      'a held',
      () => held(kv, 'e1', a),
      (n) => n === 2,
      WAIT,
    );
    await engine.publish(batch([['BlockRemoved', [H + 1n], 'GPU']]), { drop: true }); // seq 1, falls out of the buffer (of 3)
    await engine.publish(batch([storedRange(b, 0, 1, H + 0x300n)]), { drop: true }); // seq 2, still buffered
    await engine.publish(batch([storedRange(b, 1, 2, H + 0x300n)]), { drop: true }); // seq 3, still buffered
    await engine.publish(batch([storedRange(b, 2, 3, H + 0x300n)])); // seq 4, live
    await eventually(
      'b held',
      () => held(kv, 'e1', b),
      (n) => n === 3,
      WAIT,
    );
    assert.equal(held(kv, 'e1', a), 0, 'blocks from before the unfillable gap are dropped');
    const c = kv.counters();
    assert.equal(c.gaps, 1);
    assert.equal(c.replays, 2, 'the join, then the gap');
    assert.equal(c.replayFailures, 1);
    assert.equal(c.rebuilds, 1);
  } finally {
    await close();
  }
});

test('a sequence that restarts (the engine restarted) clears the endpoint first', async () => {
  const { engine, kv, close } = await setup();
  try {
    const a = tokens(2 * BS);
    const b = tokens(2 * BS, 900);
    await engine.publish(batch([storedRange(a, 0, 1, H)]));
    await engine.publish(batch([storedRange(a, 1, 2, H)]));
    await eventually(
      'a held',
      () => held(kv, 'e1', a),
      (n) => n === 2,
      WAIT,
    );
    engine.restart();
    await engine.publish(batch([storedRange(b, 0, 2, H + 0x400n)])); // seq 0 again
    await eventually(
      'b held',
      () => held(kv, 'e1', b),
      (n) => n === 2,
      WAIT,
    );
    assert.equal(held(kv, 'e1', a), 0);
    const st = kv.statusOf('e1');
    assert.equal(st?.restarts, 1);
    assert.equal(st?.gaps, 0);
    assert.equal(st?.ranks[0]?.lastSeq, 0);
  } finally {
    await close();
  }
});

test('joining late replays what the engine buffered before the subscription', async () => {
  const engine = await FakeKvEngine.start();
  const { log } = capturedLog();
  const kv = new KvEvents({ log, replayTimeoutMs: 3000 });
  try {
    const t = tokens(3 * BS);
    // published before anyone subscribed: PUB drops these (the slow joiner), the replay buffer keeps them
    await engine.publish(batch([storedRange(t, 0, 1, H)]));
    await engine.publish(batch([storedRange(t, 1, 2, H)]));
    kv.reconcile([{ endpointId: 'e1', eventsUrls: [engine.eventsUrl], replayUrls: [engine.replayUrl] }]);
    await within(WAIT, 'subscription', engine.subscribed());
    await engine.publish(batch([storedRange(t, 2, 3, H)])); // seq 2, the first this subscriber sees
    await eventually(
      'all three held',
      () => held(kv, 'e1', t),
      (n) => n === 3,
      WAIT,
    );
    assert.deepEqual(engine.replaysAsked, [0]);
    const st = kv.statusOf('e1');
    assert.equal(st?.gaps, 0, 'joining late is not a gap');
    assert.equal(st?.rebuilds, 0);
  } finally {
    await within(WAIT, 'closing', Promise.all([kv.close(), engine.close()]));
  }
});

test('joining after the engine stored blocks: the replay asked at once indexes them, before the engine publishes again', async () => {
  const engine = await FakeKvEngine.start();
  const { log } = capturedLog();
  const kv = new KvEvents({ log, replayTimeoutMs: 3000 });
  try {
    const t = tokens(3 * BS);
    // stored before this router subscribed: PUB dropped them for it, the engine's buffer keeps them
    for (let i = 0; i < 3; i++) await engine.publish(batch([storedRange(t, i, i + 1, H)]));
    kv.reconcile([{ endpointId: 'e1', eventsUrls: [engine.eventsUrl], replayUrls: [engine.replayUrl] }]);
    const join = await joined(kv, 'e1');
    assert.equal(held(kv, 'e1', t), 3, 'known without another event');
    assert.deepEqual({ ...join, at: 0 }, { at: 0, firstSeq: 0, lastSeq: 2, batches: 3, blocks: 3, complete: true, error: undefined });
    assert.deepEqual(engine.replaysAsked, [0]);
    // the stream goes on from there: the next seq is no gap
    await engine.publish(batch([['BlockRemoved', [H + 2n], 'GPU']]));
    await eventually(
      'the removal applied',
      () => held(kv, 'e1', t),
      (n) => n === 2,
      WAIT,
    );
    const st = kv.statusOf('e1');
    assert.deepEqual([st?.gaps, st?.replays, st?.restarts, st?.rebuilds, st?.ranks[0]?.lastSeq], [0, 1, 0, 0, 3]);
  } finally {
    await within(WAIT, 'closing', Promise.all([kv.close(), engine.close()]));
  }
});

test('joining when the engine buffer no longer reaches seq 0: what it has is indexed, and the status says it is partial', async () => {
  const engine = await FakeKvEngine.start({ bufferSize: 2 });
  const { log, lines } = capturedLog();
  const kv = new KvEvents({ log, replayTimeoutMs: 3000 });
  try {
    const t = tokens(4 * BS, 500);
    for (let i = 0; i < 4; i++) await engine.publish(batch([storedRange(t, i, i + 1, H)]));
    const late = tokens(2 * BS, 900);
    await engine.publish(batch([storedRange(late, 0, 2, H + 0x900n)])); // seq 4: the buffer keeps 3 and 4
    kv.reconcile([{ endpointId: 'e1', eventsUrls: [engine.eventsUrl], replayUrls: [engine.replayUrl] }]);
    const join = await joined(kv, 'e1');
    assert.equal(join.complete, false);
    assert.deepEqual([join.firstSeq, join.lastSeq, join.batches], [3, 4, 2]);
    assert.match(join.error ?? '', /began at 3/);
    // seq 3 chains to a parent this router never saw: not indexed; seq 4 is a chain of its own
    assert.equal(held(kv, 'e1', late), 2);
    assert.equal(join.blocks, 2);
    assert.equal(kv.counters().replayFailures, 0, 'an answer that begins later is no failed replay');
    assert.equal(lines.filter((l) => l.includes('did not reach back to seq 0')).length, 1);
  } finally {
    await within(WAIT, 'closing', Promise.all([kv.close(), engine.close()]));
  }
});

test('live messages queued while the join replay ran are applied once; a restart among them is still a restart', async () => {
  const engine = await FakeKvEngine.start({ replayDelayMs: 500 });
  const { log } = capturedLog();
  const kv = new KvEvents({ log, replayTimeoutMs: 3000 });
  try {
    const t = tokens(4 * BS, 2000);
    await engine.publish(batch([storedRange(t, 0, 1, H)], 1)); // seq 0, before the subscription: only in the buffer
    kv.reconcile([{ endpointId: 'e1', eventsUrls: [engine.eventsUrl], replayUrls: [engine.replayUrl] }]);
    await within(WAIT, 'subscription', engine.subscribed());
    // while the replay is held back: these go out live (queued by the router) and into the buffer the replay sends
    for (let i = 1; i < 3; i++) await engine.publish(batch([storedRange(t, i, i + 1, H)], 1 + i));
    const join = await joined(kv, 'e1');
    assert.deepEqual([join.firstSeq, join.lastSeq, join.batches], [0, 2, 3]);
    await engine.publish(batch([storedRange(t, 3, 4, H)], 4)); // seq 3
    await eventually(
      'seq 3 applied',
      () => held(kv, 'e1', t),
      (n) => n === 4,
      WAIT,
    );
    const st = kv.statusOf('e1');
    assert.deepEqual([st?.restarts, st?.gaps, st?.rebuilds], [0, 0, 0], 'the live copies of replayed batches were skipped');
    assert.equal(kv.counters().batches, 4, 'each batch applied once');

    // a second router joins this engine, whose buffer holds seqs 0..3; the engine restarts before anything live arrives
    const other = new KvEvents({ log, replayTimeoutMs: 3000 });
    try {
      other.reconcile([{ endpointId: 'e2', eventsUrls: [engine.eventsUrl], replayUrls: [engine.replayUrl] }]);
      await joined(other, 'e2');
      assert.equal(held(other, 'e2', t), 4);
      engine.restart();
      const fresh = tokens(BS, 7000);
      await engine.publish(batch([storedRange(fresh, 0, 1, H + 0x7000n)], 100)); // seq 0 again, another payload
      await eventually(
        'the restart seen',
        () => other.statusOf('e2')?.restarts,
        (n) => n === 1,
        WAIT,
      );
      assert.equal(held(other, 'e2', t), 0, 'the old blocks were dropped');
      assert.equal(held(other, 'e2', fresh), 1);
    } finally {
      await within(WAIT, 'closing the second', other.close());
    }
    await eventually(
      'the first router sees the restart too',
      () => kv.statusOf('e1')?.restarts,
      (n) => n === 1,
      WAIT,
    );
  } finally {
    await within(WAIT, 'closing', Promise.all([kv.close(), engine.close()]));
  }
});

test('reconcile: an endpoint leaving takes its blocks; a changed URL resubscribes; the same set changes nothing', async () => {
  const e1 = await FakeKvEngine.start();
  const e2 = await FakeKvEngine.start();
  const { log } = capturedLog();
  const kv = new KvEvents({ log });
  try {
    const t = tokens(2 * BS);
    const sources = [
      { endpointId: 'e1', eventsUrls: [e1.eventsUrl], replayUrls: [e1.replayUrl] },
      { endpointId: 'e2', eventsUrls: [e2.eventsUrl], replayUrls: [undefined] },
    ];
    kv.reconcile(sources);
    await within(WAIT, 'subscriptions', Promise.all([e1.subscribed(), e2.subscribed()]));
    await e1.publish(batch([storedRange(t, 0, 2, H)]));
    await e2.publish(batch([storedRange(t, 0, 1, H)]));
    await eventually(
      'both hold',
      () => kv.index.match(blockKeys(t, BS), ['e1', 'e2']).size,
      (n) => n === 2,
      WAIT,
    );
    kv.reconcile(sources.map((s) => ({ ...s }))); // same set: nothing changes
    assert.equal(held(kv, 'e1', t), 2);
    kv.reconcile([sources[0]!]);
    assert.equal(held(kv, 'e2', t), 0, 'the endpoint that left took its blocks');
    assert.equal(kv.statusOf('e2'), undefined);
    assert.deepEqual(
      kv.status().map((s) => s.endpointId),
      ['e1'],
    );
    // e1 now points at e2's engine: its old blocks go, it follows the new URL
    kv.reconcile([{ endpointId: 'e1', eventsUrls: [e2.eventsUrl], replayUrls: [undefined] }]);
    assert.equal(held(kv, 'e1', t), 0);
    await eventually(
      'e1 subscribed at its new URL',
      () => kv.statusOf('e1')?.connected,
      (c) => c === true,
      WAIT,
    );
    // a subscription may take a moment after the connection; publish until one arrives (e2's seq moves on)
    await eventually(
      'e1 holds what e2 publishes',
      async () => {
        await e2.publish(batch([storedRange(t, 0, 1, H)]));
        return held(kv, 'e1', t);
      },
      (n) => n === 1,
      WAIT,
      100,
    );
  } finally {
    await within(WAIT, 'closing', Promise.all([kv.close(), e1.close(), e2.close()]));
  }
  assert.deepEqual(kv.status(), []);
});

test('two ranks of one endpoint: each its own stream and sequence; the endpoint matches with its best rank', async () => {
  const r0 = await FakeKvEngine.start();
  const r1 = await FakeKvEngine.start({ replay: false });
  const { log } = capturedLog();
  const kv = new KvEvents({ log });
  try {
    kv.reconcile([{ endpointId: 'dp', eventsUrls: [r0.eventsUrl, r1.eventsUrl], replayUrls: [r0.replayUrl, undefined] }]);
    await within(WAIT, 'subscriptions', Promise.all([r0.subscribed(), r1.subscribed()]));
    const t = tokens(3 * BS);
    // the same engine hashes on both ranks (a fixed hash seed): removing on one rank must not remove on the other
    await r0.publish(batch([storedRange(t, 0, 3, H)], 1, 0));
    await r1.publish(batch([storedRange(t, 0, 2, H)], 1, 1));
    await eventually(
      'both ranks indexed',
      () => kv.statusOf('dp')?.blocks,
      (n) => n === 5,
      WAIT,
    );
    assert.deepEqual(kv.index.match(blockKeys(t, BS), ['dp']).get('dp'), { gpu: 3, total: 3 });
    await r0.publish(batch([['BlockRemoved', [H + 1n, H + 2n], 'GPU']], 2, 0));
    await eventually(
      'rank 0 removal applied',
      () => kv.statusOf('dp')?.blocks,
      (n) => n === 3,
      WAIT,
    );
    assert.deepEqual(kv.index.match(blockKeys(t, BS), ['dp']).get('dp'), { gpu: 2, total: 2 }, 'rank 1 still holds two');
    assert.deepEqual(
      kv.statusOf('dp')?.ranks.map((r) => [r.lastSeq, r.dpRank]),
      [
        [1, 0],
        [0, 1],
      ],
    );
  } finally {
    await within(WAIT, 'closing', Promise.all([kv.close(), r0.close(), r1.close()]));
  }
});

test('a replay socket that never answers: the wait is bounded, then the endpoint is rebuilt', async () => {
  const engine = await FakeKvEngine.start({ replay: false });
  const silent = new Router({ linger: 0 }); // accepts the request, never answers
  await silent.bind('tcp://127.0.0.1:*');
  const { log } = capturedLog();
  const kv = new KvEvents({ log, replayTimeoutMs: 300 });
  try {
    kv.reconcile([{ endpointId: 'e1', eventsUrls: [engine.eventsUrl], replayUrls: [silent.lastEndpoint as string] }]);
    await within(WAIT, 'subscription', engine.subscribed());
    // the replay asked on joining gets no answer either: it fails in bounded time, and says so
    const join = await joined(kv, 'e1');
    assert.equal(join.complete, false);
    assert.equal(join.batches, 0);
    assert.match(join.error ?? '', /timed out/);
    const a = tokens(2 * BS);
    const b = tokens(2 * BS, 300);
    await engine.publish(batch([storedRange(a, 0, 2, H)]));
    await eventually(
      'a held',
      () => held(kv, 'e1', a),
      (n) => n === 2,
      WAIT,
    );
    await engine.publish(batch([]), { drop: true });
    await engine.publish(batch([storedRange(b, 0, 2, H + 0x500n)]));
    await eventually(
      'b held',
      () => held(kv, 'e1', b),
      (n) => n === 2,
      WAIT,
    );
    assert.equal(held(kv, 'e1', a), 0);
    const st = kv.statusOf('e1');
    assert.equal(st?.replays, 2, 'the join, then the gap');
    assert.equal(st?.rebuilds, 1);
    assert.match(st?.lastError ?? '', /replay/);
    assert.equal(kv.counters().replayFailures, 2);
  } finally {
    silent.close();
    await within(WAIT, 'closing', Promise.all([kv.close(), engine.close()]));
  }
});

test('a URL zeromq refuses is reported in the status, nothing throws; close() ends everything and twice is fine', async () => {
  const { log } = capturedLog();
  const kv = new KvEvents({ log });
  kv.reconcile([{ endpointId: 'bad', eventsUrls: ['not a url'], replayUrls: [undefined] }]);
  await eventually(
    'the error reported',
    () => kv.statusOf('bad')?.lastError ?? '',
    (e) => e !== '',
    WAIT,
  );
  assert.match(kv.statusOf('bad')?.lastError ?? '', /subscribing to not a url/);
  assert.equal(kv.statusOf('bad')?.connected, false);
  await within(WAIT, 'close', kv.close());
  await within(WAIT, 'close again', kv.close());
  kv.reconcile([{ endpointId: 'late', eventsUrls: ['tcp://127.0.0.1:1'], replayUrls: [undefined] }]);
  assert.deepEqual(kv.status(), [], 'a closed KvEvents subscribes nothing');
});

test('the topic filter: only batches under the configured topic are applied', async () => {
  const engine = await FakeKvEngine.start({ replay: false });
  const { log } = capturedLog();
  const kv = new KvEvents({ log, topic: 'kv@' });
  try {
    kv.reconcile([{ endpointId: 'e1', eventsUrls: [engine.eventsUrl], replayUrls: [undefined] }]);
    await within(WAIT, 'subscription', engine.subscribed());
    const a = tokens(BS);
    const b = tokens(BS, 40);
    await engine.publish(batch([storedRange(a, 0, 1, H)]), { topic: 'other' });
    await engine.publish(batch([storedRange(b, 0, 1, H + 0x600n)]), { topic: 'kv@model' });
    await eventually(
      'b held',
      () => held(kv, 'e1', b),
      (n) => n === 1,
      WAIT,
    );
    assert.equal(held(kv, 'e1', a), 0);
    assert.equal(kv.counters().batches, 1);
  } finally {
    await within(WAIT, 'closing', Promise.all([kv.close(), engine.close()]));
  }
});

test('status follows the connection: down when the engine goes away', async () => {
  const engine = await FakeKvEngine.start({ replay: false });
  const { log } = capturedLog();
  const kv = new KvEvents({ log });
  try {
    kv.reconcile([{ endpointId: 'e1', eventsUrls: [engine.eventsUrl], replayUrls: [undefined] }]);
    await eventually(
      'connected',
      () => kv.statusOf('e1')?.connected,
      (c) => c === true,
      WAIT,
    );
    await within(WAIT, 'engine closed', engine.close());
    await eventually(
      'disconnected',
      () => kv.statusOf('e1')?.connected,
      (c) => c === false,
      WAIT,
    );
  } finally {
    await within(WAIT, 'closing', kv.close());
  }
});
