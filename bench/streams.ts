// Many concurrent SSE streams through the router, each on its own raw TCP connection: every stream must complete
// (HTTP 200, data: [DONE], the chunked terminator) and none may stall.
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

export interface StreamsResult {
  readonly streams: number;
  readonly completed: number;
  readonly failed: number;
  /** most streams open at one time (connected and not finished) */
  readonly peakOpen: number;
  /** longest silence inside one stream, and how many streams had a silence above the stall threshold */
  readonly maxGapMs: number;
  readonly stalls: number;
  readonly stallThresholdMs: number;
  readonly seconds: number;
  /** connect to first byte, and first byte to the end, over the completed streams */
  readonly firstByteMs: { readonly p50: number; readonly max: number };
  readonly streamMs: { readonly p50: number; readonly max: number };
  readonly firstErrors: readonly string[];
  /** connections the kernel dropped because an accept queue (router's or engine's) was full, during the run */
  readonly listenOverflows: number | undefined;
}

/** TcpExt ListenOverflows of the whole machine (other processes count too). */
export function listenOverflows(): number | undefined {
  try {
    const lines = readFileSync('/proc/net/netstat', 'latin1')
      .split('\n')
      .filter((l) => l.startsWith('TcpExt:'));
    const names = (lines[0] ?? '').split(' ');
    const values = (lines[1] ?? '').split(' ');
    const i = names.indexOf('ListenOverflows');
    return i > 0 ? Number(values[i]) : undefined;
  } catch {
    return undefined;
  }
}

function spread(values: number[]): { p50: number; max: number } {
  values.sort((a, b) => a - b);
  return { p50: values[Math.floor(values.length / 2)] ?? NaN, max: values[values.length - 1] ?? NaN };
}

const DONE = Buffer.from('data: [DONE]');
const TERMINATOR = Buffer.from('0\r\n\r\n');

export async function runStreams(opts: {
  port: number;
  streams: number;
  body: string;
  /** connections opened per batch, one batch every `rampEveryMs` (a burst of thousands would overflow the accept queue) */
  rampBatch?: number;
  rampEveryMs?: number;
  stallThresholdMs: number;
  timeoutMs: number;
}): Promise<StreamsResult> {
  const request = Buffer.from(
    `POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:${opts.port}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(opts.body)}\r\nconnection: close\r\n\r\n${opts.body}`,
  );
  const started = performance.now();
  const overflowsBefore = listenOverflows();
  let open = 0;
  let peakOpen = 0;
  let completed = 0;
  let _failed = 0;
  let maxGapMs = 0;
  let stalls = 0;
  const errors: string[] = [];
  const firstByte: number[] = [];
  const duration: number[] = [];
  const sockets = new Set<net.Socket>();
  const finished: Promise<void>[] = [];

  const one = (): Promise<void> =>
    new Promise<void>((resolve) => {
      const opened = performance.now();
      let first = 0;
      let tail = Buffer.alloc(0);
      let status = '';
      let sawDone = false;
      let last = 0;
      let gap = 0;
      let ended = false;
      const end = (ok: boolean, why?: string): void => {
        if (ended) return;
        ended = true;
        if (last > 0) open--;
        sockets.delete(socket);
        if (gap > maxGapMs) maxGapMs = gap;
        if (gap > opts.stallThresholdMs) stalls++;
        if (ok) {
          completed++;
          firstByte.push(first - opened);
          duration.push(last - first);
        } else {
          _failed++;
          if (errors.length < 5) errors.push(why ?? 'unknown');
        }
        socket.destroy();
        resolve();
      };
      const socket = net.connect({ host: '127.0.0.1', port: opts.port, noDelay: true }, () => socket.write(request));
      sockets.add(socket);
      socket.on('data', (d: Buffer) => {
        const now = performance.now();
        if (last === 0) {
          first = now;
          open++;
          if (open > peakOpen) peakOpen = open;
          status = d.toString('latin1', 0, Math.min(d.length, 12));
        } else if (now - last > gap) gap = now - last;
        last = now;
        // keep a short tail so that markers split across reads are still found
        const view = tail.length ? Buffer.concat([tail, d]) : d;
        if (!sawDone && view.indexOf(DONE) >= 0) sawDone = true;
        tail = Buffer.from(view.subarray(Math.max(0, view.length - 16)));
        if (tail.length >= TERMINATOR.length && tail.subarray(tail.length - TERMINATOR.length).equals(TERMINATOR)) {
          if (!status.startsWith('HTTP/1.1 200')) end(false, `status ${status}`);
          else end(sawDone, sawDone ? undefined : 'stream ended without data: [DONE]');
        }
      });
      socket.on('error', (err) => end(false, err.message));
      socket.on('close', () => end(false, last === 0 ? 'closed before any byte' : 'closed before the end of the stream'));
    });

  const batch = opts.rampBatch ?? 10;
  const deadline = started + opts.timeoutMs;
  const timer = setTimeout(() => {
    for (const s of sockets) s.destroy(new Error('benchmark time limit reached'));
  }, opts.timeoutMs);
  for (let i = 0; i < opts.streams && performance.now() < deadline; i += batch) {
    for (let j = i; j < Math.min(i + batch, opts.streams); j++) finished.push(one());
    await sleep(opts.rampEveryMs ?? 20);
  }
  await Promise.all(finished);
  clearTimeout(timer);
  return {
    streams: opts.streams,
    completed,
    failed: opts.streams - completed,
    peakOpen,
    maxGapMs,
    stalls,
    stallThresholdMs: opts.stallThresholdMs,
    seconds: (performance.now() - started) / 1000,
    firstByteMs: spread(firstByte),
    streamMs: spread(duration),
    firstErrors: errors,
    listenOverflows: overflowsBefore === undefined ? undefined : (listenOverflows() ?? overflowsBefore) - overflowsBefore,
  };
}
