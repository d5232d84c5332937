// `npm test`'s test run (after the lint and the build): every test file through node:test and tsx, and beside it the
// type check at a lower CPU priority (nice 10), so that on a 2-core machine it mostly uses what the tests leave idle
// (most integration tests wait on processes) instead of running before them. The exit code is non-zero when either fails;
// the type check's output is printed after the tests'.
//
// Files start longest first (integration files before unit files, then by the last recorded time in
// test/durations.json, new files first): with four files at a time, a long file started last would run on alone.
// `--write-durations` records this run's times there. Files given as arguments run alone, in that order.
//
// Unit files run together, a few groups of them each in one process (`fileGroups`), and so do integration files
// recorded under 8 s (about 25 s of them per process): a process of its own costs a file about 0.7 s of CPU (node,
// tsx and the modules every file imports), up to 1.5 s with the router's modules, most of what a short file does; 80
// unit files alone took 144 CPU-seconds, in 4 groups 60. The files of a group run one after another, as a file's
// tests do. A file that must have a process to itself (it looks at what the process loaded, say) says so with the
// line `// run-tests: own process`. Reports still name each test's own file.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { setPriority } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const durationsFile = path.join(root, 'test', 'durations.json');

/** Every `*.test.ts` under `dir`, as paths relative to the repository. */
export function testFiles(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(path.join(root, dir), { withFileTypes: true })) {
    const rel = path.posix.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...testFiles(rel));
    else if (entry.name.endsWith('.test.ts')) out.push(rel);
  }
  return out;
}

/**
 * The order files start in: integration files (they wait on processes) before the rest, each group by its recorded
 * seconds, longest first; a file without a record counts as the longest (it is new, and may be long); ties by name.
 */
export function startOrder(files: readonly string[], seconds: Readonly<Record<string, number>>): string[] {
  const group = (f: string) => (f.includes('/integration/') ? 0 : 1);
  const known = (f: string) => seconds[f] ?? Number.POSITIVE_INFINITY;
  return [...files].sort((a, b) => group(a) - group(b) || known(b) - known(a) || a.localeCompare(b));
}

/** The marker line of a unit file that runs in a process of its own. */
export const OWN_PROCESS = '// run-tests: own process';

/**
 * Files in `count` groups (at least one) of about equal recorded time (longest first, each to the group with least so
 * far; a file without a record counts as 1 s), each group's files in name order. Empty groups are left out.
 */
export function fileGroups(files: readonly string[], seconds: Readonly<Record<string, number>>, count: number): string[][] {
  const groups = Array.from({ length: Math.max(1, count) }, () => ({ total: 0, files: [] as string[] }));
  const cost = (f: string) => seconds[f] ?? 1;
  for (const f of [...files].sort((a, b) => cost(b) - cost(a) || a.localeCompare(b))) {
    const least = groups.reduce((min, g) => (g.total < min.total ? g : min));
    least.total += cost(f);
    least.files.push(f);
  }
  return groups.filter((g) => g.files.length > 0).map((g) => g.files.sort((a, b) => a.localeCompare(b)));
}

/** The text of a group's entry file: it imports each file (paths relative to `root`) in turn. */
export function groupEntry(files: readonly string[], rootDir: string): string {
  const lines = ['// written by tools/run-tests.ts: these test files, in one process'];
  for (const f of files) lines.push(`import ${JSON.stringify(pathToFileURL(path.join(rootDir, f)).href)};`);
  return `${lines.join('\n')}\n`;
}

const UNIT_GROUPS = 4;
/** an integration file recorded under this many seconds shares a process with others like it */
const SHORT_SECONDS = 8;
/** about how many recorded seconds of short integration files one process runs */
const SHORT_GROUP_SECONDS = 25;

/**
 * What node --test is given, in start order (startOrder): integration files, and groups of the short ones, then
 * own-process unit files and the unit groups. A group runs as its entry file, under test-groups/integration or
 * test-groups/unit (under `dir`), whose recorded time is its files' sum.
 */
export function runList(
  files: readonly string[],
  seconds: Readonly<Record<string, number>>,
  dir = path.join(root, 'node_modules', '.cache', 'llm-router', 'test-groups'),
): string[] {
  const own = (f: string) => readFileSync(path.join(root, f), 'utf8').includes(OWN_PROCESS);
  const integration = (f: string) => f.includes('/integration/');
  const unit = files.filter((f) => !integration(f) && !own(f));
  const short = files.filter((f) => integration(f) && (seconds[f] ?? Number.POSITIVE_INFINITY) < SHORT_SECONDS && !own(f));
  const shortSeconds = short.reduce((sum, f) => sum + (seconds[f] ?? 0), 0);
  const all = { ...seconds };
  const entries = (kind: string, groups: string[][]): string[] => {
    mkdirSync(path.join(dir, kind), { recursive: true });
    return groups.map((g, i) => {
      const entry = path.relative(root, path.join(dir, kind, `${i + 1}-of-${groups.length}.test.mjs`));
      writeFileSync(path.join(root, entry), groupEntry(g, root));
      all[entry] = g.reduce((sum, f) => sum + (seconds[f] ?? 1), 0);
      return entry;
    });
  };
  const grouped = [
    ...entries('integration', fileGroups(short, seconds, Math.ceil(shortSeconds / SHORT_GROUP_SECONDS))),
    ...entries('unit', fileGroups(unit, seconds, UNIT_GROUPS)),
  ];
  const alone = files.filter((f) => !unit.includes(f) && !short.includes(f));
  return startOrder([...alone, ...grouped], all);
}

function readDurations(): Record<string, number> {
  try {
    const parsed: unknown = JSON.parse(readFileSync(durationsFile, 'utf8'));
    if (parsed && typeof parsed === 'object') {
      const out: Record<string, number> = {};
      for (const [k, v] of Object.entries(parsed)) if (typeof v === 'number') out[k] = v;
      return out;
    }
  } catch {
    // no record yet: every file counts as new
  }
  return {};
}

function exited(child: ChildProcess): Promise<number> {
  return new Promise((resolve) => child.once('close', (code, signal) => resolve(code ?? (signal ? 1 : 0))));
}

async function main(argv: readonly string[]): Promise<number> {
  const writeDurations = argv.includes('--write-durations');
  const given = argv.filter((a) => !a.startsWith('--'));
  const files = given.length > 0 ? given : runList(testFiles('test'), readDurations());

  const started = performance.now();
  const typecheck = spawn(process.execPath, [path.join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-b', 'tsconfig.check.json'], {
    cwd: root,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  try {
    if (typecheck.pid !== undefined) setPriority(typecheck.pid, 10);
  } catch {
    // not allowed here: it runs at the normal priority
  }
  let typecheckOutput = '';
  typecheck.stdout?.on('data', (d: Buffer) => {
    typecheckOutput += d.toString();
  });
  typecheck.stderr?.on('data', (d: Buffer) => {
    typecheckOutput += d.toString();
  });
  let typecheckSeconds = 0;
  const typecheckDone = exited(typecheck).then((code) => {
    typecheckSeconds = (performance.now() - started) / 1000;
    return code;
  });

  const tests = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      '--test',
      '--test-concurrency=4',
      '--test-timeout=300000',
      '--test-reporter=tap',
      '--test-reporter-destination=stdout',
      '--test-reporter=./test/support/slowest-reporter.mjs',
      '--test-reporter-destination=stdout',
      ...files,
    ],
    {
      cwd: root,
      stdio: 'inherit',
      env: writeDurations ? { ...process.env, SUITE_DURATIONS_OUT: durationsFile } : process.env,
    },
  );
  const stop = (signal: NodeJS.Signals) => {
    tests.kill(signal);
    typecheck.kill(signal);
  };
  process.once('SIGINT', () => stop('SIGINT'));
  process.once('SIGTERM', () => stop('SIGTERM'));

  const [testCode, typecheckCode] = await Promise.all([exited(tests), typecheckDone]);
  if (typecheckCode === 0)
    console.log(`# type check (tsc -b tsconfig.check.json, beside the tests): passed in ${typecheckSeconds.toFixed(1)} s`);
  else console.log(`# type check (tsc -b tsconfig.check.json, beside the tests): FAILED\n${typecheckOutput}`);
  return testCode !== 0 ? testCode : typecheckCode;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = await main(process.argv.slice(2));
}
