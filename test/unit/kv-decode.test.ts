// Decoding KV-event payloads made by an independent encoder (msgpackr, set to write what msgspec writes): both
// encodings, exact uint64 hashes above 2^53, 32-byte hashes, every event type, missing trailing fields, unknown extra
// fields; and hostile payloads, each refused or cut under its reason without throwing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DEFAULT_DECODE_LIMITS, decodeBatch, type KvBatch, type MalformedReason } from '../../src/router/kv/decode.js';
import { batch, pack, storedTagged } from '../support/kv-engine.js';

function decode(payload: Uint8Array, limits = DEFAULT_DECODE_LIMITS): { batch: KvBatch | undefined; bad: MalformedReason[] } {
  const bad: MalformedReason[] = [];
  const b = decodeBatch(payload, (r) => bad.push(r), limits);
  return { batch: b, bad };
}

const BIG = 0xfedc_ba98_7654_3210n; // above 2^63: msgpack uint64
const MID = (1n << 53n) + 1n; // above 2^53, below 2^63: int64; a float would make it 2^53
const BYTES = Buffer.from(Array.from({ length: 32 }, (_, i) => i * 7 + 1));

test('positional BlockStored (vLLM <= 0.26): uint64 hashes above 2^53 exact, tokens, block size, medium, LoRA', () => {
  const { batch: b, bad } = decode(
    batch([['BlockStored', [BIG, MID], 12345n, [1, 2, 3, 4, 5, 6, 7, 4_000_000_000], 4, 7, 'GPU', 'my-adapter']], 1_700_000_000.25, 3),
  );
  assert.deepEqual(bad, []);
  assert.equal(b?.ts, 1_700_000_000.25);
  assert.equal(b?.dpRank, 3);
  const ev = b?.events[0];
  assert.equal(ev?.kind, 'stored');
  if (ev?.kind !== 'stored') return;
  assert.deepEqual(ev.hashes, [BIG, MID]);
  assert.equal(ev.parent, 12345n);
  assert.deepEqual([...ev.tokens], [1, 2, 3, 4, 5, 6, 7, 4_000_000_000]);
  assert.equal(ev.blockSize, 4);
  assert.equal(ev.loraId, 7);
  assert.equal(ev.loraName, 'my-adapter');
  assert.equal(ev.tier, 'gpu');
});

test('positional events with trailing fields missing (older engines): no medium is GPU, no LoRA, no rank', () => {
  const { batch: b, bad } = decode(pack([5, [['BlockStored', [1n], null, [9, 9], 2], ['BlockRemoved', [1n]], ['AllBlocksCleared']]]));
  assert.deepEqual(bad, []);
  assert.equal(b?.dpRank, undefined);
  assert.deepEqual(
    b?.events.map((e) => [e.kind, 'tier' in e ? e.tier : '-']),
    [
      ['stored', 'gpu'],
      ['removed', 'gpu'],
      ['cleared', '-'],
    ],
  );
  const ev = b?.events[0];
  assert.ok(ev?.kind === 'stored' && ev.parent === undefined && ev.loraName === undefined && ev.loraId === undefined);
});

test('tagged maps (newer vLLM): every event type, 32-byte hashes as hex, offload media, extra unknown fields ignored', () => {
  const payload = pack({
    ts: 2.5,
    events: [
      {
        type: 'BlockStored',
        block_hashes: [BYTES],
        parent_block_hash: null,
        token_ids: [1, 2],
        block_size: 2,
        lora_id: null,
        medium: 'CPU',
        lora_name: null,
        extra_keys: [['mm-hash', 0]],
        group_idx: 0,
        kv_cache_spec_kind: 'full_attention',
        some_future_field: { nested: [1, 2, 3] },
      },
      { type: 'BlockRemoved', block_hashes: [BYTES, BIG], medium: 'LMCache', group_idx: 1, later: 'x' },
      { type: 'BlockStored', block_hashes: [BIG], parent_block_hash: BYTES, token_ids: [3, 4], block_size: 2, medium: 'disk' },
      { type: 'AllBlocksCleared', also_later: true },
    ],
    data_parallel_rank: 1,
    unknown_batch_field: [1],
  });
  const { batch: b, bad } = decode(payload);
  assert.deepEqual(bad, []);
  assert.equal(b?.ts, 2.5);
  assert.equal(b?.dpRank, 1);
  const [s, r, s2, c] = b?.events ?? [];
  assert.ok(s?.kind === 'stored');
  assert.deepEqual(s.hashes, [BYTES.toString('hex')]);
  assert.equal(s.tier, 'offload');
  assert.equal(s.medium, 'cpu');
  assert.equal(s.group, 0);
  assert.ok(r?.kind === 'removed');
  assert.deepEqual(r.hashes, [BYTES.toString('hex'), BIG]);
  assert.equal(r.tier, 'offload');
  assert.equal(r.group, 1);
  assert.ok(s2?.kind === 'stored');
  assert.equal(s2.parent, BYTES.toString('hex'));
  assert.equal(s2.medium, 'disk');
  assert.equal(c?.kind, 'cleared');
});

test('an integer hash decodes to one key whatever msgpack format carries it', () => {
  // 5 as a fixint, as uint64 (0xcf) and as int64 (0xd3): msgspec writes the smallest, other encoders may not
  const forms = [
    Buffer.from([0x05]),
    Buffer.from([0xcf, 0, 0, 0, 0, 0, 0, 0, 5]),
    Buffer.from([0xd3, 0, 0, 0, 0, 0, 0, 0, 5]),
    Buffer.from([0xcd, 0, 5]),
  ];
  for (const f of forms) {
    // [0, [["BlockRemoved", [<hash>]]]]
    const payload = Buffer.concat([Buffer.from([0x92, 0x00, 0x91, 0x92, 0xac]), Buffer.from('BlockRemoved'), Buffer.from([0x91]), f]);
    const { batch: b, bad } = decode(payload);
    assert.deepEqual(bad, []);
    const ev = b?.events[0];
    assert.ok(ev?.kind === 'removed');
    assert.deepEqual(ev.hashes, [5n], f.toString('hex'));
  }
  // a negative hash (Python's hash() of old engines) stays exact too
  const { batch: b } = decode(pack([0, [['BlockRemoved', [-(2n ** 62n) - 3n]]]]));
  assert.ok(b?.events[0]?.kind === 'removed');
  assert.deepEqual(b.events[0].hashes, [-(2n ** 62n) - 3n]);
});

test('hostile payloads: refused under their reason, never thrown, the good events of a batch kept', () => {
  const cases: [string, Uint8Array, MalformedReason[], number][] = [
    ['not msgpack (a reserved byte)', Buffer.from([0xc1, 0x00]), ['msgpack'], -1],
    ['truncated', pack([1, [['BlockRemoved', [1n, 2n]]]]).subarray(0, 10), ['msgpack'], -1],
    ['trailing bytes', Buffer.concat([pack([1, []]), Buffer.from([0])]), ['msgpack'], -1],
    ['empty', Buffer.alloc(0), ['msgpack'], -1],
    ['a string batch', pack('hello'), ['batch-shape'], -1],
    ['events not an array', pack([1, 'x', 0]), ['batch-shape'], -1],
    ['an event that is a number', pack([1, [7, ['AllBlocksCleared']]]), ['event-shape'], 1],
    [
      'an unknown event type',
      pack([1, [['BlockMoved', [1n]], { type: 'Nope' }, ['AllBlocksCleared']]]),
      ['unknown-event', 'unknown-event'],
      1,
    ],
    ['a float hash', pack([1, [['BlockRemoved', [1.5]], ['AllBlocksCleared']]]), ['hash'], 1],
    ['a string hash', pack([1, [['BlockRemoved', ['abc']]]]), ['hash'], 0],
    ['an empty bytes hash', pack([1, [['BlockRemoved', [Buffer.alloc(0)]]]]), ['hash'], 0],
    ['a negative token', pack([1, [['BlockStored', [1n], null, [-1, 2], 2]]]), ['token'], 0],
    ['a float token', pack([1, [['BlockStored', [1n], null, [1.5, 2], 2]]]), ['token'], 0],
    ['tokens not blocks x block size', pack([1, [['BlockStored', [1n, 2n], null, [1, 2, 3], 2]]]), ['token-count'], 0],
    ['block size 0', pack([1, [['BlockStored', [], null, [], 0]]]), ['event-shape'], 0],
    ['a medium that is a number', pack([1, [['BlockRemoved', [1n], 5]]]), ['event-shape'], 0],
    [
      'a lora name that is a number',
      pack([1, [storedTagged({ hashes: [1n], tokens: [1], blockSize: 1, loraName: 5 as never })]]),
      ['event-shape'],
      0,
    ],
    ['a map key that is not a string', Buffer.from([0x81, 0xc0, 0x01]), ['msgpack'], -1],
    ['a string longer than any name', pack([1, [['AllBlocksCleared', 'x'.repeat(5000)]]]), ['too-long'], -1],
    ['bytes longer than any hash', pack([1, [['BlockRemoved', [Buffer.alloc(100)]]]]), ['too-long'], -1],
  ];
  for (const [what, payload, reasons, kept] of cases) {
    const { batch: b, bad } = decode(payload);
    assert.deepEqual(bad, reasons, what);
    if (kept < 0) assert.equal(b, undefined, what);
    else assert.equal(b?.events.length, kept, what);
  }
});

test('sizes: an event claiming 10^6 blocks is refused before it is allocated; caps cut batches and events', () => {
  // a header claiming 2^32-1 hashes and nothing after it
  const claim = Buffer.concat([
    Buffer.from([0x92, 0x00, 0x91, 0x92, 0xac]),
    Buffer.from('BlockRemoved'),
    Buffer.from([0xdd, 0xff, 0xff, 0xff, 0xff]),
  ]);
  let t = process.hrtime.bigint();
  assert.deepEqual(decode(claim).bad, ['too-long']);
  // and 10^6 real hashes (1 MB of fixints): the array header is over the cap, so no 10^6-entry array is made
  const million = pack([1, [['BlockRemoved', new Array(1_000_000).fill(1)]]]);
  assert.deepEqual(decode(million).bad, ['too-long']);
  t = process.hrtime.bigint() - t;
  assert.ok(t < 2_000_000_000n, `refusing took ${t} ns`);
  // a payload over the byte cap is refused before decoding
  const small = { ...DEFAULT_DECODE_LIMITS, maxPayloadBytes: 100 };
  assert.deepEqual(decode(pack([1, [['AllBlocksCleared']], 'x'.repeat(200)]), small).bad, ['too-long']);

  const limits = { maxPayloadBytes: 1 << 20, maxEventsPerBatch: 3, maxBlocksPerEvent: 4, maxTokensPerBatch: 20, maxArrayLength: 1000 };
  const events = Array.from({ length: 5 }, () => ['AllBlocksCleared']);
  let r = decode(pack([1, events]), limits);
  assert.deepEqual(r.bad, ['events-capped']);
  assert.equal(r.batch?.events.length, 3);
  // 6 blocks of 2: the first 4 are kept, with their tokens
  r = decode(pack([1, [['BlockStored', [1n, 2n, 3n, 4n, 5n, 6n], null, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12], 2]]]), limits);
  assert.deepEqual(r.bad, ['blocks-capped']);
  const ev = r.batch?.events[0];
  assert.ok(ev?.kind === 'stored');
  assert.deepEqual(ev.hashes, [1n, 2n, 3n, 4n]);
  assert.deepEqual([...ev.tokens], [1, 2, 3, 4, 5, 6, 7, 8]);
  // 8 + 8 tokens fit in 20; the third event's 8 do not: it and the rest are skipped
  const stored = ['BlockStored', [1n, 2n], null, [1, 2, 3, 4, 5, 6, 7, 8], 4];
  r = decode(pack([1, [stored, stored, stored, ['AllBlocksCleared']]]), { ...limits, maxEventsPerBatch: 10 });
  assert.deepEqual(r.bad, ['tokens-capped']);
  assert.equal(r.batch?.events.length, 2);
});

test('deep nesting and random bytes never throw out of decodeBatch', () => {
  const deep = Buffer.concat([Buffer.alloc(200_000, 0x91), Buffer.from([0xc0])]);
  assert.equal(decodeBatch(deep), undefined);
  let seed = 12345;
  const rand = () => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed;
  };
  const base = pack([1, [['BlockStored', [BIG], null, [1, 2, 3, 4], 4, null, 'GPU'], { type: 'BlockRemoved', block_hashes: [BYTES] }], 0]);
  for (let i = 0; i < 2000; i++) {
    const b = Buffer.from(base);
    for (let k = 0; k < 1 + (rand() % 4); k++) b[rand() % b.length] = rand() & 0xff;
    decodeBatch(b.subarray(0, rand() % (b.length + 1)));
  }
});
