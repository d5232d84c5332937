// The KV index: keys chained across batches equal blockKeys() of the same tokens (so a request tokenized alike
// matches), removals, clears, LoRA chains kept apart, per-engine capacity (oldest first), leading matches by tier; and
// against a plain model of the same rules on random event sequences.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { blockKeys, nextKey, rootKey } from '../../src/router/kv/block-key.js';
import type { EngineHash, KvBatch, KvEvent, KvMedium, MalformedReason } from '../../src/router/kv/decode.js';
import { KvIndex, newTally } from '../../src/router/kv/kv-index.js';

const BS = 4;

function toks(n: number, base = 0): number[] {
  return Array.from({ length: n }, (_, i) => base + i * 3);
}

function stored(
  hashes: EngineHash[],
  parent: EngineHash | undefined,
  tokens: number[],
  opts: { medium?: KvMedium; lora?: string; loraId?: number; group?: number; blockSize?: number } = {},
): KvEvent {
  const medium = opts.medium ?? 'gpu';
  return {
    kind: 'stored',
    hashes,
    parent,
    tokens: Uint32Array.from(tokens),
    blockSize: opts.blockSize ?? BS,
    loraName: opts.lora,
    loraId: opts.loraId,
    medium,
    tier: medium === 'gpu' ? 'gpu' : 'offload',
    group: opts.group,
  };
}

function removed(hashes: EngineHash[], medium: KvMedium = 'gpu', group?: number): KvEvent {
  return { kind: 'removed', hashes, medium, tier: medium === 'gpu' ? 'gpu' : 'offload', group };
}

function b(...events: KvEvent[]): KvBatch {
  return { ts: 0, events, dpRank: 0 };
}

function hs(from: number, to: number, base = 1000n): bigint[] {
  return Array.from({ length: to - from }, (_, i) => base + BigInt(from + i));
}

test('keys chained across batches equal blockKeys() of the same tokens; a request matches its leading blocks', () => {
  const idx = new KvIndex();
  const t = toks(8 * BS);
  idx.apply('e1', 0, b(stored(hs(0, 3), undefined, t.slice(0, 3 * BS))));
  idx.apply('e1', 0, b(stored(hs(3, 5), 1002n, t.slice(3 * BS, 5 * BS))));
  idx.apply('e1', 0, b(stored(hs(5, 8), 1004n, t.slice(5 * BS, 8 * BS))));
  const keys = blockKeys(t, BS);
  assert.deepEqual(idx.match(keys, ['e1']).get('e1'), { gpu: 8, total: 8 });
  // a request sharing the first 5 blocks and then diverging
  const other = [...t.slice(0, 5 * BS), ...toks(3 * BS, 99_999)];
  assert.deepEqual(idx.match(blockKeys(other, BS), ['e1']).get('e1'), { gpu: 5, total: 5 });
  // a request with a trailing partial block: its full blocks match
  assert.deepEqual(idx.match(blockKeys(t.slice(0, 2 * BS + 3), BS), ['e1']).get('e1'), { gpu: 2, total: 2 });
  // the first block differs: no entry at all
  assert.equal(idx.match(blockKeys(toks(4 * BS, 7), BS), ['e1']).size, 0);
  assert.equal(idx.blockSize('e1'), BS);
  assert.equal(idx.blockSize('nobody'), undefined);
  assert.deepEqual(idx.stats(), { total: 8, endpoints: { e1: 8 } });
});

test('a parent the index does not hold: its blocks cannot be chained, counted and skipped', () => {
  const idx = new KvIndex();
  const tally = newTally();
  const t = toks(4 * BS);
  idx.apply('e1', 0, b(stored(hs(2, 4), 1001n, t.slice(2 * BS))), tally);
  assert.equal(tally.unchainable, 2);
  assert.equal(tally.blocksStored, 0);
  assert.equal(idx.blocks('e1'), 0);
});

test('removals, AllBlocksCleared and clearEndpoint', () => {
  const idx = new KvIndex();
  const t = toks(6 * BS);
  const keys = blockKeys(t, BS);
  idx.apply('e1', 0, b(stored(hs(0, 6), undefined, t)));
  idx.apply('e2', 0, b(stored(hs(0, 6), undefined, t)));
  const tally = newTally();
  idx.apply('e1', 0, b(removed([1003n, 9999n])), tally); // an unknown hash is no error
  assert.equal(tally.blocksRemoved, 1);
  assert.deepEqual(idx.match(keys, ['e1', 'e2']).get('e1'), { gpu: 3, total: 3 });
  idx.apply('e1', 0, b({ kind: 'cleared' }));
  assert.deepEqual([...idx.match(keys, ['e1', 'e2']).keys()], ['e2']);
  assert.equal(idx.blocks('e1'), 0);
  // after a clear the engine's chains start again from the root
  idx.apply('e1', 0, b(stored(hs(0, 1), undefined, t.slice(0, BS))));
  assert.deepEqual(idx.match(keys, ['e1']).get('e1'), { gpu: 1, total: 1 });
  idx.clearEndpoint('e2');
  assert.equal(idx.match(keys, ['e2']).size, 0);
  idx.removeEndpoint('e1');
  assert.deepEqual(idx.stats(), { total: 0, endpoints: { e2: 0 } });
});

test('LoRA adapters: each chain from its own root, matching only that adapter; an unnamed adapter id matches nothing', () => {
  const idx = new KvIndex();
  const t = toks(3 * BS);
  idx.apply('base', 0, b(stored(hs(0, 3), undefined, t)));
  idx.apply('a', 0, b(stored(hs(0, 3), undefined, t, { lora: 'sql-lora' })));
  idx.apply('old', 0, b(stored(hs(0, 3), undefined, t, { loraId: 4 })));
  const all = ['base', 'a', 'old'];
  assert.deepEqual([...idx.match(blockKeys(t, BS), all).keys()], ['base']);
  assert.deepEqual([...idx.match(blockKeys(t, BS, 'sql-lora'), all).keys()], ['a']);
  assert.equal(idx.match(blockKeys(t, BS, 'other-lora'), all).size, 0);
  // an adapter's chain continues from its parent, so later batches need not repeat the name
  idx.apply('a', 0, b(stored(hs(3, 4), 1002n, toks(BS, 500))));
  assert.deepEqual(idx.match(blockKeys([...t, ...toks(BS, 500)], BS, 'sql-lora'), ['a']).get('a'), { gpu: 4, total: 4 });
  assert.notEqual(rootKey('sql-lora'), rootKey());
});

test('capacity per engine: the oldest stored blocks go first; a block stored again is young again; shrinking evicts', () => {
  const idx = new KvIndex({ maxCapacity: 100 });
  idx.setCapacity('e1', 5);
  const tally = newTally();
  const chains = Array.from({ length: 8 }, (_, i) => toks(BS, i * 1000));
  for (let i = 0; i < 8; i++) {
    idx.apply('e1', 0, b(stored([BigInt(i)], undefined, chains[i]!)), tally);
    if (i === 3) idx.apply('e1', 0, b(stored([0n], undefined, chains[0]!)), tally); // 0 stored again: young
  }
  assert.equal(idx.blocks('e1'), 5);
  assert.equal(tally.evicted, 3);
  const heldNow = chains.map((c) => idx.match(blockKeys(c, BS), ['e1']).has('e1'));
  assert.deepEqual(heldNow, [true, false, false, false, true, true, true, true]);
  idx.setCapacity('e1', 2, tally);
  assert.equal(idx.blocks('e1'), 2);
  assert.equal(tally.evicted, 6);
  assert.deepEqual(
    chains.map((c) => idx.match(blockKeys(c, BS), ['e1']).has('e1')),
    [false, false, false, false, false, false, true, true],
  );
  // the maximum applies to an engine with none set
  for (let i = 0; i < 150; i++) idx.apply('e2', 0, b(stored([BigInt(i)], undefined, toks(BS, i * 7))));
  assert.equal(idx.blocks('e2'), 100);
});

test('an engine claiming more blocks than the maximum is indexed up to the maximum, whatever it claims', () => {
  const idx = new KvIndex({ maxCapacity: 100 });
  idx.setCapacity('huge', 100_000_000);
  assert.equal(idx.capacity('huge'), 100);
  for (let i = 0; i < 300; i++) idx.apply('huge', 0, b(stored([BigInt(i)], undefined, toks(BS, i * 7))));
  assert.equal(idx.blocks('huge'), 100);
  // a second rank: the same bound of its own
  for (let i = 0; i < 300; i++) idx.apply('huge', 1, b(stored([BigInt(i)], undefined, toks(BS, i * 7))));
  assert.equal(idx.blocks('huge'), 200);
  // an engine claiming fewer keeps its own; a claim that is no number of blocks gets the maximum
  idx.setCapacity('small', 40);
  assert.equal(idx.capacity('small'), 40);
  idx.setCapacity('odd', 0);
  assert.equal(idx.capacity('odd'), 100);
  idx.setCapacity('unknown', undefined);
  assert.equal(idx.capacity('unknown'), 100);
  assert.equal(idx.capacity('never-seen'), 100);
});

test('tiers: the GPU leading count stops at the first block not on the GPU; offload copies keep the total', () => {
  const idx = new KvIndex();
  const t = toks(5 * BS);
  const keys = blockKeys(t, BS);
  idx.apply('e1', 0, b(stored(hs(0, 5), undefined, t)));
  idx.apply('e1', 0, b(stored(hs(2, 5), 1001n, t.slice(2 * BS), { medium: 'cpu' }))); // offloaded copies of 2..4
  assert.deepEqual(idx.match(keys, ['e1']).get('e1'), { gpu: 5, total: 5 });
  idx.apply('e1', 0, b(removed([1003n]))); // block 3 leaves the GPU, its CPU copy stays
  assert.deepEqual(idx.match(keys, ['e1']).get('e1'), { gpu: 3, total: 5 });
  idx.apply('e1', 0, b(removed([1003n], 'disk'))); // not held on disk: nothing changes
  assert.deepEqual(idx.match(keys, ['e1']).get('e1'), { gpu: 3, total: 5 });
  idx.apply('e1', 0, b(removed([1003n], 'cpu')));
  assert.deepEqual(idx.match(keys, ['e1']).get('e1'), { gpu: 3, total: 3 });
  idx.apply('e1', 0, b(removed([1000n])));
  assert.equal(idx.match(keys, ['e1']).size, 0, 'the first block is gone');
  // a chain held only offloaded
  idx.apply('e2', 0, b(stored(hs(0, 2), undefined, t.slice(0, 2 * BS), { medium: 'other' })));
  assert.deepEqual(idx.match(keys, ['e2']).get('e2'), { gpu: 0, total: 2 });
});

test('one key from two engine hashes (what our key does not see, e.g. multimodal extra keys): held until both go', () => {
  const idx = new KvIndex();
  const t = toks(BS);
  idx.apply('e1', 0, b(stored([1n], undefined, t), stored([2n], undefined, t)));
  assert.equal(idx.blocks('e1'), 2);
  idx.apply('e1', 0, b(removed([1n])));
  assert.ok(idx.match(blockKeys(t, BS), ['e1']).has('e1'));
  idx.apply('e1', 0, b(removed([2n])));
  assert.ok(!idx.match(blockKeys(t, BS), ['e1']).has('e1'));
});

test('events of a hybrid model other KV-cache groups are not indexed', () => {
  const idx = new KvIndex();
  const tally = newTally();
  const t = toks(2 * BS);
  idx.apply('e1', 0, b(stored(hs(0, 2), undefined, t, { group: 0 }), stored(hs(0, 2, 5000n), undefined, t, { group: 1 })), tally);
  idx.apply('e1', 0, b(removed([1000n], 'gpu', 1)), tally);
  assert.equal(tally.otherGroup, 2);
  assert.deepEqual(idx.match(blockKeys(t, BS), ['e1']).get('e1'), { gpu: 2, total: 2 });
});

// A plain model of the same rules: per engine hash -> key and the set of media; no capacity.
class Model {
  readonly eps = new Map<string, Map<EngineHash, { key: number; media: Set<KvMedium> }>>();
  apply(ep: string, ev: KvEvent): void {
    let m = this.eps.get(ep);
    if (!m) {
      m = new Map();
      this.eps.set(ep, m);
    }
    if (ev.kind === 'cleared') {
      m.clear();
      return;
    }
    if (ev.kind === 'removed') {
      for (const h of ev.hashes) {
        const e = m.get(h);
        e?.media.delete(ev.medium);
        if (e && e.media.size === 0) m.delete(h);
      }
      return;
    }
    let key = ev.parent === undefined ? rootKey(ev.loraName) : m.get(ev.parent)?.key;
    if (key === undefined) return;
    for (let i = 0; i < ev.hashes.length; i++) {
      key = nextKey(key, ev.tokens, i * BS, (i + 1) * BS);
      const h = ev.hashes[i]!;
      const e = m.get(h);
      if (e && e.key === key) e.media.add(ev.medium);
      else m.set(h, { key, media: new Set([ev.medium]) });
    }
  }
  match(keys: number[], ep: string): { gpu: number; total: number } {
    const m = this.eps.get(ep) ?? new Map();
    const lead = (ok: (media: Set<KvMedium>) => boolean): number => {
      let n = 0;
      for (const k of keys) {
        if (![...m.values()].some((e) => e.key === k && ok(e.media))) break;
        n++;
      }
      return n;
    };
    return { gpu: lead((s) => s.has('gpu')), total: lead((s) => s.size > 0) };
  }
}

test('random event sequences: the index matches a plain model of the same rules', () => {
  // a small world (so that random steps meet): 3 prompts of 3 blocks, two sharing a prefix, hashes derived from (prompt, block) so that the engine's hash of a
  // block is stable, as an engine's is
  const prompts = [toks(3 * BS), [...toks(2 * BS), ...toks(BS, 777)], toks(3 * BS, 5)];
  const hashOf = (p: number, i: number): bigint => {
    // prompts 0 and 1 share their first 2 blocks, so the engine gives them the same hashes
    const q = p === 1 && i < 2 ? 0 : p;
    return BigInt(q * 100 + i) + 0xff00_0000_0000_0000n;
  };
  const media: KvMedium[] = ['gpu', 'cpu'];
  const op = fc.oneof(
    fc.record({ t: fc.constant('store' as const), p: fc.nat(2), from: fc.nat(2), n: fc.integer({ min: 1, max: 3 }), m: fc.nat(1) }),
    fc.record({ t: fc.constant('remove' as const), p: fc.nat(2), from: fc.nat(2), n: fc.integer({ min: 1, max: 3 }), m: fc.nat(1) }),
    fc.record({ t: fc.constant('clear' as const) }),
  );
  fc.assert(
    fc.property(fc.array(op, { minLength: 5, maxLength: 30 }), (ops) => {
      const idx = new KvIndex();
      const model = new Model();
      for (const o of ops) {
        let ev: KvEvent;
        if (o.t === 'clear') ev = { kind: 'cleared' };
        else {
          const to = Math.min(3, o.from + o.n);
          const hashes = Array.from({ length: to - o.from }, (_, i) => hashOf(o.p, o.from + i));
          const medium = media[o.m]!;
          ev =
            o.t === 'store'
              ? stored(hashes, o.from === 0 ? undefined : hashOf(o.p, o.from - 1), prompts[o.p]!.slice(o.from * BS, to * BS), { medium })
              : removed(hashes, medium);
        }
        idx.apply('e', 0, b(ev));
        model.apply('e', ev);
        for (const p of prompts) {
          const keys = blockKeys(p, BS);
          const want = model.match(keys, 'e');
          const got = idx.match(keys, ['e']).get('e') ?? { gpu: 0, total: 0 };
          assert.deepEqual(got, want);
        }
      }
    }),
    { numRuns: 500 },
  );
});

/** A malformed sink that keeps what it was told. */
function reasons(): { sink: (r: MalformedReason, d: string) => void; seen: MalformedReason[] } {
  const seen: MalformedReason[] = [];
  return { sink: (r) => seen.push(r), seen };
}

test('a declared block size is the endpoint own: an event of another size is dropped and counted, nothing else moves', () => {
  const idx = new KvIndex();
  const t = toks(3 * BS);
  idx.setBlockSize('e1', BS);
  idx.setBlockSize('e2', BS);
  idx.apply('e1', 0, b(stored(hs(0, 3), undefined, t)));
  idx.apply('e2', 0, b(stored(hs(0, 3), undefined, t)));
  const { sink, seen } = reasons();
  // e2 says its blocks are of one token: dropped whole; e2 keeps its size and its blocks, e1 is untouched
  const tally = newTally();
  idx.apply('e2', 0, b(stored(hs(10, 12, 5000n), undefined, [7, 8], { blockSize: 1 }), stored(hs(3, 4), 1002n, toks(BS, 99))), tally, sink);
  assert.deepEqual(seen, ['block-size']);
  assert.equal(tally.stored, 1, 'the good event of the same batch is applied');
  assert.equal(idx.blockSize('e2'), BS);
  assert.equal(idx.blockSize('e1'), BS);
  assert.equal(idx.blocks('e2'), 4);
  assert.deepEqual(idx.match(blockKeys(t, BS), ['e1', 'e2']).get('e1'), { gpu: 3, total: 3 });
  assert.deepEqual(idx.match(blockKeys(t, BS), ['e1', 'e2']).get('e2'), { gpu: 3, total: 3 });
  assert.equal(idx.match(blockKeys([7, 8], 1), ['e2']).size, 0);
});

test('without a declared size an endpoint takes its first event size, its own alone, until it holds nothing again', () => {
  const idx = new KvIndex();
  const { sink, seen } = reasons();
  const t = toks(2 * BS);
  idx.apply('odd', 0, b(stored(hs(0, 2), undefined, [1, 2], { blockSize: 1 })), newTally(), sink);
  idx.apply('fine', 0, b(stored(hs(0, 2), undefined, t)), newTally(), sink);
  assert.equal(idx.blockSize('odd'), 1);
  assert.equal(idx.blockSize('fine'), BS, 'one endpoint size never becomes another one');
  // while "odd" holds blocks of one token, a block of another size would chain wrongly: dropped
  idx.apply('odd', 0, b(stored(hs(5, 7), undefined, t)), newTally(), sink);
  assert.deepEqual(seen, ['block-size']);
  assert.equal(idx.blocks('odd'), 2);
  // emptied (a restart, a gap that could not be filled): the next event's size is taken again
  idx.clearEndpoint('odd');
  idx.apply('odd', 0, b(stored(hs(5, 7), undefined, t)), newTally(), sink);
  assert.equal(idx.blockSize('odd'), BS);
  assert.deepEqual(idx.match(blockKeys(t, BS), ['odd', 'fine']).size, 2);
  assert.deepEqual(seen, ['block-size']);
});

test('a declared size that differs from the indexed blocks drops them: their keys were cut in the wrong blocks', () => {
  const idx = new KvIndex();
  idx.apply('e1', 0, b(stored(hs(0, 4), undefined, toks(4 * 2), { blockSize: 2 })));
  assert.equal(idx.blocks('e1'), 4);
  idx.setBlockSize('e1', 2); // the same: nothing moves
  assert.equal(idx.blocks('e1'), 4);
  idx.setBlockSize('e1', BS);
  assert.equal(idx.blocks('e1'), 0);
  assert.equal(idx.blockSize('e1'), BS);
  idx.apply('e1', 0, b(stored(hs(0, 2), undefined, toks(2 * BS))));
  assert.equal(idx.blocks('e1'), 2);
});
