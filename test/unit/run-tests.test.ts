// tools/run-tests.ts: the order `npm test` starts its files in.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { groupEntry, OWN_PROCESS, startOrder, testFiles, fileGroups } from '../../tools/run-tests.js';

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

test('files are dealt into groups of about equal recorded time, each group in name order; no file is lost or doubled', () => {
  const seconds = { 'u/a': 8, 'u/b': 5, 'u/c': 4, 'u/d': 3, 'u/e': 1 };
  const groups = fileGroups(['u/e', 'u/d', 'u/c', 'u/b', 'u/a', 'u/new'], seconds, 3);
  assert.deepEqual(groups, [['u/a'], ['u/b', 'u/e', 'u/new'], ['u/c', 'u/d']]);
  assert.deepEqual(fileGroups(['u/a'], seconds, 4), [['u/a']], 'no empty groups');
  assert.deepEqual(fileGroups([], seconds, 4), []);
});

test("a group's entry imports its files in order by file URL, so one process registers every file's tests", () => {
  const text = groupEntry(['test/unit/a.test.ts', 'test/unit/b c.test.ts'], '/repo');
  assert.deepEqual(
    text.split('\n').filter((l) => l.startsWith('import')),
    ['import "file:///repo/test/unit/a.test.ts";', 'import "file:///repo/test/unit/b%20c.test.ts";'],
  );
});

test('a unit file that needs a process to itself says so with the marker line', () => {
  const own = testFiles('test').filter((f) => readFileSync(f, 'utf8').includes(OWN_PROCESS));
  assert.ok(own.includes('test/unit/lazy-module.test.ts'), own.join(' '));
});
