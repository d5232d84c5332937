// A real Prometheus (Debian's package) scraping the router, queried through its HTTP API, and promtool: so the
// PromQL the docs and the chart give is evaluated by the engine users run, not by our reading of it.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { request } from 'undici';
import { freePort, startProcess, waitForHttp, type Started } from './process.js';

const run = promisify(execFile);

export interface PromResult {
  readonly status: 'success' | 'error';
  readonly error?: string;
  /** instant vector samples (labels and value) */
  readonly samples: { metric: Record<string, string>; value: number }[];
}

export interface Prometheus {
  readonly url: string;
  readonly scrapeSeconds: number;
  query(expr: string): Promise<PromResult>;
  stop(): Promise<void>;
}

/** `prometheus` scraping `targets` (host:port, path /metrics) every `scrapeSeconds`. */
export async function startPrometheus(targets: readonly string[], scrapeSeconds = 1): Promise<Prometheus> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'prometheus-'));
  const config = path.join(dir, 'prometheus.yml');
  writeFileSync(
    config,
    [
      'global:',
      `  scrape_interval: ${scrapeSeconds}s`,
      `  evaluation_interval: ${scrapeSeconds}s`,
      'scrape_configs:',
      '  - job_name: llm-router',
      '    static_configs:',
      `      - targets: [${targets.map((t) => JSON.stringify(t)).join(', ')}]`,
      '',
    ].join('\n'),
  );
  // named in --web.listen-address before Prometheus listens: a port from freePort(), outside the ephemeral range
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const proc: Started = startProcess('prometheus', [
    `--config.file=${config}`,
    `--storage.tsdb.path=${path.join(dir, 'data')}`,
    `--web.listen-address=127.0.0.1:${port}`,
    '--log.level=warn',
  ]);
  const query = async (expr: string): Promise<PromResult> => {
    const res = await request(`${url}/api/v1/query?query=${encodeURIComponent(expr)}`, { headersTimeout: 10_000, bodyTimeout: 10_000 });
    const body = (await res.body.json()) as {
      status: 'success' | 'error';
      error?: string;
      data?: { resultType: string; result: { metric: Record<string, string>; value: [number, string] }[] | [number, string] };
    };
    if (body.status !== 'success') return { status: 'error', error: body.error, samples: [] };
    const r = body.data?.result;
    const samples =
      body.data?.resultType === 'vector'
        ? (r as { metric: Record<string, string>; value: [number, string] }[]).map((s) => ({ metric: s.metric, value: Number(s.value[1]) }))
        : [{ metric: {}, value: Number((r as [number, string])[1]) }];
    return { status: 'success', samples };
  };
  await waitForHttp(`${url}/-/ready`, { status: 200, timeoutMs: 30_000 });
  return {
    url,
    scrapeSeconds,
    query,
    stop: async () => {
      await proc.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** `promtool check metrics` on an exposition: its exit code and what it printed (empty when there are no findings). */
export async function promtoolCheckMetrics(exposition: string): Promise<{ code: number; output: string }> {
  return new Promise((resolve, reject) => {
    const child = execFile('promtool', ['check', 'metrics'], { timeout: 30_000 }, (err, stdout, stderr) => {
      const code = err ? ((err as { code?: unknown }).code as number) : 0;
      if (err && typeof (err as { code?: unknown }).code !== 'number') return reject(err);
      resolve({ code, output: `${stdout}${stderr}`.trim() });
    });
    child.stdin?.end(exposition);
  });
}

/** `promtool check rules` on a rule file's text. */
export async function promtoolCheckRules(rules: string): Promise<{ code: number; output: string }> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rules-'));
  const file = path.join(dir, 'rules.yml');
  writeFileSync(file, rules);
  try {
    await run('promtool', ['check', 'rules', file], { timeout: 30_000 });
    return { code: 0, output: '' };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: e.code ?? -1, output: `${e.stdout ?? ''}${e.stderr ?? ''}` };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
