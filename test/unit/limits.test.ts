// The rate limit's buckets (bounded, least recently used forgotten first) and who a request's client is.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseCidr } from '../../src/router/config/config.js';
import type { InboundRequest } from '../../src/router/core/exchange.js';
import { ClientIdentity } from '../../src/router/server/client-address.js';
import { TokenBuckets } from '../../src/router/server/limits.js';

test('the bucket map is bounded: past maxKeys the least recently used bucket is forgotten, one at a time', () => {
  let now = 0;
  const buckets = new TokenBuckets(1, 1, () => now, 3);
  assert.equal(buckets.take('a'), 0);
  assert.equal(buckets.take('b'), 0);
  assert.equal(buckets.take('c'), 0);
  assert.ok(buckets.take('a') > 0, 'a is empty (and now the most recently used)');
  for (let i = 0; i < 10_000; i++) buckets.take(`made-up-${i}`);
  assert.equal(buckets.size, 3);
  now += 10;
  // a busy client keeps its bucket while made-up keys churn past it
  const busy = new TokenBuckets(1, 1, () => now, 3);
  busy.take('busy');
  busy.take('x1');
  busy.take('busy');
  busy.take('x2');
  busy.take('busy');
  busy.take('x3');
  assert.ok(busy.take('busy') > 0, 'its empty bucket was not forgotten and refilled');
});

test('evicting is O(1): keys past the bound cost what keys below it cost, not a walk over the ones evicted before', () => {
  // relative, so a busy machine slows both halves alike: 100,000 keys below a bound of 100,000, then 300,000 past it
  // (3x the keys). A Map used as the queue (delete its first key) took 40-250x as long per key past the bound.
  const buckets = new TokenBuckets(1, 1, () => 0, 100_000);
  const time = (from: number, to: number): number => {
    const started = process.hrtime.bigint();
    for (let i = from; i < to; i++) buckets.take(`k${i}`);
    return Number(process.hrtime.bigint() - started) / 1e6;
  };
  const below = time(0, 100_000);
  const past = time(100_000, 400_000);
  assert.equal(buckets.size, 100_000);
  assert.ok(past < 30 * Math.max(below, 20), `100,000 keys below the bound ${below.toFixed(0)} ms, 300,000 past it ${past.toFixed(0)} ms`);
});

test('past the bound the least recently used bucket goes, not one in use', () => {
  const buckets = new TokenBuckets(1, 1, () => 0, 3);
  for (const k of ['a', 'b', 'c']) buckets.take(k);
  // a is used again (its token is spent: it is limited), then d pushes out b, the least recently used
  assert.ok(buckets.take('a') > 0);
  buckets.take('d');
  assert.equal(buckets.size, 3);
  assert.ok(buckets.take('a') > 0, 'a kept its empty bucket');
  assert.equal(buckets.take('b'), 0, 'b was forgotten: a fresh bucket');
});

const req = (remoteAddress: string, headers: Record<string, string> = {}): InboundRequest => ({
  headers,
  rawHeaders: [],
  socket: { bytesWritten: 0, remoteAddress },
});
const cidrs = (...list: string[]) => list.map((c) => parseCidr(c)!);

test('without keys the bucket is the address, whatever key is presented; with keys, the key', () => {
  const none = new ClientIdentity([], () => false);
  assert.equal(none.bucketKey(req('10.0.0.1', { authorization: 'Bearer x' })), none.bucketKey(req('10.0.0.1', { 'x-api-key': 'y' })));
  const keyed = new ClientIdentity([], () => true);
  assert.notEqual(keyed.bucketKey(req('10.0.0.1', { authorization: 'Bearer a' })), keyed.bucketKey(req('10.0.0.1', { 'x-api-key': 'b' })));
  assert.equal(keyed.bucketKey(req('10.0.0.1', { authorization: 'Bearer a' })), keyed.bucketKey(req('10.0.0.2', { 'x-api-key': 'a' })));
});

test('X-Forwarded-For: only from a trusted peer; the right-most untrusted entry is the client', () => {
  const id = new ClientIdentity(cidrs('10.0.0.0/8', 'fd00::/8'), () => false);
  assert.equal(id.address(req('192.0.2.1', { 'x-forwarded-for': '198.51.100.7' })), '192.0.2.1', 'untrusted peer: its own address');
  assert.equal(id.address(req('10.1.1.1', { 'x-forwarded-for': '198.51.100.7' })), '198.51.100.7');
  assert.equal(id.address(req('::ffff:10.1.1.1', { 'x-forwarded-for': '198.51.100.7' })), '198.51.100.7', 'IPv4-mapped peer');
  assert.equal(id.address(req('10.1.1.1', { 'x-forwarded-for': '1.1.1.1, 198.51.100.7, 10.2.2.2' })), '198.51.100.7');
  assert.equal(id.address(req('fd00::5', { 'x-forwarded-for': '[2001:db8::1]:443' })), '2001:db8::1');
  assert.equal(id.address(req('10.1.1.1', { 'x-forwarded-for': '198.51.100.7:5000' })), '198.51.100.7');
  assert.equal(id.address(req('10.1.1.1', { 'x-forwarded-for': '10.3.3.3, 10.2.2.2' })), '10.3.3.3', 'all trusted: the left-most');
  assert.equal(id.address(req('10.1.1.1')), '10.1.1.1', 'no header: the peer');
  assert.equal(id.address(req('10.1.1.1', { 'x-forwarded-for': 'x'.repeat(500) })).length, 64, 'junk is cut');
});

test('parseCidr: addresses and blocks, v4 and v6; junk refused', () => {
  assert.deepEqual(parseCidr('10.0.0.0/8'), { address: '10.0.0.0', prefix: 8, family: 'ipv4' });
  assert.deepEqual(parseCidr('::1'), { address: '::1', prefix: 128, family: 'ipv6' });
  assert.deepEqual(parseCidr('192.0.2.4'), { address: '192.0.2.4', prefix: 32, family: 'ipv4' });
  for (const bad of ['10.0.0.0/33', 'fd00::/129', 'host', '10.0.0.0/8/1', '10.0.0.0/', '10.0.0.0/x'])
    assert.equal(parseCidr(bad), undefined, bad);
});
