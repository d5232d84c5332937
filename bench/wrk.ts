// Runs wrk (one thread, keep-alive connections) against a port and reads its results from a Lua done() hook.
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';

export interface WrkResult {
  readonly requests: number;
  readonly seconds: number;
  readonly rps: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  /** connect/read/write/timeout errors plus non-2xx answers */
  readonly errors: number;
}

export const MODEL = 'bench-model';

const messages = [
  { role: 'system', content: 'You are a helpful assistant.' },
  { role: 'user', content: 'Write one sentence about foxes.' },
];
export const JSON_BODY = JSON.stringify({ model: MODEL, messages, max_tokens: 16 });
export const SSE_BODY = JSON.stringify({ model: MODEL, messages, max_tokens: 64, stream: true });

function luaString(s: string): string {
  return `"${s.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
}

/** Writes the Lua script for one body; returns its path. */
export function wrkScript(dir: string, name: string, body: string): string {
  const file = path.join(dir, `${name}.lua`);
  writeFileSync(
    file,
    [
      'wrk.method = "POST"',
      `wrk.body = ${luaString(body)}`,
      'wrk.headers["Content-Type"] = "application/json"',
      'done = function(summary, latency, requests)',
      '  local e = summary.errors',
      '  io.write(string.format("WRK_RESULT %d %d %d %d %d %d %d %d %d\\n", summary.requests, summary.duration,',
      '    latency:percentile(50), latency:percentile(99), e.connect, e.read, e.write, e.timeout, e.status))',
      'end',
      '',
    ].join('\n'),
  );
  return file;
}

const running = new Set<ChildProcess>();

/** Kills a wrk that is still running (the harness is being stopped). */
export function killWrk(): void {
  for (const child of running) child.kill('SIGKILL');
}

export async function runWrk(opts: {
  port: number;
  script: string;
  connections: number;
  seconds: number;
  path?: string;
}): Promise<WrkResult> {
  const args = [
    '-t1',
    `-c${opts.connections}`,
    `-d${opts.seconds}s`,
    '--timeout',
    '10s',
    '-s',
    opts.script,
    `http://127.0.0.1:${opts.port}${opts.path ?? '/v1/chat/completions'}`,
  ];
  const child = spawn('wrk', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  running.add(child);
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (out += c.toString()));
  const killer = setTimeout(() => child.kill('SIGKILL'), (opts.seconds + 30) * 1000);
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  running.delete(child);
  clearTimeout(killer);
  const line = out.split('\n').find((l) => l.startsWith('WRK_RESULT '));
  if (code !== 0 || !line) throw new Error(`wrk exited ${code}: ${out.trim().slice(-500)}`);
  const [requests, durationUs, p50, p99, connect, read, write, timeout, status] = line.split(' ').slice(1).map(Number) as number[];
  const seconds = (durationUs as number) / 1e6;
  return {
    requests: requests as number,
    seconds,
    rps: (requests as number) / seconds,
    p50Ms: (p50 as number) / 1000,
    p99Ms: (p99 as number) / 1000,
    errors: (connect as number) + (read as number) + (write as number) + (timeout as number) + (status as number),
  };
}
