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
