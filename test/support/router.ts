// Starts real router and simulator processes for integration tests and talks to them over loopback.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Agent, request, type Dispatcher } from 'undici';
import { startCli, type Started } from './process.js';
import { eventually } from './within.js';
import type { RecordedRequest, SimStats } from '../../src/tools/sim/types.js';

/** Probe flags for tests: an engine's state changes show within a second (the router's defaults are for production). */
export const FAST_PROBES: readonly string[] = ['--probe-interval', '0.2', '--probe-ready-interval', '0.5', '--probe-timeout', '1'];

export interface Running {
  readonly url: string;
  readonly port: number;
  /** the admin listener's URL (--admin-port), else the main URL */
  readonly adminUrl: string;
  readonly proc: Started;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

let emptyHubCache: string | undefined;

/**
 * The Hugging Face settings every router of the tests starts with unless the test gives its own: offline, and a cache
 * of its own that is empty (removed when the test process exits), so that no router reaches the real Hub or reads
 * ~/.cache. A test of the Hub download gives HF_ENDPOINT (its stand-in on 127.0.0.1), HF_HUB_OFFLINE=0 and a cache.
 */
export function hubTestEnv(): Record<string, string> {
  if (emptyHubCache === undefined) {
    const dir = mkdtempSync(path.join(tmpdir(), 'llm-router-test-hf-'));
    emptyHubCache = dir;
    process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  }
  return { HF_HUB_OFFLINE: '1', HF_HUB_CACHE: emptyHubCache, HF_ENDPOINT: 'http://127.0.0.1:9' };
}

/** `llm-router serve` on 127.0.0.1 and a free port; resolves once it listens. */
export async function startRouter(args: readonly string[], env: Record<string, string> = {}): Promise<Running> {
  // no drain pause on SIGTERM unless a test asks for one (it would only slow every test's teardown)
  const proc = startCli(['serve', '--host', '127.0.0.1', '--port', '0', '--log-format', 'json', '--drain-seconds', '0', ...args], {
    ...hubTestEnv(),
    ...env,
  });
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

/**
 * `llm-router sim` on 127.0.0.1. It listens on port 0, and its URL (http or https) is read from its
 * "sim listening on URL" line. A caller that must know the port before the simulator listens (its load phases refuse
 * connections at first, or a router points at it before it starts) passes `port` from freePort(); with
 * `waitListening: false` it gets the handle at once.
 */
export async function startSim(args: readonly string[], opts: { port?: number; waitListening?: boolean } = {}): Promise<Running> {
  if (opts.port === undefined && opts.waitListening === false)
    throw new Error('startSim: a simulator on port 0 has no port before it listens; pass a port from freePort()');
  const proc = startCli(['sim', '--host', '127.0.0.1', '--port', String(opts.port ?? 0), ...args]);
  let url = `http://127.0.0.1:${opts.port}`;
  if (opts.waitListening !== false) {
    await proc.waitForOutput(/sim listening on \S+\n/);
    url = (/sim listening on (\S+)\n/.exec(proc.output()) as RegExpExecArray)[1] as string;
  }
  return { url, port: Number(new URL(url).port), adminUrl: url, proc, stop: (signal?: NodeJS.Signals) => proc.stop(signal) };
}

/** The KV-cache event endpoints a simulator started with --kv-events-port and --kv-events-replay-port announced. */
export function simKvEndpoints(sim: Running): { readonly events: string; readonly replay: string } {
  const m = /sim kv-events on (tcp:\/\/\S+) replay (tcp:\/\/\S+)\n/.exec(sim.proc.output());
  if (!m) throw new Error(`no kv-events line in the simulator's output:\n${sim.proc.output()}`);
  return { events: m[1] as string, replay: m[2] as string };
}

/** The first `snapshot` event of the router's `GET /events` (the operator's page's state and timeline), parsed. */
export async function firstSnapshot<T>(routerUrl: string): Promise<T> {
  // on a connection of its own, closed after: the stream never ends by itself
  const dispatcher = new Agent({ pipelining: 0 });
  try {
    const events = await request(`${routerUrl}/events`, { dispatcher });
    let text = '';
    for await (const chunk of events.body) {
      text += chunk.toString();
      if (text.includes('event: snapshot\n') && text.endsWith('\n\n')) break;
    }
    events.body.destroy();
    return JSON.parse(/event: snapshot\ndata: (.*)\n/.exec(text)?.[1] ?? '{}') as T;
  } finally {
    await dispatcher.destroy();
  }
}

/** `serve` flags routing `model` by kvaware over these simulators (started with --kv-events-port 0), their events followed. */
export function kvawareArgs(sims: readonly Running[], model: string): string[] {
  return kvawareRoutingArgs(
    sims.map((s) => ({ url: s.url, ...simKvEndpoints(s) })),
    model,
  );
}

/** `serve` flags routing `model` by kvaware over these engines, each with its KV-cache event and replay endpoints. */
export function kvawareRoutingArgs(engines: readonly { url: string; events: string; replay: string }[], model: string): string[] {
  return [
    '--routing-logic',
    'kvaware',
    '--static-backends',
    engines.map((e) => e.url).join(','),
    '--static-models',
    engines.map(() => model).join(','),
    '--static-backend-kv-events',
    engines.map((e) => e.events).join(','),
    '--static-backend-kv-replay',
    engines.map((e) => e.replay).join(','),
  ];
}

export interface Answer {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly text: string;
  json<T = unknown>(): T;
}

export async function call(
  url: string,
  opts: {
    method?: string;
    body?: string | Buffer;
    headers?: Record<string, string>;
    timeoutMs?: number;
    /** on a connection of its own, closed after: under --workers, new connections are spread over the workers */
    newConnection?: boolean;
  } = {},
): Promise<Answer> {
  const timeoutMs = opts.timeoutMs ?? 10_000;
  const dispatcher = opts.newConnection ? new Agent({ pipelining: 0 }) : undefined;
  try {
    const res = await request(url, {
      method: (opts.method ?? (opts.body !== undefined ? 'POST' : 'GET')) as 'GET',
      headers: { 'content-type': 'application/json', ...opts.headers },
      body: opts.body,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      signal: AbortSignal.timeout(timeoutMs),
      ...(dispatcher ? { dispatcher } : {}),
    });
    const text = await res.body.text();
    return { status: res.statusCode, headers: res.headers, text, json: <T>() => JSON.parse(text) as T };
  } finally {
    await dispatcher?.close();
  }
}

export function chat(model: string, extra: Record<string, unknown> = {}): string {
  return JSON.stringify({ model, messages: [{ role: 'user', content: 'Hello there' }], max_tokens: 4, ...extra });
}

/**
 * Opens chat streams for `model` until one is served by the simulator named `engine` (its x-sim-engine header; round
 * robin spreads them), reading the others to their end. Resolves to that stream, its body unread; rejects after `tries`.
 */
export async function streamOn(
  router: string,
  model: string,
  engine: string,
  extra: Record<string, unknown> = {},
  tries = 4,
): Promise<Dispatcher.ResponseData> {
  for (let i = 0; i < tries; i++) {
    const res = await request(`${router}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: chat(model, { stream: true, ...extra }),
    });
    if (res.headers['x-sim-engine'] === engine) return res;
    await res.body.dump();
  }
  throw new Error(`none of ${tries} streams for ${model} was served by ${engine}`);
}

/** Polls until the router's /v1/models shows `model` with `status`. */
export async function waitModelStatus(
  router: string,
  model: string,
  status: string,
  timeoutMs = 15_000,
  headers: Record<string, string> = {},
): Promise<void> {
  await eventually(
    `model ${model} ${status} at ${router}`,
    async () =>
      (await call(`${router}/v1/models`, { headers })).json<{ data: { id: string; status: string }[] }>().data.find((m) => m.id === model)
        ?.status ?? 'absent',
    (seen) => seen === status,
    timeoutMs,
  );
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

/** Polls /engines until it lists exactly `count` endpoints, all ready. */
export async function allReady(router: string, count: number, timeoutMs = 15_000): Promise<void> {
  await eventually(
    `${count} ready endpoints at ${router}`,
    async () => (await engines(router)).map((e) => e.state),
    (states) => states.length === count && states.every((s) => s === 'ready'),
    timeoutMs,
  );
}

/** Polls /engines until the endpoint with `url` is in `state`; returns its view. */
export async function endpointState(router: string, url: string, state: string, timeoutMs = 15_000): Promise<EngineView | undefined> {
  return eventually(
    `${url} ${state} at ${router}`,
    async () => (await engines(router)).find((e) => e.url === url),
    (e) => e?.state === state,
    timeoutMs,
  );
}

/**
 * One sample of a router's (or an engine's) /metrics: the value of `name` with exactly these labels, in the order the
 * exposition writes them; NaN when absent.
 */
export async function metric(url: string, name: string, labels: Readonly<Record<string, string>> = {}): Promise<number> {
  const text = (await call(`${url}/metrics`)).text;
  const literal = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const set = Object.entries(labels)
    .map(([k, v]) => `${k}="${literal(v)}"`)
    .join(',');
  const m = new RegExp(`^${literal(name)}${set ? `\\{${set}\\}` : ''} (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : Number.NaN;
}

export async function simStats(sim: string): Promise<SimStats> {
  return (await call(`${sim}/_sim/stats`)).json();
}

/** The last inference requests the simulator received, oldest first, with their exact body bytes. */
export async function simRequests(sim: string): Promise<(RecordedRequest & { body: Buffer })[]> {
  const { requests } = (await call(`${sim}/_sim/requests`)).json<{ requests: RecordedRequest[] }>();
  return requests.map((r) => ({ ...r, body: Buffer.from(r.bodyBase64, 'base64') }));
}

/** Sets the simulator's fault (POST /_sim/fault: the same modes as its --fault flag). */
export async function setFault(sim: string, fault: Record<string, unknown>): Promise<void> {
  const res = await call(`${sim}/_sim/fault`, { body: JSON.stringify(fault) });
  if (res.status !== 200) throw new Error(`POST ${sim}/_sim/fault ${JSON.stringify(fault)}: ${res.status} ${res.text}`);
}

/** The port the router's KEDA scaler listens on (--keda-scaler-port 0 picks one; it is logged). */
export async function kedaPort(router: Running): Promise<number> {
  await router.proc.waitForOutput('KEDA external scaler listening');
  return Number(/"port":(\d+),"msg":"KEDA external scaler listening/.exec(router.proc.output())?.[1]);
}
