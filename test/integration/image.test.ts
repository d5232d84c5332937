// The image (npm run image, tools/image): built as an OCI archive (its cache reused), at most 150 MB, loaded into a
// private buildah store (vfs, temporary root) and run with `buildah run --isolation chroot --network host` on a
// read-only root (every directory of the image bound read-only; only its /tmp volume is writable): its entrypoint's
// `serve` in front of a simulator on the host answers /ready 200 and routes a chat, as user 65532, and stops cleanly on
// SIGTERM; `sim --help`, `probe --help`, `lint` and the native add-on (zeromq) work inside. Needs root, buildah and
// debootstrap.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { BuildahStore } from '../../tools/image/buildah.js';
import { run } from '../../tools/image/run.js';
import { startProcess, stopAll, waitForHttp } from '../support/process.js';
import { call, chat, FAST_PROBES, startSim } from '../support/router.js';
import { requireTool, toolsRequired } from '../support/tools.js';
import { until, within } from '../support/within.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const VERSION = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
const MAX_BYTES = 150 * 1000 * 1000;

/**
 * Runs "$@" in a mount namespace of its own where every directory of the container's root ($1) but tmp, run, dev, proc
 * and sys is bound read-only: what a read-only root file system is to the process (buildah run has no --read-only; the
 * root itself stays writable for buildah's own mount points, and only root may write there). The binds go with the
 * namespace when the command exits.
 */
const READ_ONLY = `root=$1; shift
for d in "$root"/*; do
  case "\${d##*/}" in tmp|run|dev|proc|sys) continue ;; esac
  if [ -d "$d" ] && [ ! -L "$d" ]; then mount --bind "$d" "$d"; mount -o remount,bind,ro "$d" "$d"; fi
done
exec "$@"`;

function skipReason(): string | false {
  const tools = requireTool('buildah', 'debootstrap');
  if (tools) return tools;
  if (process.getuid?.() === 0) return false;
  const why = 'the image build runs as root (debootstrap, buildah with chroot isolation)';
  // under CI (TEST_TOOLS=required) nothing skips: a run that cannot build the image fails
  if (toolsRequired()) throw new Error(`${why}; this run is not root`);
  return why;
}

interface ImageConfig {
  readonly User?: string;
  readonly Entrypoint?: string[];
  readonly Cmd?: string[];
  readonly Env?: string[];
  readonly Labels?: Record<string, string>;
}

describe('the image: built, loaded into buildah and run on a read-only root', { skip: skipReason(), timeout: 1_500_000 }, () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'llm-router-image-test-'));
  const archive = path.join(dir, 'llm-router.tar');
  let store: BuildahStore | undefined;
  const container = 'llm-router-image-test';
  let rootfs = '';
  let config: ImageConfig = {};
  /** the router's process in the container (chroot isolation: a process of this machine's PID namespace) */
  let routerPid = 0;

  /** the command line that runs `args` in the container on a read-only root, with the host's network */
  function inImage(args: readonly string[], volumes: readonly string[] = []): { argv: string[]; env: Record<string, string> } {
    const cmd = (store as BuildahStore).command([
      'run',
      '--isolation',
      'chroot',
      '--network',
      'host',
      ...volumes.flatMap((v) => ['--volume', v]),
      container,
      '--',
      ...args,
    ]);
    return {
      argv: ['unshare', '--mount', '--propagation', 'private', '--', 'sh', '-ec', READ_ONLY, 'read-only', rootfs, ...cmd.argv],
      env: { ...cmd.env },
    };
  }

  async function runInImage(args: readonly string[], volumes: readonly string[] = []): Promise<string> {
    const { argv, env } = inImage(args, volumes);
    return run(argv[0] as string, argv.slice(1), { env: { ...process.env, ...env }, timeoutMs: 60_000 });
  }

  before(
    async () => {
      // the cache (~/.cache/llm-router-image) makes this a copy and a pack; the first build on a machine also makes the
      // Debian base (debootstrap) and downloads Node.js and the dependencies from npm
      await run(process.execPath, ['--import', 'tsx', 'tools/image/build.ts', '--output', archive], { cwd: ROOT, timeoutMs: 1_200_000 });
      store = new BuildahStore('llm-router-image-test-store-');
      await store.from(`oci-archive:${archive}`, container);
      rootfs = await store.buildah(['mount', container]);
      config = (JSON.parse(await store.buildah(['inspect', '--type', 'container', container])) as { OCIv1: { config: ImageConfig } }).OCIv1
        .config;
    },
    { timeout: 1_300_000 },
  );

  after(async () => {
    await stopAll();
    // a router that outlived a buildah killed by stopAll (SIGKILL reaches buildah, not the container's process)
    if (routerPid > 0 && existsSync(`/proc/${routerPid}`)) process.kill(routerPid, 'SIGKILL');
    await store?.destroy();
    rmSync(dir, { recursive: true, force: true });
  });

  test('the archive is at most 150 MB', () => {
    const bytes = statSync(archive).size;
    assert.ok(bytes <= MAX_BYTES, `${(bytes / 1e6).toFixed(1)} MB`);
  });

  test("it is named as the chart's default image: llm-router:<package version>", async () => {
    const index = JSON.parse(await run('tar', ['-xOf', archive, 'index.json'])) as {
      manifests: { annotations?: Record<string, string> }[];
    };
    assert.equal(index.manifests[0]?.annotations?.['org.opencontainers.image.ref.name'], `llm-router:${VERSION}`);
  });

  test('it runs as 65532 with llm-router as its entrypoint (serve by default), labelled with its version', () => {
    assert.equal(config.User, '65532:65532');
    assert.deepEqual(config.Entrypoint, ['/usr/local/bin/llm-router']);
    assert.deepEqual(config.Cmd, ['serve']);
    assert.equal(config.Labels?.['org.opencontainers.image.version'], VERSION);
    assert.equal(config.Labels?.['org.opencontainers.image.title'], 'llm-router');
    assert.ok(config.Env?.includes('HF_HOME=/tmp/huggingface'), String(config.Env));
    // nothing of the build's tools: no package manager, no npm
    for (const gone of ['usr/bin/apt-get', 'usr/bin/dpkg', 'usr/bin/perl', 'usr/local/bin/npm', 'usr/share/man'])
      assert.equal(existsSync(path.join(rootfs, gone)), false, gone);
  });

  test('serve, in front of a simulator on the host: /ready 200, a routed chat, user 65532, a clean stop on SIGTERM', {
    timeout: 120_000,
  }, async () => {
    const sim = await startSim(['--model', 'image-model']);
    const { argv, env } = inImage([
      ...(config.Entrypoint ?? []),
      'serve',
      '--host',
      '127.0.0.1',
      '--port',
      '0',
      '--log-format',
      'json',
      '--drain-seconds',
      '0',
      '--static-backends',
      sim.url,
      '--static-models',
      'image-model',
      ...FAST_PROBES,
    ]);
    const serve = startProcess(argv[0] as string, argv.slice(1), env);
    try {
      await serve.waitForOutput('llm-router listening', 60_000);
      const listening =
        serve
          .output()
          .split('\n')
          .find((l) => l.includes('llm-router listening')) ?? '';
      const url = /"url":"(http:\/\/127\.0\.0\.1:\d+)"/.exec(listening)?.[1];
      routerPid = Number(/"pid":(\d+)/.exec(listening)?.[1]);
      assert.ok(url && routerPid > 0, serve.output());
      // chroot isolation shares the host's PID namespace: the router's process is visible here
      assert.match(readFileSync(`/proc/${routerPid}/status`, 'utf8'), /^Uid:\s+65532\s/m);

      await waitForHttp(`${url}/ready`, { status: 200, timeoutMs: 30_000 });
      const answer = await call(`${url}/v1/chat/completions`, { body: chat('image-model') });
      assert.equal(answer.status, 200, answer.text);
      const body = answer.json<{ model: string; choices: { message: { content: string } }[] }>();
      assert.equal(body.model, 'image-model');
      assert.ok((body.choices[0]?.message.content ?? '').length > 0, answer.text);
      assert.equal(answer.headers['x-sim-engine'], `sim-${sim.port}`);

      // the launcher execs node, so the router is the container's process: SIGTERM reaches it and it stops cleanly
      assert.match(readFileSync(`/proc/${routerPid}/cmdline`, 'utf8'), /^\/usr\/local\/bin\/node\0\/app\/dist\/cli\/main\.js\0serve\0/);
      const exited = once(serve.child, 'exit');
      process.kill(routerPid, 'SIGTERM');
      await serve.waitForOutput('shutting down', 20_000);
      const [code] = await within(30_000, 'the router in the container to stop on SIGTERM', exited);
      assert.equal(code, 0, serve.output());
    } finally {
      // (after a failure: SIGTERM to buildah, which ends the container's process)
      await serve.stop();
      await sim.stop();
    }
    const pid = routerPid;
    await until('the router in the container to exit', () => !existsSync(`/proc/${pid}`), 20_000, 100);
  });

  test('sim --help, probe --help, lint and the native add-on (zeromq) work inside', { timeout: 180_000 }, async () => {
    const entry = config.Entrypoint ?? [];
    assert.match(await runInImage([...entry, 'sim', '--help']), /usage: llm-router sim/);
    assert.match(await runInImage([...entry, 'probe', '--help']), /usage: llm-router probe/);
    const lint = await runInImage([...entry, 'lint', '/fixtures/good.yaml'], [`${path.join(ROOT, 'test/fixtures/lint')}:/fixtures:ro`]);
    assert.match(lint, /0 errors, 0 warnings/);
    assert.match(await runInImage(['node', '-e', "require('zeromq'); console.log('zeromq loaded')"]), /zeromq loaded/);
  });

  test('the root is read-only to the process: only /tmp (a volume of the image) is writable', { timeout: 60_000 }, async () => {
    const dirs = ['/app', '/home/nonroot', '/etc', '/usr/local/bin', '/var/tmp', '/tmp'];
    const script = `for (const d of ${JSON.stringify(dirs)}) { try { require('fs').writeFileSync(d + '/w', 'x'); console.log(d, 'ok'); } catch (e) { console.log(d, e.code); } }`;
    const lines = (await runInImage(['node', '-e', script])).trim().split('\n');
    assert.deepEqual(lines, ['/app EROFS', '/home/nonroot EROFS', '/etc EROFS', '/usr/local/bin EROFS', '/var/tmp EROFS', '/tmp ok']);
  });
});
