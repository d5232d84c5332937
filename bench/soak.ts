// Soak (issue 9): many requests, streaming and not, through one router while engine faults are injected, and
// every request accounted for: a response or a clean error (an HTTP error answer, or an SSE error event), never
// a lost one (a reset, a cut body without an error event, or no answer in time). Prints errors by kind, the streams
// that arrived intact (the content of one uninterrupted generation, one [DONE], no error event: --migration-limit
// continues streams cut mid-way) and the router's RSS before and after.
//   node --import tsx bench/soak.ts [--requests N] [--concurrency C] [--migration-limit N]    (npm run bench -- --only soak)
import { mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { Pool } from 'undici';
import { freePort, startProc, stopAll, waitUntil, fetchOnce, type Proc } from './procs.js';
import { fillerText } from '../src/tools/sim/tokens.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const CLI = path.join(root, 'dist', 'cli', 'main.js');
const MODEL = 'soak-model';

export interface SoakOptions {
  readonly requests: number;
  readonly concurrency: number;
  /** share of streaming requests, 0..1 */
  readonly streamShare: number;
  /** each request's own deadline; past it the request counts as lost */
  readonly requestTimeoutMs: number;
  /** the router's --migration-limit (0: off) */
  readonly migrationLimit: number;
}

export interface SoakResult {
  readonly requests: number;
  readonly seconds: number;
  readonly outcomes: Record<string, number>;
  readonly lost: number;
  readonly faults: Record<string, number>;
  readonly rssBeforeMb: number;
  readonly rssAfterMb: number;
  readonly rssPeakMb: number;
  readonly migrationLimit: number;
  /** streaming requests, and those that arrived intact (streamIntact) */
  readonly streams: number;
  readonly intact: number;
}

/** The soak's answer: max_tokens 8 of simulators that generate their filler text. */
const TOKENS = 8;

/**
 * A stream that arrived intact: the content of one uninterrupted generation (`expected`), one finish_reason, one
 * `[DONE]`, no error event, one id in every chunk.
 */
export function streamIntact(body: string, expected: string): boolean {
  const datas = body
    .split('\n\n')
    .filter((e) => e.startsWith('data: '))
    .map((e) => e.slice(6));
  if (datas.filter((d) => d === '[DONE]').length !== 1 || datas.at(-1) !== '[DONE]') return false;
  let content = '';
  let finishes = 0;
  const ids = new Set<unknown>();
  for (const d of datas.slice(0, -1)) {
    let c: { id?: unknown; error?: unknown; choices?: { delta?: { content?: string }; finish_reason?: string | null }[] };
    try {
      c = JSON.parse(d) as typeof c;
    } catch {
      return false;
    }
    if (c.error !== undefined) return false;
    ids.add(c.id);
    for (const choice of c.choices ?? []) {
      content += choice.delta?.content ?? '';
      if (choice.finish_reason !== null && choice.finish_reason !== undefined) finishes++;
    }
  }
  return content === expected && finishes === 1 && ids.size === 1;
}

function rssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'latin1');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
}

/** How one request ended; anything starting with "lost" breaks the promise that nothing is lost. */
export function classify(status: number, body: string, stream: boolean): string {
  if (status === 200) {
    if (!stream) return 'ok';
    if (body.includes('data: [DONE]')) return 'ok-stream';
    if (/data: \{"error"/.test(body)) return 'stream-error-event';
    return 'lost: stream cut without an error event';
  }
  let code = '';
  try {
    code = (JSON.parse(body) as { error?: { code?: unknown } }).error?.code as string;
  } catch {
    return `lost: ${status} without an error body`;
  }
  return `http-${status}${code !== undefined && code !== null ? ` ${String(code)}` : ''}`;
}

export async function runSoak(opts: SoakOptions, log: (line: string) => void = (l) => process.stderr.write(l + '\n')): Promise<SoakResult> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'llm-router-soak-'));
  const sims: { url: string; proc: Proc }[] = [];
  try {
    for (let i = 0; i < 3; i++) {
      const port = await freePort();
      const proc = startProc(
        `sim-${i}`,
        process.execPath,
        [
          CLI,
          'sim',
          '--port',
          String(port),
          '--model',
          MODEL,
          '--id',
          `soak-${i}`,
          '--ttft-ms',
          '2',
          '--itl-ms',
          '1',
          '--output-tokens',
          '8',
          '--max-num-seqs',
          '512',
        ],
        path.join(dir, `sim-${i}.log`),
      );
      sims.push({ url: `http://127.0.0.1:${port}`, proc });
    }
    const routerPort = await freePort();
    const router = startProc(
      'router',
      process.execPath,
      [
        CLI,
        'serve',
        '--host',
        '127.0.0.1',
        '--port',
        String(routerPort),
        '--log-level',
        'warn',
        '--drain-seconds',
        '0',
        '--static-backends',
        sims.map((s) => s.url).join(','),
        '--static-models',
        sims.map(() => MODEL).join(','),
        '--probe-interval',
        '0.2',
        '--probe-ready-interval',
        '1',
        '--response-timeout',
        '2',
        '--idle-timeout',
        '1',
        '--migration-limit',
        String(opts.migrationLimit),
      ],
      path.join(dir, 'router.log'),
    );
    for (const s of sims)
      await waitUntil(`${s.proc.name} up`, async () => (await fetchOnce(Number(new URL(s.url).port), 'GET', '/health')).status === 200, {
        proc: s.proc,
      });
    await waitUntil(
      'router ready',
      async () => {
        const r = await fetchOnce(routerPort, 'GET', '/engines');
        return (JSON.parse(r.text) as { endpoints: { state: string }[] }).endpoints.every((e) => e.state === 'ready');
      },
      { proc: router },
    );

    const pool = new Pool(`http://127.0.0.1:${routerPort}`, { connections: opts.concurrency, pipelining: 1 });
    const outcomes: Record<string, number> = {};
    const expected = fillerText(TOKENS);
    let streams = 0;
    let intact = 0;
    const faults: Record<string, number> = {};
    const count = (m: Record<string, number>, k: string): void => {
      m[k] = (m[k] ?? 0) + 1;
    };
    const one = async (i: number): Promise<void> => {
      const stream = (i * 7919) % 100 < opts.streamShare * 100;
      const body = JSON.stringify({
        model: MODEL,
        messages: [{ role: 'user', content: `soak ${i}` }],
        max_tokens: TOKENS,
        ...(stream ? { stream: true } : {}),
      });
      try {
        const res = await pool.request({
          path: '/v1/chat/completions',
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body,
          headersTimeout: opts.requestTimeoutMs,
          bodyTimeout: opts.requestTimeoutMs,
          signal: AbortSignal.timeout(opts.requestTimeoutMs),
        });
        const text = await res.body.text();
        count(outcomes, classify(res.statusCode, text, stream));
        if (stream) {
          streams++;
          if (res.statusCode === 200 && streamIntact(text, expected)) intact++;
        }
      } catch (err) {
        if (stream) streams++;
        count(outcomes, `lost: ${(err as { code?: string }).code ?? (err as Error).name}`);
      }
    };

    // faults: every 1.5 s one engine gets one, for a short while; one engine is always left healthy
    let injecting = true;
    const modes = [
      { mode: 'reset-mid-stream', seconds: 1 },
      { mode: 'error500', seconds: 1 },
      { mode: 'overloaded', seconds: 1 },
      { mode: 'slow-chunks', delayMs: 1_500, seconds: 2 },
      { mode: 'hang', seconds: 2 },
      { mode: 'refuse', seconds: 1 },
    ];
    const injector = (async () => {
      for (let k = 0; injecting; k++) {
        await sleep(1_500);
        if (!injecting) break;
        const target = sims[k % 2] as { url: string };
        const fault = modes[k % modes.length] as { mode: string };
        count(faults, fault.mode);
        await fetchOnce(Number(new URL(target.url).port), 'POST', '/_sim/fault', JSON.stringify(fault)).catch(() => undefined);
      }
    })();

    await sleep(500);
    const rssBeforeMb = rssMb(router.pid);
    let rssPeakMb = rssBeforeMb;
    const sampler = setInterval(() => (rssPeakMb = Math.max(rssPeakMb, rssMb(router.pid))), 500);
    const started = performance.now();
    let next = 0;
    let done = 0;
    const workers = Array.from({ length: opts.concurrency }, async () => {
      while (next < opts.requests) {
        const i = next++;
        await one(i);
        done++;
        if (done % 10_000 === 0) log(`soak: ${done} of ${opts.requests} requests`);
      }
    });
    await Promise.all(workers);
    const seconds = (performance.now() - started) / 1000;
    injecting = false;
    await injector;
    clearInterval(sampler);
    await pool.close();
    await sleep(1_000);
    const rssAfterMb = rssMb(router.pid);
    const lost = Object.entries(outcomes)
      .filter(([k]) => k.startsWith('lost'))
      .reduce((n, [, v]) => n + v, 0);
    return {
      requests: opts.requests,
      seconds,
      outcomes,
      lost,
      faults,
      rssBeforeMb,
      rssAfterMb,
      rssPeakMb,
      migrationLimit: opts.migrationLimit,
      streams,
      intact,
    };
  } finally {
    await stopAll();
  }
}

export function renderSoak(r: SoakResult): string {
  const lines = [
    `soak (--migration-limit ${r.migrationLimit}): ${r.requests} requests in ${r.seconds.toFixed(1)} s (${Math.round(r.requests / r.seconds)}/s), faults injected: ${Object.entries(
      r.faults,
    )
      .map(([k, v]) => `${k} x${v}`)
      .join(', ')}`,
    '| outcome | requests |',
    '| --- | --- |',
    ...Object.entries(r.outcomes)
      .sort((a, b) => b[1] - a[1])
      .map(([k, v]) => `| ${k} | ${v} |`),
    `| **requests lost** | **${r.lost}** |`,
    '',
    `streams intact (one uninterrupted generation, one [DONE], no error event): ${r.intact} of ${r.streams} (${r.streams - r.intact} not)`,
    `router RSS: ${r.rssBeforeMb.toFixed(1)} MB before, ${r.rssAfterMb.toFixed(1)} MB after, ${r.rssPeakMb.toFixed(1)} MB peak`,
  ];
  return lines.join('\n');
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const arg = (name: string, fallback: number): number => {
    const i = process.argv.indexOf(`--${name}`);
    return i < 0 ? fallback : Number(process.argv[i + 1]);
  };
  process.on('SIGINT', () => void stopAll().finally(() => process.exit(130)));
  runSoak({
    requests: arg('requests', 100_000),
    concurrency: arg('concurrency', 32),
    streamShare: 0.3,
    requestTimeoutMs: 15_000,
    migrationLimit: arg('migration-limit', 0),
  })
    .then((r) => {
      process.stdout.write(renderSoak(r) + '\n');
      process.exit(r.lost === 0 ? 0 : 1);
    })
    .catch((err: unknown) => {
      process.stderr.write(`soak failed: ${String(err)}\n`);
      process.exit(1);
    });
}
