// The KV-aware routing benchmark's pure parts (bench/kv-trace.ts, bench/kv.ts): trace parsing, the generator, the
// prompt text whose block structure mirrors hash_ids in the simulator's own block hashing, the combined-cache LRU and
// the targets of the report.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  BlockLru,
  cacheFigures,
  formatTrace,
  generateTrace,
  lruHitRate,
  parseTrace,
  promptText,
  rowBlocks,
  scaledBlockTokens,
  type TraceRow,
} from '../../bench/kv-trace.js';
import { kvTargets, renderKv, type KvBenchResult, type ReplayResult } from '../../bench/kv.js';
import { promptBlocks } from '../../src/tools/sim/prefix-cache.js';

const row = (timestamp: number, ids: number[], input = ids.length * 512, output = 10): TraceRow => ({
  timestamp,
  input_length: input,
  output_length: output,
  hash_ids: ids,
});

test('parseTrace reads the public JSONL format, sorts by timestamp (stable) and names bad lines', () => {
  const text = [
    '{"timestamp": 20, "input_length": 1000, "output_length": 5, "hash_ids": [0, 1]}',
    '',
    '{"timestamp": 0, "input_length": 600, "output_length": 7, "hash_ids": [0, 2]}',
    '{"timestamp": 20, "input_length": 512, "output_length": 1, "hash_ids": [3]}',
  ].join('\n');
  const rows = parseTrace(text);
  assert.deepEqual(
    rows.map((r) => r.hash_ids),
    [[0, 2], [0, 1], [3]],
  );
  assert.equal(rows[0]?.output_length, 7);
  assert.throws(() => parseTrace('{"timestamp": 0, "hash_ids": []}\nnot json'), /line 1: input_length/);
  assert.throws(() => parseTrace('{"timestamp":0,"input_length":5,"output_length":1,"hash_ids":[1]}\nnope'), /line 2: not JSON/);
  assert.throws(() => parseTrace('{"timestamp":0,"input_length":5,"output_length":1,"hash_ids":[1.5]}'), /hash_ids/);
  assert.throws(() => parseTrace('{"timestamp":0,"input_length":512,"output_length":1,"hash_ids":[1,2,3]}'), /3 hash_ids for 512/);
});

test('generateTrace: deterministic from the seed, in time order, ids as a prefix tree gives them, prompts growing by turn', () => {
  const a = generateTrace({ requests: 300, seed: 7 });
  assert.equal(a.length, 300);
  assert.deepEqual(generateTrace({ requests: 300, seed: 7 }), a);
  assert.notDeepEqual(generateTrace({ requests: 300, seed: 8 }), a);
  assert.deepEqual(parseTrace(formatTrace(a)), a);
  for (let i = 1; i < a.length; i++) assert.ok((a[i] as TraceRow).timestamp >= (a[i - 1] as TraceRow).timestamp);
  // every id always follows the same id: a block's id stands for everything before it too
  const parentOf = new Map<number, number>();
  for (const r of a) {
    assert.ok(r.input_length > (r.hash_ids.length - 1) * 512 && r.input_length <= r.hash_ids.length * 512);
    r.hash_ids.forEach((id, i) => {
      const parent = i === 0 ? -1 : (r.hash_ids[i - 1] as number);
      assert.equal(parentOf.get(id) ?? parent, parent);
      parentOf.set(id, parent);
    });
  }
  // later turns repeat an earlier prompt's full blocks and add to them
  const extended = a.filter((r, i) =>
    a
      .slice(0, i)
      .some(
        (p) =>
          p.hash_ids.length < r.hash_ids.length && p.hash_ids.slice(0, -1).every((id, k) => r.hash_ids[k] === id) && p.hash_ids.length > 13,
      ),
  );
  assert.ok(extended.length > 20, `${extended.length} requests extend an earlier one`);
  // shared system prompts: the most common first id opens many requests
  const firsts = new Map<number, number>();
  for (const r of a) firsts.set(r.hash_ids[0] as number, (firsts.get(r.hash_ids[0] as number) ?? 0) + 1);
  assert.ok(Math.max(...firsts.values()) > 50);
  assert.ok(firsts.size <= 10);
});

test('promptText: one token per scaled position, equal ids give equal runs; the simulator hashes blocks as rowBlocks says', () => {
  const a = row(0, [1, 2, 3, 4], 3 * 512 + 100);
  const b = row(1, [1, 2, 5], 3 * 512);
  const c = row(2, [9, 2, 3], 3 * 512);
  assert.deepEqual(scaledBlockTokens(a, 32), [32, 32, 32, 6]);
  const tokenize = (s: string): string[] => s.match(/[A-Za-z0-9]+|[^\sA-Za-z0-9]/g) ?? [];
  const ta = tokenize(promptText(a, 32));
  const tb = tokenize(promptText(b, 32));
  assert.equal(ta.length, 32 * 3 + 6);
  assert.deepEqual(ta.slice(0, 64), tb.slice(0, 64));
  assert.notEqual(ta[64], tb[64]);
  assert.equal(new Set(ta).size, ta.length);
  const leading = (x: readonly number[], y: readonly number[]): number => {
    let n = 0;
    while (n < x.length && n < y.length && x[n] === y[n]) n++;
    return n;
  };
  for (const kv of [8, 16, 32]) {
    const scale = { blockTokens: 32, kvBlockSize: kv };
    const ka = rowBlocks(a, scale);
    const sim = (r: TraceRow): number[] => promptBlocks(promptText(r, 32), kv).blocks;
    assert.equal(ka.tokens, 102);
    assert.equal(ka.keys.length, Math.floor(102 / kv));
    assert.equal(sim(a).length, ka.keys.length);
    for (const [x, y] of [
      [a, b],
      [a, c],
      [b, c],
      [a, a],
    ] as const) {
      assert.equal(leading(rowBlocks(x, scale).keys, rowBlocks(y, scale).keys), leading(sim(x), sim(y)), `kv block ${kv}`);
    }
  }
  assert.throws(() => rowBlocks(a, { blockTokens: 32, kvBlockSize: 12 }), /multiple/);
});

test('BlockLru: leading blocks up to the first miss; a prefix loses its tail before its head', () => {
  const lru = new BlockLru(4);
  assert.equal(lru.admit([1, 2, 3]), 0);
  assert.equal(lru.admit([1, 2, 9]), 2);
  assert.equal(lru.size, 4);
  // 5 and 6 need room: the least recently used go, the tail 3 first, then 9 (used before 1 and 2 in that admit)
  assert.equal(lru.admit([5, 6]), 0);
  assert.equal(lru.admit([1, 2]), 2);
  assert.equal(lru.admit([1, 2, 3]), 2);
  assert.equal(new BlockLru(0).admit([1]), 0);
});

test('lruHitRate and cacheFigures count tokens as the simulator does (never the last token)', () => {
  const scale = { blockTokens: 32, kvBlockSize: 16 };
  const rows = [row(0, [1, 2]), row(1, [1, 2]), row(2, [1, 3])];
  const f = cacheFigures(rows, scale);
  assert.deepEqual(f, { distinctBlocks: 6, totalBlocks: 12, tokens: 192 });
  // second: 64 tokens, 4 blocks cached but the last token computed -> 63; third: the first trace block, 32
  assert.equal(lruHitRate(rows, scale, 100), (63 + 32) / 192);
  assert.equal(lruHitRate(rows, scale, 0), 0);
  // room for 2 blocks: after the first, only [1,2]'s second trace block is held (tail kept? no: deepest marked first)
  assert.ok(lruHitRate(rows, scale, 2) < lruHitRate(rows, scale, 100));
});

test('kvTargets and renderKv: pass and fail beside the figures, not measured when missing', () => {
  const replay = (policy: string, replicas: number, hitRate: number, share = 0.26): ReplayResult => ({
    policy,
    replicas,
    clients: 0,
    requests: 100,
    failed: 0,
    hitRate,
    ttftP50Ms: 10,
    ttftP90Ms: 20,
    maxEngineShare: share,
    minEngineShare: 0.24,
    seconds: 1,
    routerRssGrowthMb: 1,
    routerRssMb: 80,
    kvEvents: true,
    kvMetrics: {},
    tokenizedBy: {},
    firstError: undefined,
  });
  const result: KvBenchResult = {
    options: {
      trace: undefined,
      requests: 100,
      seed: 1,
      blockTokens: 32,
      kvBlockSize: 16,
      cacheShare: 0.1,
      rate: 10,
      concurrency: 4,
      clients: [0],
      tokenizerSetting: 'default',
      serialPrefill: true,
      engineProcesses: false,
      policies: ['roundrobin', 'kvaware'],
      replicas: [1, 2],
      only: ['replay'],
      latencyRequests: 1,
      latencyWarmup: 3,
      latencyTokens: 12_000,
      ttftMs: 1,
      prefillMsPerToken: 1,
      itlMs: 1,
      maxNumSeqs: 1,
      tokenizerDir: undefined,
    },
    machine: { cpus: 2, loadAverage: 1 },
    workload: {
      distinctBlocks: 10,
      totalBlocks: 20,
      tokens: 100,
      requests: 100,
      source: 'x',
      perEngineCacheBlocks: 1,
      combinedHitRate: 0.5,
      unboundedHitRate: 0.6,
    },
    replays: [replay('roundrobin', 1, 0.2), replay('kvaware', 1, 0.46), replay('roundrobin', 2, 0.2), replay('kvaware', 2, 0.4, 0.4)],
    latency: [],
    index: { mbPerMillionOneEngine: 120, mbPerMillionEightEngines: 130, applyUsPerBlock: 1, matchUs: {} },
  };
  const t = kvTargets(result);
  const met = (s: string): boolean | undefined => t.find((x) => x.target.startsWith(s))?.met;
  assert.equal(met('kvaware x1 hit rate >= 0.9'), true);
  assert.equal(met('kvaware x2 hit rate >= 0.9'), false);
  assert.equal(met('kvaware x1 hit rate >= 2'), true);
  assert.equal(met('kvaware x2 hit rate >= 2'), true);
  assert.equal(met('kvaware x2: every engine'), false);
  assert.equal(met('kvaware x1: every engine'), true);
  assert.equal(met('kvaware x1: TTFT p90'), false, 'equal to round robin is not below it');
  assert.equal(met('kvaware: two replicas'), false);
  assert.equal(met('router-added'), undefined);
  assert.equal(
    kvTargets({
      ...result,
      latency: [
        {
          policy: 'kvaware',
          tokenizer: 'in-process',
          shape: 'turn',
          tokens: 12_000,
          requests: 1,
          directP50Ms: 5,
          routerP50Ms: 6,
          addedP50Ms: 1,
          routerCpuMsPerRequest: 1,
          failed: 0,
        },
      ],
    }).find((x) => x.target.startsWith('router-added'))?.met,
    true,
  );
  assert.equal(met('1M indexed'), true);
  const text = renderKv(result);
  assert.match(text, /\| kvaware \| open loop \| 2 \| 40\.0 % \| 0\.80x \| 2\.00x \|/);
  assert.match(text, /FAIL/);
  assert.match(text, /not measured/);
});
