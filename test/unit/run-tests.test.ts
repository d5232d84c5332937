// tools/run-tests.ts: the order `npm test` starts its files in.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startOrder, testFiles } from '../../tools/run-tests.js';

test('integration files start before unit files, each group longest first; a file without a record counts as longest', () => {
  const files = [
    'test/unit/a.test.ts',
    'test/unit/b.test.ts',
    'test/integration/x.test.ts',
    'test/integration/y.test.ts',
    'test/integration/new.test.ts',
  ];
  const seconds = {
    'test/unit/a.test.ts': 1,
    'test/unit/b.test.ts': 30,
    'test/integration/x.test.ts': 5,
    'test/integration/y.test.ts': 50,
  };
  assert.deepEqual(startOrder(files, seconds), [
    'test/integration/new.test.ts',
    'test/integration/y.test.ts',
    'test/integration/x.test.ts',
    'test/unit/b.test.ts',
    'test/unit/a.test.ts',
  ]);
  assert.deepEqual(
    startOrder(['test/unit/b.test.ts', 'test/unit/a.test.ts'], {}),
    ['test/unit/a.test.ts', 'test/unit/b.test.ts'],
    'no record: by name',
  );
});

test('every test file is found, this one included, as a path relative to the repository', () => {
  const files = testFiles('test');
  assert.ok(files.includes('test/unit/run-tests.test.ts'), files.join(' '));
  assert.ok(files.some((f) => f.startsWith('test/integration/')));
  assert.ok(files.every((f) => f.endsWith('.test.ts') && !f.startsWith('/')));
});
