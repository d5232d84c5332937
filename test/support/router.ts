// Starts real router and simulator processes for integration tests and talks to them over loopback.
import { request } from 'undici';
import { freePort, startCli, type Started } from './process.js';
import type { SimStats } from '../../src/tools/sim/types.js';

export interface Running {
  readonly url: string;
  readonly port: number;
  /** the admin listener's URL (--admin-port), else the main URL */
  readonly adminUrl: string;
  readonly proc: Started;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** `llm-router serve` on 127.0.0.1 and a free port; resolves once it listens. */
export async function startRouter(args: readonly string[], env: Record<string, string> = {}): Promise<Running> {
  // no drain pause on SIGTERM unless a test asks for one (it would only slow every test's teardown)
  const proc = startCli(['serve', '--host', '127.0.0.1', '--port', '0', '--log-format', 'json', '--drain-seconds', '0', ...args], env);
  await proc.waitForOutput('llm-router listening');
  const match = /"url":"(http:\/\/127\.0\.0\.1:(\d+))"/.exec(proc.output());
  if (!match) throw new Error(`no url in router output:\n${proc.output()}`);
  const admin = /"adminUrl":"(http:\/\/127\.0\.0\.1:\d+)"/.exec(proc.output());
  return {
    url: match[1] as string,
    port: Number(match[2]),
    adminUrl: admin?.[1] ?? (match[1] as string),
    proc,
    stop: (signal?: NodeJS.Signals) => proc.stop(signal),
  };
}

/** `llm-router sim`; with load phases it needs a port chosen up front (it is not listening yet). */
export async function startSim(args: readonly string[], opts: { port?: number; waitListening?: boolean } = {}): Promise<Running> {
  const port = opts.port ?? (await freePort());
  const proc = startCli(['sim', '--host', '127.0.0.1', '--port', String(port), ...args]);
  if (opts.waitListening !== false) await proc.waitForOutput('sim listening on');
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    adminUrl: `http://127.0.0.1:${port}`,
    proc,
    stop: (signal?: NodeJS.Signals) => proc.stop(signal),
  };
}

export interface Answer {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly text: string;
  json<T = unknown>(): T;
}

export async function call(
  url: string,
  opts: { method?: string; body?: string | Buffer; headers?: Record<string, string>; timeoutMs?: number } = {},
): Promise<Answer> {
  const timeoutMs = opts.timeoutMs ?? 10_000;
  const res = await request(url, {
    method: (opts.method ?? (opts.body !== undefined ? 'POST' : 'GET')) as 'GET',
    headers: { 'content-type': 'application/json', ...opts.headers },
    body: opts.body,
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
    signal: AbortSignal.timeout(timeoutMs),
  });
  const text = await res.body.text();
  return { status: res.statusCode, headers: res.headers, text, json: <T>() => JSON.parse(text) as T };
}

export function chat(model: string, extra: Record<string, unknown> = {}): string {
  return JSON.stringify({ model, messages: [{ role: 'user', content: 'Hello there' }], max_tokens: 4, ...extra });
}

/** Polls until the router's /v1/models shows `model` with `status`. */
export async function waitModelStatus(
  router: string,
  model: string,
  status: string,
  timeoutMs = 15_000,
  headers: Record<string, string> = {},
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let seen = 'absent';
  while (Date.now() < deadline) {
    const list = (await call(`${router}/v1/models`, { headers })).json<{ data: { id: string; status: string }[] }>();
    seen = list.data.find((m) => m.id === model)?.status ?? 'absent';
    if (seen === status) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`model ${model} did not become ${status} in ${timeoutMs} ms (last: ${seen})`);
}

export interface EngineView {
  url: string;
  state: string;
  inFlight: number;
  lastError: string | null;
}

export async function engines(router: string): Promise<EngineView[]> {
  return (await call(`${router}/engines`)).json<{ endpoints: EngineView[] }>().endpoints;
}

export async function simStats(sim: string): Promise<SimStats> {
  return (await call(`${sim}/_sim/stats`)).json();
}

/** The port the router's KEDA scaler listens on (--keda-scaler-port 0 picks one; it is logged). */
export async function kedaPort(router: Running): Promise<number> {
  await router.proc.waitForOutput('KEDA external scaler listening');
  return Number(/"port":(\d+),"msg":"KEDA external scaler listening/.exec(router.proc.output())?.[1]);
}
