import { test } from 'node:test';
import assert from 'node:assert/strict';
import slowestReporter, { durationRecord, slowestLines } from '../support/slowest-reporter.mjs';

test('the summary names the wall time and the slowest files first, by their own time', () => {
  const byFile = new Map(Array.from({ length: 12 }, (_, i) => [`/r/test/f${i}.test.ts`, (i + 1) * 1000] as const));
  const lines = slowestLines(byFile, 61_234, 10, '/r');
  assert.equal(lines[0], "# suite wall time 61.2 s (files' own time summed: 78.0 s, 12 files)");
  assert.equal(lines[1], '# the 10 slowest files (own time):');
  assert.equal(lines.length, 12);
  assert.equal(lines[2], '#     12.0 s  test/f11.test.ts');
  assert.equal(lines[11], '#      3.0 s  test/f2.test.ts');
});

test('the reporter adds up top-level tests per file, failed ones too, and skips nested ones', async () => {
  const events = [
    { type: 'test:pass', data: { nesting: 0, file: '/r/a.test.ts', details: { duration_ms: 1500 } } },
    { type: 'test:pass', data: { nesting: 1, file: '/r/a.test.ts', details: { duration_ms: 1400 } } },
    { type: 'test:fail', data: { nesting: 0, file: '/r/a.test.ts', details: { duration_ms: 500 } } },
    { type: 'test:pass', data: { nesting: 0, file: '/r/b.test.ts', details: { duration_ms: 3000 } } },
    { type: 'test:diagnostic', data: { nesting: 0, file: '/r/b.test.ts' } },
  ];
  async function* source() {
    yield* events;
  }
  let out = '';
  for await (const chunk of slowestReporter(source())) out += chunk;
  assert.match(out, /files' own time summed: 5\.0 s, 2 files/);
  assert.ok(out.indexOf('b.test.ts') < out.indexOf('a.test.ts'), out);
  assert.match(out, /2\.0 s {2}\S*a\.test\.ts/);
});

test("the duration record is each file's own seconds by its path relative to the repository, in path order", () => {
  const byFile = new Map([
    ['/r/test/unit/b.test.ts', 1234],
    ['/r/test/integration/a.test.ts', 56_789],
  ]);
  assert.deepEqual(Object.entries(durationRecord(byFile, '/r')), [
    ['test/integration/a.test.ts', 56.8],
    ['test/unit/b.test.ts', 1.2],
  ]);
});
