// Summarises a V8 CPU profile (node --cpu-prof): self time per function and per file, idle excluded.
// Usage: node --import tsx bench/profile.ts FILE.cpuprofile [--skip-seconds 3] [--top 40]
// Note: on a loaded machine, samples that land while the thread is descheduled inside a syscall are charged to that
// syscall (writev shows up far larger than its real CPU cost); compare user/system CPU time from /proc as well.
import { readFileSync } from 'node:fs';

interface ProfileNode {
  readonly id: number;
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number };
}
interface Profile {
  readonly nodes: readonly ProfileNode[];
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

function option(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
}

const file = process.argv[2];
if (!file || file.startsWith('--')) {
  process.stderr.write('usage: node --import tsx bench/profile.ts FILE.cpuprofile [--skip-seconds 3] [--top 40]\n');
  process.exit(2);
}
const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
const skipUs = option('skip-seconds', 3) * 1e6;
const top = option('top', 40);
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const short = (url: string): string => url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*?\/(dist|src)\//, '$1/');

const byFunction = new Map<string, number>();
const byFile = new Map<string, number>();
let total = 0;
let t = 0;
for (let i = 0; i < profile.samples.length; i++) {
  t += profile.timeDeltas[i] ?? 0;
  if (t < skipUs) continue;
  const node = byId.get(profile.samples[i] as number);
  if (!node || node.callFrame.functionName === '(idle)') continue;
  total++;
  const f = node.callFrame;
  const fn = `${f.functionName || '(anonymous)'} ${short(f.url)}:${f.lineNumber + 1}`;
  byFunction.set(fn, (byFunction.get(fn) ?? 0) + 1);
  const where = short(f.url) || f.functionName;
  byFile.set(where, (byFile.get(where) ?? 0) + 1);
}

const print = (title: string, m: Map<string, number>): void => {
  process.stdout.write(`\n${title}\n`);
  for (const [k, v] of [...m].sort((a, b) => b[1] - a[1]).slice(0, top))
    process.stdout.write(`${((100 * v) / total).toFixed(1).padStart(6)}%  ${k}\n`);
};
process.stdout.write(`${total} busy samples after the first ${skipUs / 1e6} s\n`);
print('self time by function', byFunction);
print('self time by file', byFile);
