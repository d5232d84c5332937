// Runs the external programs the image build needs (debootstrap, chroot, npm, tar, buildah), each bounded in time,
// and says what failed with the program's own last lines.
import { execFile } from 'node:child_process';

export class CommandError extends Error {
  constructor(
    message: string,
    readonly stdout: string,
    readonly stderr: string,
  ) {
    super(message);
  }
}

export interface RunOptions {
  readonly cwd?: string;
  readonly env?: NodeJS.ProcessEnv;
  /** killed (SIGKILL) after this long; default 10 minutes */
  readonly timeoutMs?: number;
  readonly input?: string;
}

/** PATH with /usr/sbin and /sbin, where Debian puts debootstrap, chroot and ldconfig (a root shell may lack them) */
export function withSbin(PATH = ''): string {
  const dirs = PATH.split(':').filter(Boolean);
  return [...dirs, ...['/usr/sbin', '/sbin'].filter((d) => !dirs.includes(d))].join(':');
}

/** Runs `command args`; resolves to its standard output, rejects with its last lines of error output. */
export function run(command: string, args: readonly string[], opts: RunOptions = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      command,
      [...args],
      {
        cwd: opts.cwd,
        env: { ...(opts.env ?? process.env), PATH: withSbin((opts.env ?? process.env).PATH) },
        timeout: opts.timeoutMs ?? 600_000,
        killSignal: 'SIGKILL',
        maxBuffer: 256 * 1024 * 1024,
        encoding: 'utf8',
      },
      (err, stdout, stderr) => {
        if (!err) return resolve(stdout);
        const tail = `${stderr}\n${stdout}`.trim().split('\n').slice(-15).join('\n');
        const why = err.killed ? `killed after ${opts.timeoutMs ?? 600_000} ms` : `exit ${String(err.code)}`;
        reject(new CommandError(`${command} ${args.join(' ')}: ${why}\n${tail}`, stdout, stderr));
      },
    );
    if (opts.input !== undefined) child.stdin?.end(opts.input);
  });
}

/** Logs one step of the build to stderr with the time it took. */
export async function step<T>(what: string, fn: () => Promise<T>): Promise<T> {
  const started = Date.now();
  process.stderr.write(`image: ${what} ...\n`);
  const result = await fn();
  process.stderr.write(`image: ${what}: done in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
  return result;
}
