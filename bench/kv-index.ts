// The KV index's cost, measured: memory per million indexed blocks (one engine, and eight sharing the million), how
// fast BlockStored events are applied, and match() of a 750-block request over 8 endpoints (all holding all of it,
// the worst case; one holding it; each holding a different prefix). Run: node --expose-gc --import tsx bench/kv-index.ts
// (bench/kv.ts reports the same figures beside its replay, importing memoryPerMillion and matchCost).
import { pathToFileURL } from 'node:url';
import v8 from 'node:v8';
import vm from 'node:vm';
import { blockKeys, type BlockKey } from '../src/router/kv/block-key.js';
import type { KvBatch, KvEvent } from '../src/router/kv/decode.js';
import { KvIndex } from '../src/router/kv/kv-index.js';

const BS = 16;
const CHAIN = 64; // blocks per chain, stored in one event as a prefill would
let gc = (globalThis as { gc?: () => void }).gc;

function memory(): number {
  if (!gc) {
    // imported by a process started without --expose-gc: the flag can still be set, and gc taken from a new context
    v8.setFlagsFromString('--expose-gc');
    gc = vm.runInNewContext('gc') as () => void;
  }
  gc();
  gc();
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
}

let rnd = 0x12345678;
function random64(): bigint {
  // engine hashes are uniform 64-bit values, most above 2^53
  rnd = (Math.imul(rnd, 1103515245) + 12345) >>> 0;
  const hi = BigInt(rnd);
  rnd = (Math.imul(rnd, 1103515245) + 12345) >>> 0;
  return (hi << 32n) | BigInt(rnd);
}

function chainEvent(chain: number): KvEvent {
  const tokens = new Uint32Array(CHAIN * BS);
  for (let i = 0; i < tokens.length; i++) tokens[i] = (chain * 7919 + i * 31) % 150_000;
  return {
    kind: 'stored',
    hashes: Array.from({ length: CHAIN }, random64),
    parent: undefined,
    tokens,
    blockSize: BS,
    loraName: undefined,
    loraId: undefined,
    medium: 'gpu',
    tier: 'gpu',
    group: undefined,
  };
}

function fill(idx: KvIndex, endpoints: string[], blocks: number): number {
  const t0 = performance.now();
  const perEndpoint = blocks / endpoints.length / CHAIN;
  let chain = 0;
  for (const ep of endpoints) {
    for (let c = 0; c < perEndpoint; c++) {
      const batch: KvBatch = { ts: 0, events: [chainEvent(chain++)], dpRank: 0 };
      idx.apply(ep, 0, batch);
    }
  }
  return performance.now() - t0;
}

/**
 * MiB per million blocks indexed, `blocks` over `endpoints` (each given that many at most, as --kv-index-max-blocks
 * would). The tables double, so the cost per block depends on where `blocks` falls: 2^20 is the best case (every table
 * at its load bound), a little over 2^20 the worst (the key tables just doubled).
 */
export function memoryPerMillion(endpoints: number, blocks = 1_048_576): { mb: number; applyMs: number } {
  const before = memory();
  const idx = new KvIndex({ maxCapacity: blocks / endpoints });
  const ids = Array.from({ length: endpoints }, (_, i) => `e${i}`);
  const applyMs = fill(idx, ids, blocks);
  const after = memory();
  if (idx.stats().total !== blocks) throw new Error(`indexed ${idx.stats().total}`);
  const mb = ((after - before) / 1_048_576) * (1_000_000 / blocks);
  // keep idx alive until measured
  void idx.stats();
  return { mb, applyMs };
}

export function matchCost(): Record<string, number> {
  const idx = new KvIndex();
  const ids = Array.from({ length: 8 }, (_, i) => `e${i}`);
  const tokens = Uint32Array.from({ length: 750 * BS }, (_, i) => (i * 13) % 150_000);
  const keys: BlockKey[] = blockKeys(tokens, BS);
  const stored = (hashes: bigint[], toks: Uint32Array): KvEvent => ({
    kind: 'stored',
    hashes,
    parent: undefined,
    tokens: toks,
    blockSize: BS,
    loraName: undefined,
    loraId: undefined,
    medium: 'gpu',
    tier: 'gpu',
    group: undefined,
  });
  const out: Record<string, number> = {};
  const time = (name: string) => {
    for (let i = 0; i < 2000; i++) idx.match(keys, ids); // warm up
    const n = 20_000;
    const t0 = performance.now();
    for (let i = 0; i < n; i++) idx.match(keys, ids);
    out[name] = ((performance.now() - t0) * 1000) / n;
  };
  // background: every endpoint holds 100k other blocks, so the maps are of a real size
  fill(idx, ids, 800_000);
  // each endpoint holds a different prefix: e_i holds i * 100 leading blocks
  for (let e = 0; e < 8; e++) {
    const n = e * 100;
    if (n > 0)
      idx.apply(ids[e]!, 1, { ts: 0, events: [stored(Array.from({ length: n }, random64), tokens.subarray(0, n * BS))], dpRank: 1 });
  }
  time('8 endpoints, prefixes 0..700 blocks (µs/match)');
  for (let e = 0; e < 8; e++) idx.clearEndpoint(ids[e]!, 1);
  idx.apply('e0', 1, { ts: 0, events: [stored(Array.from({ length: 750 }, random64), tokens)], dpRank: 1 });
  time('8 endpoints, one holds all 750 (µs/match)');
  for (let e = 1; e < 8; e++) idx.apply(ids[e]!, 1, { ts: 0, events: [stored(Array.from({ length: 750 }, random64), tokens)], dpRank: 1 });
  time('8 endpoints, all hold all 750: worst case (µs/match)');
  return out;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const one = memoryPerMillion(1);
  const eight = memoryPerMillion(8);
  // 1,114,112 = 17 x 2^16 blocks: just past a doubling of the key tables, the worst case per block
  const worst = memoryPerMillion(1, 1_114_112);
  console.log(
    `memory per 1M blocks, one engine: ${one.mb.toFixed(1)} MiB (apply: ${((one.applyMs * 1000) / 1_048_576).toFixed(2)} µs/block)`,
  );
  console.log(
    `memory per 1M blocks, 8 engines: ${eight.mb.toFixed(1)} MiB (apply: ${((eight.applyMs * 1000) / 1_048_576).toFixed(2)} µs/block)`,
  );
  console.log(`memory per 1M blocks, one engine of 1,114,112 (tables just doubled, the worst case): ${worst.mb.toFixed(1)} MiB`);
  for (const [k, v] of Object.entries(matchCost())) console.log(`${k}: ${v.toFixed(1)}`);
}
