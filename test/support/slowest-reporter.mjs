// A node:test reporter that adds, at the end of the run, the suite's wall time and the ten test files that took longest
// (a file's own time: its top-level tests and suites, hooks included, one after another in its process). It prints
// nothing else; `npm test` runs it beside the TAP reporter, so the slow files are seen on every run. Plain JavaScript:
// the test runner loads its reporters before tsx can compile them (types: slowest-reporter.d.mts).
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';

const startedAt = performance.now();

/** @param {number} ms */
const seconds = (ms) => `${(ms / 1000).toFixed(1)} s`;

/**
 * The summary lines for per-file times (ms), the `count` slowest first.
 * @param {ReadonlyMap<string, number>} byFile
 * @param {number} wallMs
 */
export function slowestLines(byFile, wallMs, count = 10, root = process.cwd()) {
  const sum = [...byFile.values()].reduce((a, b) => a + b, 0);
  const lines = [`# suite wall time ${seconds(wallMs)} (files' own time summed: ${seconds(sum)}, ${byFile.size} files)`];
  lines.push(`# the ${Math.min(count, byFile.size)} slowest files (own time):`);
  for (const [file, ms] of [...byFile].sort((a, b) => b[1] - a[1]).slice(0, count)) {
    lines.push(`#   ${seconds(ms).padStart(8)}  ${path.relative(root, file)}`);
  }
  return lines;
}

/**
 * Each file's own seconds (one decimal), by its path relative to `root`, in path order.
 * @param {ReadonlyMap<string, number>} byFile
 * @returns {Record<string, number>}
 */
export function durationRecord(byFile, root = process.cwd()) {
  const entries = [...byFile].map(([file, ms]) => [path.relative(root, file).split(path.sep).join('/'), Math.round(ms / 100) / 10]);
  return Object.fromEntries(entries.sort((a, b) => String(a[0]).localeCompare(String(b[0]))));
}

/** @param {AsyncIterable<{ type: string, data?: { nesting?: number, file?: string, details?: { duration_ms?: number } } }>} source */
export default async function* slowestReporter(source) {
  /** @type {Map<string, number>} */
  const byFile = new Map();
  for await (const event of source) {
    if (event.type !== 'test:pass' && event.type !== 'test:fail') continue;
    const { nesting, file, details } = event.data ?? {};
    if (nesting !== 0 || !file || details?.duration_ms === undefined) continue;
    byFile.set(file, (byFile.get(file) ?? 0) + details.duration_ms);
  }
  yield `${slowestLines(byFile, performance.now() - startedAt).join('\n')}\n`;
  // tools/run-tests.ts --write-durations: each file's own seconds, which later runs start longest first
  const out = process.env.SUITE_DURATIONS_OUT;
  if (out) writeFileSync(out, `${JSON.stringify(durationRecord(byFile), null, 2)}\n`);
}
