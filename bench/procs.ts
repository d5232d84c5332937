// Child processes of the benchmark: started on loopback ports, sampled through /proc, and always stopped,
// on success, on error and on Ctrl-C.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { openSync, closeSync, readFileSync, readdirSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

export interface Proc {
  readonly name: string;
  readonly child: ChildProcess;
  readonly pid: number;
  /** resolves with the exit code once the process has exited */
  readonly exited: Promise<number | null>;
  stop(): Promise<void>;
}

const running = new Set<Proc>();

/** Starts a process whose stdout and stderr go to `logFile`; it is stopped by stopAll() at the latest. */
export function startProc(
  name: string,
  command: string,
  args: readonly string[],
  logFile: string,
  stopSignal: NodeJS.Signals = 'SIGTERM',
  env: Readonly<Record<string, string>> = {},
): Proc {
  const fd = openSync(logFile, 'a');
  const child = spawn(command, args, { stdio: ['ignore', fd, fd], env: { ...process.env, ...env } });
  closeSync(fd);
  if (child.pid === undefined) throw new Error(`${name}: could not start ${command}`);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const proc: Proc = {
    name,
    child,
    pid: child.pid,
    exited,
    async stop() {
      running.delete(proc);
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill(stopSignal);
      const done = await Promise.race([exited.then(() => true), sleep(5_000).then(() => false)]);
      if (!done) {
        child.kill('SIGKILL');
        await exited;
      }
    },
  };
  running.add(proc);
  child.once('exit', () => running.delete(proc));
  return proc;
}

/** `llm-router serve` of the build `cli` on 127.0.0.1:`port`, logging warnings only and with no drain pause; its log in `dir`. */
export function startServe(cli: string, dir: string, name: string, port: number, args: readonly string[]): Proc {
  const common = ['serve', '--host', '127.0.0.1', '--port', String(port), '--log-level', 'warn', '--drain-seconds', '0'];
  return startProc(name, process.execPath, [cli, ...common, ...args], path.join(dir, `${name}.log`));
}

export async function stopAll(): Promise<void> {
  await Promise.all([...running].map((p) => p.stop()));
}

/** Last resort when the harness itself is exiting: no child may outlive it. */
export function killAllNow(): void {
  for (const p of running) if (p.child.exitCode === null) p.child.kill('SIGKILL');
}

export async function freePort(): Promise<number> {
  const server = net.createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address() as net.AddressInfo;
  server.close();
  await once(server, 'close');
  return address.port;
}

/** One request on a fresh connection (so that every cluster worker gets asked in turn). */
export function fetchOnce(
  port: number,
  method: string,
  path: string,
  body?: string,
  timeoutMs = 2_000,
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method,
        path,
        agent: false,
        timeout: timeoutMs,
        headers: body ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } : {},
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end(body);
  });
}

export interface TimedAnswer {
  readonly status: number;
  readonly text: string;
  /** ms since epoch when the response head, and its first body byte, arrived */
  readonly headAt: number;
  readonly firstDataAt: number;
  /** ms since epoch when each SSE event's end arrived (events that came in one chunk share its time) */
  readonly eventsAt: readonly number[];
}

/** A POST of a JSON body to /v1/chat/completions, with when its head and first body byte arrived. */
export function postTimed(port: number, body: string, opts: { agent?: http.Agent | false; timeoutMs?: number } = {}): Promise<TimedAnswer> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/v1/chat/completions',
        agent: opts.agent ?? false,
        timeout: opts.timeoutMs ?? 120_000,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        const headAt = Date.now();
        let firstDataAt = 0;
        let text = '';
        const eventsAt: number[] = [];
        let scanned = 0; // text before this holds no unseen event end
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          const at = Date.now();
          if (firstDataAt === 0) firstDataAt = at;
          text += c;
          // an event ends with a blank line, which may straddle two chunks
          for (let end = text.indexOf('\n\n', scanned); end >= 0; end = text.indexOf('\n\n', scanned)) {
            eventsAt.push(at);
            scanned = end + 2;
          }
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text, headAt, firstDataAt, eventsAt }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end(body);
  });
}

/** Polls until `check` passes `times` times in a row, failing after `timeoutMs` or when `proc` exits. */
export async function waitUntil(
  what: string,
  check: () => Promise<boolean>,
  opts: { timeoutMs?: number; times?: number; proc?: Proc } = {},
): Promise<void> {
  const deadline = Date.now() + (opts.timeoutMs ?? 20_000);
  let streak = 0;
  let exited = false;
  opts.proc?.exited.then(() => (exited = true));
  while (Date.now() < deadline) {
    if (exited) throw new Error(`${what}: ${opts.proc?.name} exited`);
    const ok = await check().catch(() => false);
    streak = ok ? streak + 1 : 0;
    if (streak >= (opts.times ?? 1)) return;
    if (!ok) await sleep(100);
  }
  throw new Error(`${what}: not ready after ${opts.timeoutMs ?? 20_000} ms`);
}

const CLK_TCK = 100;
const PAGE_KB = 4;

/** The process and all its descendants (cluster workers, nginx workers). */
export function processTree(pid: number): number[] {
  const parents = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'latin1');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      const list = parents.get(ppid) ?? [];
      list.push(Number(entry));
      parents.set(ppid, list);
    } catch {
      // the process ended while we looked
    }
  }
  const out = [pid];
  for (let i = 0; i < out.length; i++) out.push(...(parents.get(out[i] as number) ?? []));
  return out;
}

export interface Usage {
  /** user + system CPU seconds */
  readonly cpuSeconds: number;
  readonly rssBytes: number;
}

/** CPU time and resident memory summed over a process tree. */
export function usageOf(pid: number): Usage {
  let ticks = 0;
  let pages = 0;
  for (const p of processTree(pid)) {
    try {
      const stat = readFileSync(`/proc/${p}/stat`, 'latin1').slice(0);
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(fields[11]) + Number(fields[12]);
      pages += Number(readFileSync(`/proc/${p}/statm`, 'latin1').split(' ')[1]);
    } catch {
      // gone
    }
  }
  return { cpuSeconds: ticks / CLK_TCK, rssBytes: pages * PAGE_KB * 1024 };
}
