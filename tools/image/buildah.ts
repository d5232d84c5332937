// Debian's buildah with a private store: the vfs driver, its root and run root under a temporary directory, chroot
// isolation and a signature policy of its own, so nothing global (a daemon, /var/lib/containers, a registry login) is
// used or left behind. The image build and its test both use it.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type RunOptions, run } from './run.js';

export class BuildahStore {
  readonly dir: string;
  private readonly policy: string;
  private readonly global: readonly string[];

  /** A new empty store under a temporary directory (removed by destroy()). */
  constructor(prefix = 'llm-router-buildah-') {
    this.dir = mkdtempSync(path.join(tmpdir(), prefix));
    mkdirSync(path.join(this.dir, 'root'));
    mkdirSync(path.join(this.dir, 'runroot'));
    this.policy = path.join(this.dir, 'policy.json');
    // images here are built or loaded from a local archive, never pulled: there is no signature to check
    writeFileSync(this.policy, JSON.stringify({ default: [{ type: 'insecureAcceptAnything' }] }));
    this.global = ['--root', path.join(this.dir, 'root'), '--runroot', path.join(this.dir, 'runroot'), '--storage-driver', 'vfs'];
  }

  /** The command line of `buildah <args>` on this store, and its environment (for a caller that spawns it itself). */
  command(args: readonly string[]): { readonly argv: readonly string[]; readonly env: Readonly<Record<string, string>> } {
    return { argv: ['buildah', ...this.global, ...args], env: { BUILDAH_ISOLATION: 'chroot' } };
  }

  /** `buildah <args>` on this store; resolves to its standard output, trimmed. */
  async buildah(args: readonly string[], opts: RunOptions = {}): Promise<string> {
    const { argv, env } = this.command(args);
    return (await run(argv[0] as string, argv.slice(1), { ...opts, env: { ...process.env, ...env, ...opts.env } })).trim();
  }

  /** A working container from an image reference (`scratch`, a local name or `oci-archive:FILE`); its name. */
  from(image: string, name: string): Promise<string> {
    return this.buildah(['from', '--quiet', '--signature-policy', this.policy, '--name', name, image]);
  }

  /** Writes `image` to an OCI archive (gzip layers), named `ref` inside it. */
  async pushArchive(image: string, file: string, ref: string): Promise<void> {
    rmSync(file, { force: true });
    await this.buildah(['push', '--quiet', '--signature-policy', this.policy, '--format', 'oci', image, `oci-archive:${file}:${ref}`]);
  }

  /** Removes every working container, then the store's directory. */
  async destroy(): Promise<void> {
    try {
      await this.buildah(['rm', '--all'], { timeoutMs: 120_000 });
    } finally {
      rmSync(this.dir, { recursive: true, force: true });
    }
  }
}
