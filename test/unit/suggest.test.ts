import { test } from 'node:test';
import assert from 'node:assert/strict';
import { closest, editDistance } from '../../src/router/util/suggest.js';

test('edit distance: insertions, deletions, substitutions, and a swap of neighbours as one edit', () => {
  assert.equal(editDistance('port', 'port'), 0);
  assert.equal(editDistance('prot', 'port'), 1, 'a swap');
  assert.equal(editDistance('portt', 'port'), 1);
  assert.equal(editDistance('', 'abc'), 3);
  assert.equal(editDistance('kitten', 'sitting'), 3);
});

test('closest: case-insensitive, only within a typo distance', () => {
  assert.equal(closest('PROT', ['port', 'host']), 'port');
  assert.equal(closest('demo-chta', ['demo-chat', 'demo-embed']), 'demo-chat');
  assert.equal(closest('x', ['port', 'host']), undefined);
  assert.equal(closest('completely-different', ['port']), undefined);
});
