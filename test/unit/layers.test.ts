// The house rules, checked on every file: imports point down the layers (never from a lower layer to a higher one, never
// sideways between folders of one layer), the router's runtime imports no tool, and no exported type is defined twice.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const SRC = path.join(ROOT, 'src');

/** Lowest first. A module may import its own folder and any folder of a lower layer. docs/architecture.md draws it. */
export const LAYERS: readonly (readonly string[])[] = [
  ['router/core'],
  ['router/util'],
  ['router/config'],
  ['router/tracing'],
  ['router/catalog'],
  ['router/kv'],
  ['router/discovery', 'router/health', 'router/routing', 'router/metrics'],
  ['router/proxy', 'router/scaling', 'router/adapters', 'router/flow'],
  ['router/server'],
  ['router/app'],
  ['tools/sim', 'tools/lint', 'tools/probe', 'tools/demo'],
  ['cli'],
];
/** Files outside every folder above (src/version.ts): importable by all, importing nothing. */
const LEAVES = new Set(['version.ts']);

function folderOf(rel: string): string | undefined {
  let best: string | undefined;
  for (const layer of LAYERS)
    for (const f of layer) if ((rel === f || rel.startsWith(`${f}/`)) && (!best || f.length > best.length)) best = f;
  return best;
}

function rankOf(folder: string): number {
  return LAYERS.findIndex((l) => l.includes(folder));
}

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = path.join(dir, name);
    return statSync(p).isDirectory() ? sources(p) : name.endsWith('.ts') ? [p] : [];
  });
}

interface Edge {
  readonly from: string;
  readonly to: string;
}

function edges(): Edge[] {
  const out: Edge[] = [];
  for (const file of sources(SRC)) {
    const info = ts.preProcessFile(readFileSync(file, 'utf8'), true, true);
    for (const ref of info.importedFiles) {
      if (!ref.fileName.startsWith('.')) continue;
      const target = path.resolve(path.dirname(file), ref.fileName).replace(/\.js$/, '.ts');
      out.push({ from: path.relative(SRC, file), to: path.relative(SRC, target) });
    }
  }
  return out;
}

/** The violations among `list`: empty when every import points down. */
export function violations(list: readonly Edge[]): string[] {
  const bad: string[] = [];
  for (const { from, to } of list) {
    if (LEAVES.has(to)) continue;
    const a = folderOf(from);
    const b = folderOf(to);
    if (!a) bad.push(`${from}: not in any layer (add its folder to LAYERS)`);
    else if (!b) bad.push(`${from} imports ${to}, which is in no layer`);
    else if (a !== b && rankOf(a) <= rankOf(b)) {
      const why = rankOf(a) === rankOf(b) ? 'sideways within one layer' : 'from a lower layer to a higher one';
      bad.push(`${from} imports ${to}: ${why} (${a} -> ${b})`);
    }
  }
  return bad;
}

test('every import points down the layers, and the runtime imports no tool', () => {
  const all = edges();
  assert.ok(all.length > 200, `read the imports (${all.length})`);
  assert.deepEqual(violations(all), []);
  assert.deepEqual(
    all.filter((e) => e.from.startsWith('router/') && (e.to.startsWith('tools/') || e.to.startsWith('cli/'))),
    [],
  );
});

test('the check itself catches an upward import, a sideways one, and the runtime importing a tool', () => {
  assert.match(violations([{ from: 'router/proxy/attempt.ts', to: 'router/server/errors.ts' }])[0] ?? '', /lower layer to a higher/);
  assert.match(violations([{ from: 'router/health/prober.ts', to: 'router/routing/index.ts' }])[0] ?? '', /sideways/);
  assert.match(violations([{ from: 'router/server/pipeline.ts', to: 'tools/sim/engine.ts' }])[0] ?? '', /lower layer to a higher/);
  assert.deepEqual(
    violations([
      { from: 'tools/sim/cli.ts', to: 'router/config/flags.ts' },
      { from: 'router/server/app.ts', to: 'router/server/fast/lane.ts' },
    ]),
    [],
  );
});

test('no exported type, interface, class or enum is defined in two places', () => {
  const where = new Map<string, string[]>();
  for (const file of sources(SRC)) {
    for (const m of readFileSync(file, 'utf8').matchAll(
      /^export (?:declare )?(?:type|interface|class|enum|abstract class) ([A-Za-z0-9_]+)/gm,
    )) {
      const name = m[1] as string;
      where.set(name, [...(where.get(name) ?? []), path.relative(SRC, file)]);
    }
  }
  const twice = [...where].filter(([, files]) => files.length > 1).map(([name, files]) => `${name}: ${files.join(', ')}`);
  assert.deepEqual(twice, []);
});
