// Helpers for integration tests: start the built CLI as real child processes on 127.0.0.1,
// find free ports at run time, wait for HTTP readiness, and stop everything that was started.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const CLI = path.join(root, 'dist', 'cli', 'main.js');

/** A free TCP port on 127.0.0.1, found by binding port 0 and releasing it. */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  const port = address.port;
  server.close();
  await once(server, 'close');
  return port;
}

export interface Started {
  readonly child: ChildProcess;
  readonly args: readonly string[];
  /** everything the process printed so far (stdout and stderr) */
  output(): string;
  /** resolves when the output contains the text */
  waitForOutput(text: string | RegExp, timeoutMs?: number): Promise<void>;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

const running = new Set<Started>();

/** Runs `node dist/cli/main.js ...args`. The process is killed by stopAll() if the test forgets. */
export function startCli(args: readonly string[], env: Record<string, string> = {}): Started {
  return startProcess(process.execPath, [CLI, ...args], env);
}

/** Runs any program (prometheus, nginx, ...) the same way: its output collected, stopped by stopAll(). */
export function startProcess(command: string, args: readonly string[], env: Record<string, string> = {}): Started {
  const child = spawn(command, args, {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let text = '';
  const waiters = new Set<() => void>();
  const onData = (chunk: Buffer): void => {
    text += chunk.toString('utf8');
    for (const w of waiters) w();
  };
  child.stdout?.on('data', onData);
  child.stderr?.on('data', onData);
  const exited = once(child, 'exit').then(([code]) => code as number | null);
  const started: Started = {
    child,
    args,
    output: () => text,
    waitForOutput(pattern, timeoutMs = 15_000) {
      const matches = (): boolean => (typeof pattern === 'string' ? text.includes(pattern) : pattern.test(text));
      if (matches()) return Promise.resolve();
      return new Promise<void>((resolve, reject) => {
        const check = (): void => {
          if (matches()) {
            cleanup();
            resolve();
          }
        };
        const timer = setTimeout(() => {
          cleanup();
          reject(new Error(`timed out waiting for ${String(pattern)}; output so far:\n${text}`));
        }, timeoutMs);
        const cleanup = (): void => {
          clearTimeout(timer);
          waiters.delete(check);
        };
        waiters.add(check);
        void exited.then(() => {
          if (!matches()) {
            cleanup();
            reject(new Error(`process exited before printing ${String(pattern)}; output:\n${text}`));
          }
        });
      });
    },
    async stop(signal = 'SIGTERM') {
      running.delete(started);
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      child.kill(signal);
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
  running.add(started);
  return started;
}

/** Stops every process started through startCli that is still running. */
export async function stopAll(): Promise<void> {
  await Promise.all([...running].map((p) => p.stop('SIGKILL')));
}

/** Polls a URL until it answers with the expected status (any status if omitted). */
export async function waitForHttp(url: string, opts: { status?: number; timeoutMs?: number } = {}): Promise<void> {
  const deadline = Date.now() + (opts.timeoutMs ?? 15_000);
  let last = 'no answer';
  while (Date.now() < deadline) {
    try {
      const res = await request(url, { headersTimeout: 2_000, bodyTimeout: 2_000 });
      await res.body.dump();
      if (opts.status === undefined || res.statusCode === opts.status) return;
      last = `status ${res.statusCode}`;
    } catch (err) {
      last = (err as Error).message;
    }
    await sleep(50);
  }
  throw new Error(`timed out waiting for ${url} (${last})`);
}
