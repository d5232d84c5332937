import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SlotQueue } from '../../src/tools/sim/queue.js';

test('requests beyond max-num-seqs wait and start in FIFO order as slots free', () => {
  const queue = new SlotQueue(2);
  const started: string[] = [];
  const a = queue.admit(() => started.push('a'));
  const b = queue.admit(() => started.push('b'));
  const c = queue.admit(() => started.push('c'));
  const d = queue.admit(() => started.push('d'));
  assert.deepEqual(started, ['a', 'b']);
  assert.equal(queue.running, 2);
  assert.equal(queue.waiting, 2);
  assert.equal(c.started, false);

  b.release();
  assert.deepEqual(started, ['a', 'b', 'c']);
  assert.equal(c.started, true);
  assert.equal(queue.running, 2);
  assert.equal(queue.waiting, 1);

  a.release();
  c.release();
  d.release();
  assert.deepEqual(started, ['a', 'b', 'c', 'd']);
  assert.equal(queue.running, 0);
  assert.equal(queue.waiting, 0);
});

test('a waiter that leaves gives up its queue position without ever starting', () => {
  const queue = new SlotQueue(1);
  const started: string[] = [];
  const a = queue.admit(() => started.push('a'));
  const b = queue.admit(() => started.push('b'));
  queue.admit(() => started.push('c'));
  b.release();
  assert.equal(queue.waiting, 1);
  a.release();
  assert.deepEqual(started, ['a', 'c']);
  assert.equal(queue.running, 1);
});

test('release is idempotent and never frees a slot twice', () => {
  const queue = new SlotQueue(1);
  const a = queue.admit(() => undefined);
  queue.admit(() => undefined);
  a.release();
  a.release();
  assert.equal(queue.running, 1);
  assert.equal(queue.waiting, 0);
});

test('a new request does not overtake waiting ones even when a slot frees in between', () => {
  const queue = new SlotQueue(1);
  const started: string[] = [];
  const a = queue.admit(() => started.push('a'));
  queue.admit(() => started.push('b'));
  a.release();
  queue.admit(() => started.push('c'));
  assert.deepEqual(started, ['a', 'b']);
  assert.equal(queue.waiting, 1);
});

test('capacity must be a positive whole number', () => {
  assert.throws(() => new SlotQueue(0), RangeError);
  assert.throws(() => new SlotQueue(1.5), RangeError);
});

/** A sequence whose held tokens the test sets. */
function seq(tokens: number, held = tokens): { tokens: number; now: number; held(): number } {
  return {
    tokens,
    now: held,
    held() {
      return this.now;
    },
  };
}

test('KV room: a request waits until its blocks fit beside the running ones, even with batch slots free', () => {
  // 10 blocks of 16 tokens; each request reserves the blocks it holds at its end
  const queue = new SlotQueue(4, { blocks: 10, blockSize: 16 });
  const started: string[] = [];
  const a = queue.admit(() => started.push('a'), seq(64)); // 4 blocks
  const b = queue.admit(() => started.push('b'), seq(80)); // 5 blocks: 9 of 10
  const c = queue.admit(() => started.push('c'), seq(20)); // 2 blocks: does not fit
  const d = queue.admit(() => started.push('d'), seq(1)); // 1 block would fit, but c is first in line
  assert.deepEqual(started, ['a', 'b']);
  assert.equal(queue.running, 2);
  assert.equal(queue.waiting, 2);
  assert.equal(c.started, false);
  assert.equal(d.started, false);
  a.release();
  assert.deepEqual(started, ['a', 'b', 'c', 'd']);
  assert.equal(queue.waiting, 0);
  b.release();
  c.release();
  d.release();
  assert.equal(queue.kvUsage, 0);
});

test('KV usage: the blocks running sequences hold now (prompt and generated tokens), over the pool, at most 1', () => {
  const queue = new SlotQueue(8, { blocks: 20, blockSize: 16 });
  assert.equal(queue.kvUsage, 0);
  const x = seq(100, 40); // holds 3 blocks now, 7 at its end
  const y = seq(60, 16); // 1 block now, 4 at its end
  queue.admit(() => undefined, x);
  queue.admit(() => undefined, y);
  assert.equal(queue.kvUsage, 4 / 20);
  // they generate: usage rises with the tokens held, never past what was reserved
  x.now = 100;
  y.now = 1_000;
  assert.equal(queue.kvUsage, (7 + 4) / 20);
  // a waiting request holds nothing
  const z = queue.admit(() => undefined, seq(200, 200));
  assert.equal(z.started, false);
  assert.equal(queue.kvUsage, 11 / 20);
});

test('KV room: a request longer than the whole pool runs alone instead of waiting forever', () => {
  const queue = new SlotQueue(4, { blocks: 4, blockSize: 16 });
  const started: string[] = [];
  const small = queue.admit(() => started.push('small'), seq(16));
  const huge = queue.admit(() => started.push('huge'), seq(1_000));
  assert.deepEqual(started, ['small']);
  small.release();
  assert.deepEqual(started, ['small', 'huge']);
  assert.equal(queue.kvUsage, 1);
  huge.release();
});

test('KV room: the first in line leaving lets the next one in', () => {
  const queue = new SlotQueue(4, { blocks: 4, blockSize: 16 });
  const started: string[] = [];
  queue.admit(() => started.push('a'), seq(48)); // 3 of 4 blocks
  const big = queue.admit(() => started.push('big'), seq(64)); // 4 blocks: waits
  queue.admit(() => started.push('small'), seq(10)); // 1 block: fits, but behind big
  assert.deepEqual(started, ['a']);
  big.release();
  assert.deepEqual(started, ['a', 'small']);
  assert.equal(queue.waiting, 0);
});

test('the KV pool must hold a block and blocks a token', () => {
  assert.throws(() => new SlotQueue(1, { blocks: 0, blockSize: 16 }), RangeError);
  assert.throws(() => new SlotQueue(1, { blocks: 4, blockSize: 0 }), RangeError);
});
