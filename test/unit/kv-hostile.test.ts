// Hostile KV-event streams against a real subscriber: garbage frames, undecodable payloads, unknown event types, an
// event claiming 10^6 blocks, and a flood past the endpoint's capacity. Each is counted under its reason and logged
// once per reason, memory stays within the capacity, nothing throws, and good messages after them are still applied.
import { capturedLog } from '../support/captured-log.js';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { blockKeys } from '../../src/router/kv/block-key.js';
import { KvEvents } from '../../src/router/kv/kv-events.js';
import { createLogger } from '../../src/router/util/log.js';
import { batch, FakeKvEngine, pack, storedPositional, storedTagged, u64 } from '../support/kv-engine.js';
import { eventually, within } from '../support/within.js';

const BS = 4;
const WAIT = 30_000;

test('garbage, unknown types, a 10^6-block event and a flood: counted, logged once per reason, bounded, still consuming', async () => {
  const engine = await FakeKvEngine.start({ replay: false });
  const { log, lines } = capturedLog();
  const kv = new KvEvents({ log });
  const capacity = 500;
  try {
    kv.reconcile([{ endpointId: 'e1', eventsUrls: [engine.eventsUrl], replayUrls: [undefined], capacity }]);
    await within(WAIT, 'subscription', engine.subscribed());

    // frames that are not [topic, 8-byte seq, payload], many times over
    for (let i = 0; i < 20; i++) {
      await engine.raw(['only-one-frame']);
      await engine.raw(['', 'seq?', 'payload']);
      await engine.raw(['', u64(0), 'x', 'a fourth frame']);
    }
    // payloads that are not a batch, each under a seq of its own
    for (let i = 0; i < 20; i++) await engine.publish(Buffer.from([0xc1, 0xff, 0x00]));
    await engine.publish(pack('not a batch'));
    // unknown event types beside a good event: the good one is applied
    const first = Array.from({ length: BS }, (_, i) => 10_000 + i);
    await engine.publish(
      batch([
        ['BlockTeleported', [1n]],
        { type: 'SomethingNew', payload: [1, 2, 3] },
        storedTagged({ hashes: [0xaaaa_0000_0000_0001n], tokens: first, blockSize: BS }),
      ]),
    );
    // an event claiming 10^6 blocks (1 MB of hashes), and one whose header claims 2^32-1 with nothing behind it
    await engine.publish(pack([1, [['BlockStored', new Array(1_000_000).fill(7), null, [], BS]], 0]));
    await engine.publish(Buffer.from([0x93, 0x01, 0x91, 0xdd, 0xff, 0xff, 0xff, 0xff]));
    await eventually(
      'the good event applied',
      () => kv.index.match(blockKeys(first, BS), ['e1']).size,
      (n) => n === 1,
      WAIT,
    );

    // a flood: 2,000 batches of 4 new blocks each, 16 times the capacity
    for (let i = 0; i < 2000; i++) {
      const t = Array.from({ length: 4 * BS }, (_, k) => i * 100 + k);
      await engine.publish(
        batch([storedPositional({ hashes: [1n, 2n, 3n, 4n].map((h) => BigInt(i) * 16n + h), tokens: t, blockSize: BS })]),
      );
    }
    // then a good message, which must still be applied
    const last = Array.from({ length: 2 * BS }, (_, i) => 900_000 + i);
    await engine.publish(
      batch([storedPositional({ hashes: [0xbbbb_0000_0000_0001n, 0xbbbb_0000_0000_0002n], tokens: last, blockSize: BS })]),
    );
    await eventually(
      'the last batch applied',
      () => kv.index.match(blockKeys(last, BS), ['e1']).get('e1')?.total,
      (n) => n === 2,
      WAIT,
    );

    const c = kv.counters();
    assert.equal(c.malformed.frames, 60);
    assert.equal(c.malformed.msgpack, 20, 'the undecodable payloads');
    assert.equal(c.malformed['batch-shape'], 1);
    assert.equal(c.malformed['unknown-event'], 2);
    assert.equal(c.malformed['too-long'], 2, 'the 10^6-block event and the 2^32-1 claim, refused before allocation');
    assert.ok(kv.kvIndex.blocks('e1') <= capacity, `${kv.kvIndex.blocks('e1')} blocks indexed, capacity ${capacity}`);
    assert.ok(c.evicted > 0);
    // the high-water marks are far above 2,000 messages: nothing was dropped on the way, so every block was indexed
    assert.equal(c.gaps, 0);
    assert.equal(c.blocksStored, 1 + 2000 * 4 + 2);
    assert.equal(c.batches, 1 + 2000 + 1);
    const st = kv.statusOf('e1');
    assert.equal(st?.malformed, 60 + 20 + 1 + 2 + 2);
    // one log line per reason for this endpoint, however many times it came
    const malformedLines = lines.filter((l) => l.includes('kv events: malformed'));
    const reasons = malformedLines.map((l) => (JSON.parse(l) as { reason: string }).reason).sort();
    assert.deepEqual(reasons, ['batch-shape', 'frames', 'msgpack', 'too-long', 'unknown-event']);
  } finally {
    await within(WAIT, 'closing', Promise.all([kv.close(), engine.close()]));
  }
});

test('seqs going back and forth: every restart and rebuild counted, each logged once', async () => {
  const engine = await FakeKvEngine.start({ replay: false });
  const { log, lines } = capturedLog();
  const kv = new KvEvents({ log });
  try {
    kv.reconcile([{ endpointId: 'e1', eventsUrls: [engine.eventsUrl], replayUrls: [undefined] }]);
    await within(WAIT, 'subscription', engine.subscribed());
    const empty = batch([]);
    await engine.raw(['', u64(5), empty]); // joins at 5
    for (let i = 0; i < 10; i++) {
      await engine.raw(['', u64(0), empty]); // back to 0: a restart
      await engine.raw(['', u64(5), empty]); // 0 -> 5: a gap, no replay socket: a rebuild
    }
    await eventually(
      'all applied',
      () => kv.counters().batches,
      (n) => n === 21,
      WAIT,
    );
    const st = kv.statusOf('e1');
    assert.equal(st?.restarts, 10);
    assert.equal(st?.gaps, 10);
    assert.equal(st?.rebuilds, 10);
    assert.equal(lines.filter((l) => l.includes('sequence restarted')).length, 1);
    assert.equal(lines.filter((l) => l.includes('to rebuild them')).length, 1);
  } finally {
    await within(WAIT, 'closing', Promise.all([kv.close(), engine.close()]));
  }
});

test("an event of a block size other than the engine's declared one: counted as malformed (block-size), dropped", async () => {
  const engine = await FakeKvEngine.start({ replay: false });
  const kv = new KvEvents({ log: createLogger({ level: 'silent', format: 'json' }) });
  try {
    kv.reconcile([{ endpointId: 'e1', eventsUrls: [engine.eventsUrl], replayUrls: [undefined], blockSize: BS }]);
    await within(WAIT, 'subscription', engine.subscribed());
    const good = Array.from({ length: 2 * BS }, (_, i) => 50 + i);
    await engine.publish(batch([storedTagged({ hashes: [1n, 2n, 3n], tokens: [1, 2, 3], blockSize: 1 })]));
    await engine.publish(batch([storedTagged({ hashes: [4n, 5n], tokens: good, blockSize: BS })]));
    await eventually(
      'the good event applied',
      () => kv.index.match(blockKeys(good, BS), ['e1']).get('e1')?.total,
      (n) => n === 2,
      WAIT,
    );
    assert.equal(kv.counters().malformed['block-size'], 1);
    assert.equal(kv.statusOf('e1')?.malformed, 1);
    assert.equal(kv.kvIndex.blocks('e1'), 2);
    assert.equal(kv.index.blockSize('e1'), BS);
  } finally {
    await within(WAIT, 'closing', Promise.all([kv.close(), engine.close()]));
  }
});
