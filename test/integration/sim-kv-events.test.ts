// `llm-router sim` publishing KV-cache events as vLLM does, read the way any consumer would: a ZMQ subscriber and a
// replay DEALER of the test's own, payloads decoded with @msgpack/msgpack directly (no router code).
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { decode } from '@msgpack/msgpack';
import { Dealer, Subscriber } from 'zeromq';
import { stopAll } from '../support/process.js';
import { call, simKvEndpoints, startSim, type Running } from '../support/router.js';
import { within } from '../support/within.js';

const sockets: Array<{ close(): void }> = [];
after(async () => {
  for (const s of sockets) s.close();
  await stopAll();
});

interface Message {
  readonly topic: string;
  readonly seq: number;
  readonly batch: unknown;
}

/** The events and replay endpoints from the sim's startup line; /_sim/stats must say the same. */
async function kvSim(args: readonly string[]): Promise<{ sim: Running; events: string; replay: string }> {
  const sim = await startSim(['--kv-events-port', '0', '--kv-events-replay-port', '0', ...args]);
  const { events, replay } = simKvEndpoints(sim);
  const stats = (await call(`${sim.url}/_sim/stats`)).json<{ kvEvents: { endpoint: string; port: number; replayEndpoint: string } }>();
  assert.equal(stats.kvEvents.endpoint, events);
  assert.equal(stats.kvEvents.replayEndpoint, replay);
  assert.ok(stats.kvEvents.port > 0 && events.endsWith(`:${stats.kvEvents.port}`));
  return { sim, events, replay };
}

function decodeBatch(payload: Buffer): unknown {
  return decode(payload, { useBigInt64: true });
}

/** A subscriber whose every receive is bounded; synced once a batch it caused has arrived (PUB drops before that). */
async function subscribe(sim: Running, endpoint: string, topic = ''): Promise<{ next(): Promise<Message> }> {
  const sub = new Subscriber({ receiveTimeout: 500, linger: 0 });
  sockets.push(sub);
  sub.connect(endpoint);
  sub.subscribe(topic);
  const receive = async (): Promise<Message> => {
    const [t, seq, payload] = (await sub.receive()) as [Buffer, Buffer, Buffer];
    return { topic: t.toString(), seq: Number(seq.readBigUInt64BE()), batch: decodeBatch(payload) };
  };
  // a reset publishes AllBlocksCleared: repeat it until one arrives, which also leaves the cache empty
  const deadline = Date.now() + 15_000;
  await within(
    20_000,
    'the subscription to take effect',
    (async () => {
      while (Date.now() < deadline) {
        assert.equal((await call(`${sim.url}/reset_prefix_cache`, { method: 'POST' })).status, 200);
        try {
          for (;;) {
            const m = await receive();
            if (JSON.stringify(m.batch, big).includes('AllBlocksCleared')) return;
          }
        } catch {
          // nothing within 500 ms: not subscribed yet
        }
      }
      throw new Error('no AllBlocksCleared batch reached the subscriber within 15 s');
    })(),
  );
  // from here on, nothing is lost: a message missing now is the sim's doing
  sub.receiveTimeout = 10_000;
  return { next: receive };
}

function big(_key: string, v: unknown): unknown {
  return typeof v === 'bigint' ? `${v}n` : v;
}

const words = (n: number, from = 0): string => Array.from({ length: n }, (_, i) => `w${from + i}`).join(' ');

async function tokenize(sim: Running, body: Record<string, unknown>): Promise<number[]> {
  const res = await call(`${sim.url}/tokenize`, { body: JSON.stringify({ model: 'sim-model', ...body }) });
  assert.equal(res.status, 200);
  const answer = res.json<{ count: number; max_model_len: number; tokens: number[] }>();
  assert.equal(answer.count, answer.tokens.length);
  assert.equal(answer.max_model_len, 4096);
  return answer.tokens;
}

async function complete(sim: Running, prompt: string): Promise<void> {
  const res = await call(`${sim.url}/v1/completions`, { body: JSON.stringify({ model: 'sim-model', prompt, max_tokens: 1 }) });
  assert.equal(res.status, 200);
}

type MapEvent = Record<string, unknown> & { type: string };
interface MapBatch {
  ts: number;
  events: MapEvent[];
  data_parallel_rank: number;
}

test('map encoding, int hashes: blocks announced with /tokenize ids, chained across requests; evictions; chat', async () => {
  const { sim, events } = await kvSim(['--kv-block-size', '4', '--prefix-cache-blocks', '4', '--num-gpu-blocks', '64']);
  const sub = await subscribe(sim, events);
  // 10 tokens: blocks of 4, so two full blocks
  const ids1 = await tokenize(sim, { prompt: words(10) });
  assert.equal(ids1.length, 10);
  await complete(sim, words(10));
  const m1 = await sub.next();
  const b1 = m1.batch as MapBatch;
  assert.equal(m1.topic, '');
  assert.ok(typeof b1.ts === 'number' && Math.abs(b1.ts - Date.now() / 1000) < 60, `ts ${b1.ts}`);
  assert.equal(b1.data_parallel_rank, 0);
  assert.equal(b1.events.length, 1);
  const s1 = b1.events[0] as MapEvent;
  assert.deepEqual(
    { ...s1, block_hashes: undefined },
    {
      type: 'BlockStored',
      block_hashes: undefined,
      parent_block_hash: null,
      token_ids: ids1.slice(0, 8),
      block_size: 4,
      lora_id: null,
      medium: 'GPU',
      lora_name: null,
    },
  );
  const h1 = s1.block_hashes as Array<bigint | number>;
  assert.equal(h1.length, 2);
  // shares the first 8 tokens: only its third block is new, chained to the second block above
  const prompt2 = `${words(8)} x1 x2 x3 x4 x5`;
  const ids2 = await tokenize(sim, { prompt: prompt2 });
  assert.deepEqual(ids2.slice(0, 8), ids1.slice(0, 8));
  await complete(sim, prompt2);
  const m2 = await sub.next();
  assert.equal(m2.seq, m1.seq + 1);
  const s2 = (m2.batch as MapBatch).events[0] as MapEvent;
  assert.equal(s2.type, 'BlockStored');
  assert.equal(s2.parent_block_hash, h1[1]);
  assert.deepEqual(s2.token_ids, ids2.slice(8, 12));
  const h2 = s2.block_hashes as Array<bigint | number>;
  assert.equal(h2.length, 1);
  // 4 blocks of room, 3 held: three new blocks evict the least recently used two (the tails first)
  await complete(sim, words(12, 100));
  const m3 = await sub.next();
  const e3 = (m3.batch as MapBatch).events;
  assert.deepEqual(
    e3.map((e) => e.type),
    ['BlockRemoved', 'BlockRemoved', 'BlockStored'],
  );
  assert.deepEqual(e3[0], { type: 'BlockRemoved', block_hashes: [h2[0]], medium: 'GPU' });
  assert.deepEqual(e3[1], { type: 'BlockRemoved', block_hashes: [h1[1]], medium: 'GPU' });
  const h3 = (e3[2] as MapEvent).block_hashes as Array<bigint | number>;
  assert.equal(h3.length, 3);
  // int hashes are uint64: above 2^53 they decode as bigint, and all are below 2^64
  const all = [...h1, ...h2, ...h3];
  for (const h of all) assert.ok(BigInt(h) >= 0n && BigInt(h) < 2n ** 64n);
  assert.ok(
    all.some((h) => typeof h === 'bigint' && h > 2n ** 53n),
    'hashes above 2^53',
  );
  // a chat request's blocks are the ids /tokenize gives for its messages with the generation prompt
  const messages = [{ role: 'user', content: words(9, 500) }];
  const chatIds = await tokenize(sim, { messages, add_generation_prompt: true });
  assert.equal(chatIds.length, 11);
  const chat = await call(`${sim.url}/v1/chat/completions`, { body: JSON.stringify({ model: 'sim-model', messages, max_tokens: 1 }) });
  assert.equal(chat.status, 200);
  const stores = ((await sub.next()).batch as MapBatch).events.filter((e) => e.type === 'BlockStored');
  assert.equal(stores.length, 1);
  assert.deepEqual(stores[0]?.token_ids, chatIds.slice(0, 8));
  assert.equal(stores[0]?.parent_block_hash, null);
  const metrics = (await call(`${sim.url}/metrics`)).text;
  assert.match(metrics, /^# TYPE vllm:cache_config_info gauge$/m);
  const info = /^vllm:cache_config_info\{([^}]*)\} 1\.0$/m.exec(metrics);
  assert.ok(info, 'vllm:cache_config_info sample');
  assert.match(info[1] as string, /(^|,)block_size="4"(,|$)/);
  // the KV pool (--num-gpu-blocks), in which the 4-block prefix cache lives
  assert.match(info[1] as string, /(^|,)num_gpu_blocks="64"(,|$)/);
  assert.equal(await sim.stop(), 0);
});

test('array encoding, bytes hashes, a topic: the array-like batch with 32-byte hashes, chained by bytes; LoRA chains', async () => {
  const { sim, events } = await kvSim([
    '--kv-events-encoding',
    'array',
    '--kv-events-hashes',
    'bytes',
    '--kv-events-topic',
    'kv@sim',
    '--enable-lora',
    '--lora-modules',
    'sql=/adapters/sql',
  ]);
  const sub = await subscribe(sim, events, 'kv@sim');
  // the default block size is vLLM's 16
  const ids = await tokenize(sim, { prompt: words(40) });
  await complete(sim, words(40));
  const m1 = await sub.next();
  assert.equal(m1.topic, 'kv@sim');
  const [ts, evs, rank] = m1.batch as [number, unknown[][], number];
  assert.equal(typeof ts, 'number');
  assert.equal(rank, 0);
  assert.equal(evs.length, 1);
  const [tag, hashes, parent, tokenIds, blockSize, loraId, medium, loraName] = evs[0] as [
    string,
    Uint8Array[],
    unknown,
    number[],
    number,
    unknown,
    string,
    unknown,
  ];
  assert.deepEqual([tag, parent, blockSize, loraId, medium, loraName], ['BlockStored', null, 16, null, 'GPU', null]);
  assert.deepEqual(tokenIds, ids.slice(0, 32));
  assert.equal(hashes.length, 2);
  for (const h of hashes) assert.ok(h instanceof Uint8Array && h.length === 32);
  await complete(sim, `${words(32)} ${words(16, 900)}`);
  const [, evs2] = (await sub.next()).batch as [number, unknown[][]];
  const stored = evs2[0] as [string, Uint8Array[], Uint8Array, number[]];
  assert.equal(stored[0], 'BlockStored');
  assert.deepEqual(Buffer.from(stored[2]), Buffer.from(hashes[1] as Uint8Array));
  assert.equal(stored[1].length, 1);
  assert.equal(stored[3].length, 16);
  // the same prompt under a LoRA adapter is a chain of its own, named by the adapter
  const lora = await call(`${sim.url}/v1/completions`, { body: JSON.stringify({ model: 'sql', prompt: words(40), max_tokens: 1 }) });
  assert.equal(lora.status, 200);
  const [, evs3] = (await sub.next()).batch as [number, unknown[][]];
  const loraStored = evs3[0] as [string, Uint8Array[], unknown, number[], number, unknown, string, unknown];
  assert.deepEqual([loraStored[0], loraStored[2], loraStored[5], loraStored[7], loraStored[1].length], ['BlockStored', null, 1, 'sql', 2]);
  assert.deepEqual(loraStored[3], ids.slice(0, 32));
  assert.notDeepEqual(Buffer.from(loraStored[1][0] as Uint8Array), Buffer.from(hashes[0] as Uint8Array));
  assert.equal(await sim.stop(), 0);
});

/** Every buffered batch from `from` on, then the end marker, as vLLM's replay socket answers a DEALER. */
async function replay(endpoint: string, from: number): Promise<Array<{ seq: number; batch: unknown }>> {
  const dealer = new Dealer({ receiveTimeout: 10_000, linger: 0 });
  sockets.push(dealer);
  dealer.connect(endpoint);
  const start = Buffer.alloc(8);
  start.writeBigUInt64BE(BigInt(from));
  await dealer.send(['', start]);
  const out: Array<{ seq: number; batch: unknown }> = [];
  for (;;) {
    const [empty, seq, payload] = (await dealer.receive()) as [Buffer, Buffer, Buffer];
    assert.equal(empty.length, 0);
    const n = seq.readBigInt64BE();
    if (n === -1n) {
      assert.equal(payload.length, 0);
      dealer.close();
      return out;
    }
    out.push({ seq: Number(n), batch: decodeBatch(payload) });
  }
}

async function kvSwitch(sim: Running, body: object): Promise<{ nextSeq: number; dropping: number }> {
  const res = await call(`${sim.url}/_sim/kv-events`, { body: JSON.stringify(body) });
  assert.equal(res.status, 200, res.text);
  return res.json();
}

test('a dropped batch leaves a seq gap and is replayed; a restart starts the sequence and the hashes afresh', async () => {
  const { sim, events, replay: replayAt } = await kvSim([]);
  const sub = await subscribe(sim, events);
  await complete(sim, words(20));
  const before = await sub.next();
  const stored = (before.batch as MapBatch).events[0] as MapEvent;
  assert.equal(stored.type, 'BlockStored');
  assert.equal((await kvSwitch(sim, { drop: 1 })).dropping, 1);
  await complete(sim, words(20, 200));
  await complete(sim, words(20, 400));
  // the subscriber never sees before.seq + 1
  const afterGap = await sub.next();
  assert.equal(afterGap.seq, before.seq + 2);
  const missed = await replay(replayAt, before.seq + 1);
  assert.deepEqual(
    missed.map((m) => m.seq),
    [before.seq + 1, before.seq + 2],
  );
  const dropped = (missed[0]!.batch as MapBatch).events[0] as MapEvent;
  assert.equal(dropped.type, 'BlockStored');
  assert.deepEqual(dropped.token_ids, (await tokenize(sim, { prompt: words(20, 200) })).slice(0, 16));
  assert.deepEqual(missed[1]?.batch, afterGap.batch);
  // the whole buffer from 0, and nothing past its end
  assert.equal((await replay(replayAt, 0)).length, afterGap.seq + 1);
  assert.deepEqual(await replay(replayAt, afterGap.seq + 1), []);

  // a restart: no event, the sequence from 0, an empty cache (the first prompt is stored again) and new hashes
  assert.equal((await kvSwitch(sim, { restart: true })).nextSeq, 0);
  await complete(sim, words(20));
  const restarted = await sub.next();
  assert.equal(restarted.seq, 0);
  const again = (restarted.batch as MapBatch).events;
  assert.equal(again.length, 1);
  assert.equal(again[0]?.type, 'BlockStored');
  assert.deepEqual(again[0]?.token_ids, stored.token_ids);
  assert.equal(again[0]?.parent_block_hash, null);
  assert.notDeepEqual(again[0]?.block_hashes, stored.block_hashes);
  assert.deepEqual(
    (await replay(replayAt, 0)).map((m) => m.seq),
    [0],
  );

  // a clear (vLLM's /reset_prefix_cache) is announced, and keeps the hashes
  assert.equal((await kvSwitch(sim, { clear: true })).nextSeq, 1);
  assert.deepEqual(((await sub.next()).batch as MapBatch).events, [{ type: 'AllBlocksCleared' }]);
  await complete(sim, words(20));
  const recached = await sub.next();
  assert.equal(recached.seq, 2);
  assert.deepEqual(((recached.batch as MapBatch).events[0] as MapEvent).block_hashes, again[0]?.block_hashes);
  assert.equal((await call(`${sim.url}/_sim/kv-events`, { body: '{"drop": -1}' })).status, 400);
  assert.equal(await sim.stop(), 0);
});

test('without --kv-events-port nothing is published and the switches say so', async () => {
  const sim = await startSim([]);
  assert.doesNotMatch(sim.proc.output(), /kv-events/);
  assert.equal((await call(`${sim.url}/_sim/stats`)).json<Record<string, unknown>>().kvEvents, undefined);
  assert.equal((await call(`${sim.url}/_sim/kv-events`, { body: '{"drop": 1}' })).status, 409);
  // the cache still works, and /tokenize still answers real ids
  assert.equal((await tokenize(sim, { prompt: 'a b' })).length, 2);
  assert.equal(await sim.stop(), 0);
});
