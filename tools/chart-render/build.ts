// Builds the Go chart renderer once per source version and returns its path. There is no Go module download
// here: the build runs in GOPATH mode against the sources Debian packages under /usr/share/gocode
// (golang-github-masterminds-sprig-dev, golang-gopkg-yaml.v2-dev; .ci/run installs them with golang-go).
// The binary is cached in .cache/chart-render/<hash>/, the hash covering the Go sources and `go version`.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const SOURCE_DIR = path.dirname(fileURLToPath(import.meta.url));
export const ROOT = path.resolve(SOURCE_DIR, '..', '..');
const CACHE_DIR = path.join(ROOT, '.cache', 'chart-render');
/** Debian's GOPATH of packaged Go sources; CHART_RENDER_GOPATH points elsewhere (a GOPATH with the same packages) */
const PACKAGED_GOPATH = process.env.CHART_RENDER_GOPATH ?? '/usr/share/gocode';
const REQUIRED_SOURCES = ['github.com/Masterminds/sprig', 'gopkg.in/yaml.v2'];
const INSTALL_HINT = 'apt-get install -y golang-go golang-github-masterminds-sprig-dev golang-gopkg-yaml.v2-dev';
/** a cold build compiles Sprig and its dependencies; generous for a loaded 2-core machine */
const BUILD_TIMEOUT_MS = 300_000;
const BINARY = 'chart-render';

export class ChartRenderBuildError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ChartRenderBuildError';
  }
}

function goSources(): string[] {
  return readdirSync(SOURCE_DIR)
    .filter((f) => f.endsWith('.go') || f === 'go.mod')
    .sort();
}

function goVersion(): string {
  try {
    return execFileSync('go', ['version'], { encoding: 'utf8', timeout: 30_000 }).trim();
  } catch {
    throw new ChartRenderBuildError(`the Go toolchain is not on PATH; install it and the packaged sources: ${INSTALL_HINT}`);
  }
}

function sourceHash(version: string): string {
  const hash = createHash('sha256').update(version).update('\0').update(PACKAGED_GOPATH);
  for (const f of goSources())
    hash
      .update('\0')
      .update(f)
      .update('\0')
      .update(readFileSync(path.join(SOURCE_DIR, f)));
  return hash.digest('hex').slice(0, 16);
}

let built: string | undefined;

/** The path of the renderer binary for the current sources, built (synchronously) when not cached. */
export function chartRenderBinary(): string {
  if (built) return built;
  const version = goVersion();
  const dir = path.join(CACHE_DIR, sourceHash(version));
  const binary = path.join(dir, BINARY);
  if (!existsSync(binary)) build(dir);
  built = binary;
  return binary;
}

function build(dir: string): void {
  const missing = REQUIRED_SOURCES.filter((p) => !existsSync(path.join(PACKAGED_GOPATH, 'src', p)));
  if (missing.length > 0)
    throw new ChartRenderBuildError(`${missing.join(', ')} not found under ${PACKAGED_GOPATH}/src; install: ${INSTALL_HINT}`);
  // GOPATH mode resolves sprig/v3 to Debian's unversioned directory only for code inside a GOPATH with a
  // go.mod, so the sources are copied into a private GOPATH next to the binary
  const staging = `${dir}.tmp-${process.pid}-${Date.now()}`;
  const pkg = path.join(staging, 'gopath', 'src', BINARY);
  mkdirSync(pkg, { recursive: true });
  for (const f of goSources()) copyFileSync(path.join(SOURCE_DIR, f), path.join(pkg, f));
  try {
    execFileSync('go', ['build', '-trimpath', '-o', path.join(staging, BINARY), '.'], {
      cwd: pkg,
      timeout: BUILD_TIMEOUT_MS,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        ...process.env,
        GO111MODULE: 'off',
        GOPATH: `${path.join(staging, 'gopath')}${path.delimiter}${PACKAGED_GOPATH}`,
        GOFLAGS: '',
        // Go's own cache (~/.cache/go-build) outlives clones; without a home, one in .cache/
        ...(process.env.GOCACHE || process.env.HOME || process.env.XDG_CACHE_HOME
          ? {}
          : { GOCACHE: path.join(ROOT, '.cache', 'go-build') }),
      },
    });
  } catch (err) {
    rmSync(staging, { recursive: true, force: true });
    const stderr = (err as { stderr?: Buffer }).stderr?.toString().trim();
    throw new ChartRenderBuildError(`go build of tools/chart-render failed: ${stderr || (err as Error).message}`);
  }
  rmSync(path.join(staging, 'gopath'), { recursive: true, force: true });
  try {
    // a concurrent build of the same sources may have won; its binary is the same
    renameSync(staging, dir);
  } catch (err) {
    rmSync(staging, { recursive: true, force: true });
    if (!existsSync(path.join(dir, BINARY))) throw err;
  }
  pruneOtherBuilds(path.basename(dir));
}

/** Binaries of earlier sources are of no further use; each is several MB. */
function pruneOtherBuilds(keep: string): void {
  for (const entry of readdirSync(CACHE_DIR)) {
    if (entry !== keep && !entry.includes('.tmp-')) rmSync(path.join(CACHE_DIR, entry), { recursive: true, force: true });
  }
}
