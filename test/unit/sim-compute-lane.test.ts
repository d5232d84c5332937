import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ComputeLane } from '../../src/tools/sim/compute-lane.js';

test('prefills queue on the lane: each ends after the ones reserved before it', () => {
  const lane = new ComputeLane();
  assert.equal(lane.prefill(1_000, 300), 300, 'an idle lane starts at once');
  assert.equal(lane.prefill(1_100, 300), 500, 'the second waits for the first (ends at 1600)');
  assert.equal(lane.prefill(2_000, 50), 50, 'idle again after 1600');
  assert.equal(lane.prefill(2_010, 0), 40, 'a prompt served from the prefix cache still waits its turn');
});

test('a decode step due while a prefill runs waits for its end, and is counted; once idle, none wait', () => {
  const lane = new ComputeLane();
  assert.equal(lane.decodeWait(0), 0, 'nothing ever ran');
  lane.prefill(100, 200);
  assert.equal(lane.decodeWait(150), 150);
  assert.equal(lane.decodeWait(299), 1);
  assert.equal(lane.decodeWait(300), 0, 'due exactly at the end: no wait');
  assert.equal(lane.decodeWait(400), 0);
  assert.deepEqual({ stalls: lane.stalls, stalledMs: lane.stalledMs }, { stalls: 2, stalledMs: 151 });
  lane.resetStats();
  assert.deepEqual({ stalls: lane.stalls, stalledMs: lane.stalledMs }, { stalls: 0, stalledMs: 0 });
});
