// "Did you mean": a bounded edit distance (held against the full computation), and the names it suggests for a
// mistyped flag and for an unknown model (404 model_not_found).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { errors } from '../../src/router/server/errors.js';
import { closest, editDistance, NameIndex, nameIndexFor, similar } from '../../src/router/util/suggest.js';

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

/** The textbook optimal-string-alignment distance, computed in full: what the banded one must agree with. */
function reference(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++)
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) v = Math.min(v, d[i - 2]![j - 2]! + 1);
      d[i]![j] = v;
    }
  return d[a.length]![b.length]!;
}

test('the banded edit distance agrees with the full computation up to its limit', () => {
  const text = fc.string({ unit: fc.constantFrom('a', 'b', 'c', '-'), maxLength: 12 });
  fc.assert(
    fc.property(text, text, fc.integer({ min: 0, max: 4 }), (a, b, limit) => {
      assert.equal(editDistance(a, b, limit), Math.min(reference(a, b), limit + 1));
    }),
    { numRuns: 2_000, seed: 17 },
  );
});

test('did you mean: a swap, a missing letter and case are close; other names and huge inputs get nothing', () => {
  const known = ['demo-chat', 'demo-embed', 'llama-3-8b', 'Qwen2.5-7B'];
  assert.deepEqual(similar('demo-chta', known), ['demo-chat']);
  assert.deepEqual(similar('demo-cht', known), ['demo-chat']);
  assert.deepEqual(similar('DEMO-CHAT', known), ['demo-chat']);
  assert.deepEqual(similar('qwen2.5-7b', known), ['Qwen2.5-7B']);
  assert.deepEqual(similar('llama-3-70b', known), ['llama-3-8b']);
  assert.deepEqual(similar('gpt-4o', known), []);
  assert.deepEqual(similar('x'.repeat(100_000), ['x'.repeat(100_000)]), [], 'a name that long is no typo of a declared one');
  // the closest first, at most three
  assert.deepEqual(similar('mixtral-8x7', ['mixtral-8x7b-v', 'mixtral-8x7b']), ['mixtral-8x7b', 'mixtral-8x7b-v']);
  assert.deepEqual(similar('m-1', ['m-1x', 'm-2', 'm-3', 'm-4', 'n-11']), ['m-1x', 'm-2', 'm-3']);
  assert.equal(errors.modelNotFound('demo-chta', ['demo-chat']).message, 'The model "demo-chta" does not exist. Did you mean "demo-chat"?');
  assert.equal(errors.modelNotFound('m', ['a', 'b', 'c']).message, 'The model "m" does not exist. Did you mean "a", "b" or "c"?');
  assert.equal(errors.modelNotFound('m').message, 'The model "m" does not exist.');
});

test('did you mean: names are compared without their organisation prefix too', () => {
  const known = ['Qwen/Qwen3-8B', 'meta-llama/Llama-3.1-8B-Instruct', 'demo-chat'];
  assert.deepEqual(similar('Qwen3-8B', known), ['Qwen/Qwen3-8B']);
  assert.deepEqual(similar('qwen3-8b', known), ['Qwen/Qwen3-8B'], 'whatever the case');
  assert.deepEqual(similar('qwen3-7b', known), ['Qwen/Qwen3-8B'], 'and a typo of the bare name');
  assert.deepEqual(similar('llama-3.1-8b-instruct', known), ['meta-llama/Llama-3.1-8B-Instruct']);
  assert.deepEqual(similar('Qwen/demo-chat', known), ['demo-chat'], 'a prefix the declared name has not');
  assert.deepEqual(similar('other/Qwen3-8B', known), ['Qwen/Qwen3-8B'], 'another organisation');
  // the same bare name before a typo of the whole one; a whole-name match as close first
  assert.deepEqual(similar('qwen3-8b', ['qwen3-8c', 'Qwen/Qwen3-8B']), ['Qwen/Qwen3-8B', 'qwen3-8c']);
  assert.deepEqual(similar('qwen3-8b', ['Qwen/Qwen3-8B', 'qwen3-8b']), ['qwen3-8b', 'Qwen/Qwen3-8B']);
  assert.deepEqual(similar('gpt-4o', known), []);
  assert.equal(
    errors.modelNotFound('qwen3-8b', similar('qwen3-8b', known)).message,
    'The model "qwen3-8b" does not exist. Did you mean "Qwen/Qwen3-8B"?',
  );
});

/** What `similar` answered before it had an index: every name compared, closest first, ties in the names' order. */
function scanAll(name: string, names: readonly string[], most = 3): string[] {
  if (name.length === 0 || name.length > 256) return [];
  const wanted = name.toLowerCase();
  const limit = Math.min(3, Math.max(1, Math.ceil(wanted.length / 3)));
  return names
    .map((n) => ({ n, d: reference(wanted, n.toLowerCase()) }))
    .filter((x) => x.d <= limit)
    .sort((x, y) => x.d - y.d)
    .slice(0, most)
    .map((x) => x.n);
}

test('the name index answers as comparing every name did (below its bound on compared names)', () => {
  const word = fc.string({ unit: fc.constantFrom('a', 'B', 'b', 'c', '-', '1'), minLength: 0, maxLength: 9 });
  fc.assert(
    fc.property(fc.array(word, { maxLength: 60 }), word, fc.integer({ min: 1, max: 4 }), (names, name, most) => {
      assert.deepEqual(new NameIndex(names).similar(name, most), scanAll(name, names, most));
    }),
    { numRuns: 3_000, seed: 23 },
  );
});

test('the name index at 10,000 names: a typo is found among thousands of near names; an index is kept per name list', () => {
  const names = Array.from({ length: 10_000 }, (_, i) => `org/model-${String(i).padStart(5, '0')}-instruct`);
  const index = new NameIndex(names);
  assert.deepEqual(index.similar('org/model-09998-instrcut', 1), ['org/model-09998-instruct'], 'a swap, with ~3,000 names two edits away');
  assert.deepEqual(index.similar('ORG/MODEL-04321-INSTRUCT'), [
    'org/model-04321-instruct',
    'org/model-00321-instruct',
    'org/model-01321-instruct',
  ]);
  assert.deepEqual(index.similar('org/model-0421-instruct', 1), ['org/model-00421-instruct'], 'a missing digit');
  assert.deepEqual(index.similar('gpt-4o'), []);
  const views = [{ id: 'a' }];
  const first = nameIndexFor(views, () => views.map((v) => v.id));
  assert.equal(
    nameIndexFor(views, () => assert.fail('not asked again')),
    first,
  );
  const same = [{ id: 'a' }];
  assert.equal(
    nameIndexFor(same, () => same.map((v) => v.id)),
    first,
    'the same names: the same index',
  );
});
