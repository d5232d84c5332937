// The engine's KV cache and its events (what vLLM's block pool emits), and their msgpack encodings.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { decode, Encoder } from '@msgpack/msgpack';
import { EngineKvCache, hashAsInt, type KvCacheEvent } from '../../src/tools/sim/kv-cache.js';
import { encodeBatch } from '../../src/tools/sim/kv-events.js';
import { parseFlags, UsageError } from '../../src/router/config/flags.js';
import { SIM_FLAGS, simOptionsFromFlags, simSettings } from '../../src/tools/sim/flags.js';

const range = (n: number, from = 0): number[] => Array.from({ length: n }, (_, i) => from + i);

function recording(capacity: number, blockSize: number): { cache: EngineKvCache; steps: KvCacheEvent[][] } {
  const steps: KvCacheEvent[][] = [];
  return { cache: new EngineKvCache(capacity, blockSize, (events) => steps.push(events)), steps };
}

function stored(e: KvCacheEvent | undefined): Extract<KvCacheEvent, { type: 'BlockStored' }> {
  assert.equal(e?.type, 'BlockStored');
  return e as Extract<KvCacheEvent, { type: 'BlockStored' }>;
}

test('a request stores its new full blocks in one BlockStored: chained to the cached parent, with only the new tokens', () => {
  const { cache, steps } = recording(100, 4);
  // 10 tokens: two full blocks, the partial third is never cached
  assert.equal(cache.admit(range(10)), 0);
  assert.equal(steps.length, 1);
  const first = stored(steps[0]?.[0]);
  assert.equal(steps[0]?.length, 1);
  assert.equal(first.blockHashes.length, 2);
  assert.equal(first.parentBlockHash, null);
  assert.deepEqual(first.tokenIds, range(8));
  assert.equal(first.blockSize, 4);
  assert.equal(first.loraId, null);
  assert.equal(first.loraName, null);
  for (const h of first.blockHashes) assert.equal(h.length, 32);
  // shares the first 8 tokens, then differs: one new block, its parent the second block above
  assert.equal(cache.admit([...range(8), 100, 101, 102, 103, 104]), 2);
  const second = stored(steps[1]?.[0]);
  assert.equal(second.blockHashes.length, 1);
  assert.deepEqual(second.parentBlockHash, first.blockHashes[1]);
  assert.deepEqual(second.tokenIds, [100, 101, 102, 103]);
  // a prompt that is all cached stores nothing, so publishes nothing
  assert.equal(cache.admit(range(8)), 2);
  assert.equal(steps.length, 2);
  // the same block after another parent is another block
  cache.admit([...range(4, 50), ...range(4, 4)]);
  const third = stored(steps[2]?.[0]);
  assert.equal(third.blockHashes.length, 2);
  assert.notDeepEqual(third.blockHashes[1], first.blockHashes[1]);
  assert.equal(cache.size, 5);
});

test('evictions are BlockRemoved events, one block each, least recently used and tails first, before the store', () => {
  const { cache, steps } = recording(4, 2);
  cache.admit(range(4)); // A1 A2
  cache.admit([...range(4), 9, 9]); // A1 A2 hit, B3 stored
  const a = stored(steps[0]?.[0]).blockHashes;
  const b3 = stored(steps[1]?.[0]).blockHashes[0];
  // three new blocks need room for two: B3 (the least recent, a tail) and then A2 go, A1 stays
  cache.admit(range(6, 20));
  const step = steps[2] as KvCacheEvent[];
  assert.deepEqual(
    step.map((e) => e.type),
    ['BlockRemoved', 'BlockRemoved', 'BlockStored'],
  );
  assert.deepEqual(step[0], { type: 'BlockRemoved', blockHashes: [b3] });
  assert.deepEqual(step[1], { type: 'BlockRemoved', blockHashes: [a[1]] });
  assert.equal(stored(step[2]).blockHashes.length, 3);
  assert.equal(cache.size, 4);
  assert.equal(cache.admit(range(4)), 1);
  // a prompt longer than the whole cache caches only what fits
  const { cache: small, steps: smallSteps } = recording(2, 2);
  small.admit(range(8));
  assert.equal(stored(smallSteps[0]?.[0]).blockHashes.length, 2);
  assert.deepEqual(stored(smallSteps[0]?.[0]).tokenIds, range(4));
  assert.equal(smallSteps[0]?.length, 1);
});

test('LoRA adapters cache in chains of their own and name themselves (lora_name, and lora_id in order of first use)', () => {
  const { cache, steps } = recording(100, 4);
  cache.admit(range(8));
  assert.equal(cache.admit(range(8), 'sql'), 0);
  const base = stored(steps[0]?.[0]);
  const sql = stored(steps[1]?.[0]);
  assert.equal(sql.parentBlockHash, null);
  assert.notDeepEqual(sql.blockHashes[0], base.blockHashes[0]);
  assert.equal(sql.loraName, 'sql');
  assert.equal(sql.loraId, 1);
  cache.admit(range(8), 'chat');
  assert.equal(stored(steps[2]?.[0]).loraId, 2);
  assert.equal(cache.admit(range(8), 'sql'), 2);
});

test('hashes are seeded per process: another engine, or a restart, names the same tokens otherwise; a clear does not', () => {
  const one = recording(100, 4);
  const two = recording(100, 4);
  one.cache.admit(range(8));
  two.cache.admit(range(8));
  const h1 = stored(one.steps[0]?.[0]).blockHashes;
  assert.notDeepEqual(stored(two.steps[0]?.[0]).blockHashes, h1);
  one.cache.clear();
  assert.deepEqual(one.steps[1], [{ type: 'AllBlocksCleared' }]);
  assert.equal(one.cache.size, 0);
  assert.equal(one.cache.admit(range(8)), 0);
  assert.deepEqual(stored(one.steps[2]?.[0]).blockHashes, h1);
  // a restart empties the cache silently and reseeds
  one.cache.restart();
  assert.equal(one.steps.length, 3);
  assert.equal(one.cache.admit(range(8)), 0);
  const after = stored(one.steps[3]?.[0]);
  assert.notDeepEqual(after.blockHashes[0], h1[0]);
  assert.equal(after.parentBlockHash, null);
  // without a sink there are no events (and no engine hashes), but the cache works the same
  const quiet = new EngineKvCache(100, 4);
  assert.equal(quiet.admit(range(8)), 0);
  assert.equal(quiet.admit(range(12)), 2);
  quiet.clear();
  assert.equal(quiet.admit(range(8)), 0);
});

test('the int form of a hash is its low 64 bits; above 2^53 most of the time', () => {
  const buf = Buffer.alloc(32, 0);
  buf.writeBigUInt64BE(0xfedcba9876543210n, 24);
  assert.equal(hashAsInt(buf), 0xfedcba9876543210n);
  const { cache, steps } = recording(1000, 1);
  cache.admit(range(64));
  const ints = stored(steps[0]?.[0]).blockHashes.map(hashAsInt);
  assert.ok(ints.filter((v) => v > 2n ** 53n).length > 32, 'most hashes above 2^53');
});

const SAMPLE: KvCacheEvent[] = [
  { type: 'BlockRemoved', blockHashes: [Buffer.alloc(32, 1)] },
  {
    type: 'BlockStored',
    blockHashes: [Buffer.alloc(32, 0xff), Buffer.concat([Buffer.alloc(28), Buffer.from([0, 0, 0, 7])])],
    parentBlockHash: Buffer.alloc(32, 2),
    tokenIds: [1, 2, 3, 4],
    blockSize: 2,
    loraId: 3,
    loraName: 'sql',
  },
  { type: 'AllBlocksCleared' },
];

test('map encoding: tagged maps as newer vLLM sends them; int hashes as uint64 (shortest form below 2^32)', () => {
  const bytes = encodeBatch(new Encoder({ useBigInt64: true }), 1700000000.5, SAMPLE, 'map', 'int');
  const batch = decode(bytes, { useBigInt64: true });
  assert.deepEqual(batch, {
    ts: 1700000000.5,
    events: [
      { type: 'BlockRemoved', block_hashes: [0x0101010101010101n], medium: 'GPU' },
      {
        type: 'BlockStored',
        block_hashes: [0xffffffffffffffffn, 7],
        parent_block_hash: 0x0202020202020202n,
        token_ids: [1, 2, 3, 4],
        block_size: 2,
        lora_id: 3,
        medium: 'GPU',
        lora_name: 'sql',
      },
      { type: 'AllBlocksCleared' },
    ],
    data_parallel_rank: 0,
  });
  // the key order is msgspec's: the tag first, then the struct's fields
  assert.deepEqual(Object.keys((batch as { events: object[] }).events[1] as object), [
    'type',
    'block_hashes',
    'parent_block_hash',
    'token_ids',
    'block_size',
    'lora_id',
    'medium',
    'lora_name',
  ]);
});

test('array encoding: array-like structs as vLLM <= 0.26 sends them; bytes hashes as 32-byte bin; ts always a float', () => {
  const bytes = encodeBatch(new Encoder({ useBigInt64: true }), 1700000000, SAMPLE, 'array', 'bytes');
  // fixarray of 3, then a float64: a whole-second timestamp is still written as a float
  assert.equal(bytes[0], 0x93);
  assert.equal(bytes[1], 0xcb);
  const [ts, events, rank] = decode(bytes) as [number, unknown[], number];
  assert.ok(Math.abs(ts - 1700000000) < 0.001);
  assert.equal(rank, 0);
  assert.deepEqual(events, [
    ['BlockRemoved', [new Uint8Array(32).fill(1)], 'GPU'],
    [
      'BlockStored',
      [new Uint8Array(32).fill(0xff), new Uint8Array([...new Uint8Array(28), 0, 0, 0, 7])],
      new Uint8Array(32).fill(2),
      [1, 2, 3, 4],
      2,
      3,
      'GPU',
      'sql',
    ],
    ['AllBlocksCleared'],
  ]);
});

test('sim flags: events are off without --kv-events-port; its settings and their defaults', () => {
  const read = (argv: string[], env: Record<string, string> = {}) =>
    simOptionsFromFlags(parseFlags(argv, SIM_FLAGS, { env, envPrefix: 'LLM_ROUTER_SIM_' }).values);
  assert.equal(read([]).kvEvents, undefined);
  assert.deepEqual(read(['--kv-events-port', '0']).kvEvents, { port: 0, encoding: 'map', hashes: 'int', topic: '', bufferSteps: 10000 });
  assert.deepEqual(
    read([
      '--kv-events-port',
      '5557',
      '--kv-events-replay-port',
      '5558',
      '--kv-events-encoding',
      'array',
      '--kv-events-hashes',
      'bytes',
      '--kv-events-topic',
      'kv',
      '--kv-events-buffer-steps',
      '5',
    ]).kvEvents,
    { port: 5557, replayPort: 5558, encoding: 'array', hashes: 'bytes', topic: 'kv', bufferSteps: 5 },
  );
  assert.equal(read([], { LLM_ROUTER_SIM_KV_EVENTS_PORT: '7000' }).kvEvents?.port, 7000);
  assert.throws(() => read(['--kv-events-replay-port', '1']), UsageError);
  assert.throws(() => read(['--kv-events-port', '1', '--kv-events-encoding', 'json']), UsageError);
  // in process, a setting left out takes its flag's default
  assert.deepEqual(simSettings({ kvEvents: { port: 0, hashes: 'bytes' } }).kvEvents, {
    port: 0,
    encoding: 'map',
    hashes: 'bytes',
    topic: '',
    bufferSteps: 10000,
  });
  assert.equal(simSettings({}).kvEvents, undefined);
});
