// Helpers for integration tests: start the built CLI as real child processes on 127.0.0.1,
// hand out ports for listeners that must be named in advance, wait for HTTP readiness, and stop everything that was started.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { eventually } from './within.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const CLI = path.join(root, 'dist', 'cli', 'main.js');

/** Where the kernel puts port-0 listeners and the local end of outgoing connections (Linux's default: 32768-60999). */
function ephemeralRange(): { low: number; high: number } {
  try {
    const [low, high] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    if (low !== undefined && high !== undefined && low > 0 && high >= low) return { low, high };
  } catch {
    // not Linux: assume its default
  }
  return { low: 32768, high: 60999 };
}

/** Ports freePort() hands out: from 20000 up to just below the ephemeral range (or just above it, if that is too low). */
function fixedRange(): { low: number; size: number } {
  const ephemeral = ephemeralRange();
  if (ephemeral.low - 20_000 >= 1_000) return { low: 20_000, size: ephemeral.low - 20_000 };
  if (65_535 - ephemeral.high >= 1_000) return { low: ephemeral.high + 1, size: 65_535 - ephemeral.high };
  throw new Error(`no room for test ports outside the ephemeral range ${ephemeral.low}-${ephemeral.high}`);
}

let handedOut = 0;

function binds(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/**
 * A TCP port on 127.0.0.1 for a listener that must be named before it listens: Prometheus's --web.listen-address, an
 * engine that starts after the router that points at it, a router that lists its own admin URL as a peer, a simulator
 * whose port refuses connections at first (--startup-refuse-seconds). Everything else listens on port 0 and reports the
 * port it got (startRouter, startSim, the probe sidecar, in-process servers): only what cannot comes here.
 *
 * The rule that keeps these apart: a port handed out here is never in the kernel's ephemeral range
 * (/proc/sys/net/ipv4/ip_local_port_range), where every port-0 listener and every outgoing connection of every test
 * gets its port, so nothing can take it between this call and the listener that binds it later. Test files run in
 * parallel processes: each walks the range from its own starting point (spread by pid), never hands out a port twice,
 * and skips a port that does not bind (another file's listener holds it). What is left is two files' walks meeting on
 * one port between its check and its use: each file takes a handful of ports from a range of thousands, far apart.
 */
export async function freePort(): Promise<number> {
  const { low, size } = fixedRange();
  const start = (process.pid * 7_919) % size;
  for (let tries = 0; tries < 200; tries++) {
    const port = low + ((start + handedOut++) % size);
    if (await binds(port)) return port;
  }
  throw new Error(`no bindable port in ${low}-${low + size - 1} after 200 tries`);
}

export interface Started {
  readonly child: ChildProcess;
  readonly args: readonly string[];
  /** everything the process printed so far (stdout and stderr) */
  output(): string;
  /** resolves when the output contains the text; the default bound (30 s) holds a process start on a busy machine */
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
    waitForOutput(pattern, timeoutMs = 30_000) {
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
            reject(
              new Error(
                `process exited (code ${child.exitCode}, signal ${child.signalCode}) before printing ${String(pattern)}; output:\n${text}`,
              ),
            );
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
  await eventually(
    `${url} to answer${opts.status === undefined ? '' : ` ${opts.status}`}`,
    async () => {
      try {
        const res = await request(url, { headersTimeout: 2_000, bodyTimeout: 2_000 });
        await res.body.dump();
        return `status ${res.statusCode}`;
      } catch (err) {
        return (err as Error).message;
      }
    },
    (last) => last.startsWith('status ') && (opts.status === undefined || last === `status ${opts.status}`),
    opts.timeoutMs ?? 15_000,
  );
}
