// tools/run-tests.ts: which processes `npm test` starts (files alone, groups of files) and in what order.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { scratchDir } from '../support/scratch.js';
import { fileGroups, groupEntry, OWN_PROCESS, runList, startOrder, testFiles } from '../../tools/run-tests.js';

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
  // files recorded at 0 s (a tool's files, skipped in the run recorded) ask for no group at all: one still runs them
  assert.deepEqual(fileGroups(['u/x', 'u/y'], { 'u/x': 0, 'u/y': 0 }, 0), [['u/x', 'u/y']]);
});

test("a group's entry imports its files in order by file URL, so one process registers every file's tests", () => {
  const text = groupEntry(['test/unit/a.test.ts', 'test/unit/b c.test.ts'], '/repo');
  assert.deepEqual(
    text.split('\n').filter((l) => l.startsWith('import')),
    ['import "file:///repo/test/unit/a.test.ts";', 'import "file:///repo/test/unit/b%20c.test.ts";'],
  );
});

test('what node --test is given runs every test file once: alone (integration files, own-process unit files) or in a group entry', () => {
  const files = testFiles('test');
  const dir = scratchDir('run-list-');
  for (const seconds of [JSON.parse(readFileSync('test/durations.json', 'utf8')) as Record<string, number>, {}]) {
    const list = runList(files, seconds, dir);
    const ran: string[] = [];
    for (const entry of list) {
      if (!entry.endsWith('.test.mjs')) ran.push(entry);
      else
        for (const m of readFileSync(entry, 'utf8').matchAll(/^import "(.*)";$/gm))
          ran.push(path.relative(process.cwd(), fileURLToPath(m[1] as string)));
    }
    assert.deepEqual([...ran].sort(), [...files].sort(), 'each file once');
    const alone = list.filter((f) => f.startsWith('test/'));
    assert.ok(alone.includes('test/unit/lazy-module.test.ts'), 'the file with the marker runs alone');
    assert.deepEqual(
      alone.filter((f) => f.startsWith('test/unit/')),
      files.filter((f) => f.startsWith('test/unit/') && readFileSync(f, 'utf8').includes(OWN_PROCESS)),
      'no other unit file runs alone',
    );
  }
});
