// `llm-router demo`: simulated engines plus the router, showing the answers a client can get: a ready model (200),
// a declared model at zero replicas (503 + Retry-After), an unknown model (404), a model at zero that a
// simulated autoscaler wakes while the router holds the request (200 after the cold start), a model served by a
// prefill and a decode engine (P/D), and a LoRA adapter the router loads on an engine on its first request.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from 'undici';
import { loadRouterConfig } from '../../router/config/config.js';
import { RouterApp } from '../../router/app/app.js';
import { createLogger } from '../../router/util/log.js';
import { parseFlags, usage, type FlagSpec } from '../../router/config/flags.js';
import { DemoAutoscaler } from './autoscaler.js';

const DEMO_FLAGS = [
  { name: 'host', kind: 'string', default: '127.0.0.1', help: 'address for the router' },
  { name: 'port', kind: 'int', default: 8001, min: 0, help: 'port for the router' },
  { name: 'log-level', kind: 'string', default: 'info', help: 'router log level' },
  {
    name: 'idle-seconds',
    kind: 'number',
    default: 20,
    min: 0.1,
    help: 'seconds without requests after which the simulated autoscaler takes demo-wakeup back to zero',
  },
  {
    name: 'otel-endpoint',
    kind: 'string',
    help: "the router's OpenTelemetry traces go here (as serve's --otel-endpoint: HOST:PORT for OTLP/gRPC, or an http(s) URL); OTEL_EXPORTER_OTLP_* work too",
  },
  { name: 'otel-service-name', kind: 'string', help: "the traces' service.name (as serve's; default vllm-router)" },
  { name: 'otel-secure', kind: 'boolean', default: false, help: "TLS to a HOST:PORT --otel-endpoint (as serve's)" },
] as const satisfies readonly FlagSpec[];

const DEMO_MODELS = {
  ready: 'demo-chat',
  alias: 'gpt-4o-mini',
  embed: 'demo-embed',
  zero: 'demo-sleeper',
  wake: 'demo-wakeup',
  pd: 'demo-pd',
  adapter: 'demo-chat-sql',
  /** a near miss of demo-chat: the 404 names the model it was probably meant to be */
  unknown: 'demo-caht',
} as const;

async function freePort(): Promise<number> {
  const s = net.createServer().listen(0, '127.0.0.1');
  await once(s, 'listening');
  const port = (s.address() as net.AddressInfo).port;
  s.close();
  await once(s, 'close');
  return port;
}

/** Resolves once something listens on 127.0.0.1:`port` (false after `timeoutMs`). */
async function listening(port: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = net.connect(port, '127.0.0.1');
      s.once('connect', () => {
        s.destroy();
        resolve(true);
      });
      s.once('error', () => resolve(false));
    });
    if (ok) return true;
    await sleep(50);
  }
  return false;
}

interface Engine {
  readonly url: string;
  readonly child: ChildProcess;
}

function startEngine(port: number, model: string, extra: readonly string[]): Engine {
  const child = spawn(
    process.execPath,
    [
      process.argv[1] as string,
      'sim',
      '--host',
      '127.0.0.1',
      '--port',
      String(port),
      '--model',
      model,
      '--id',
      `sim-${model}-${port}`,
      ...extra,
    ],
    {
      stdio: ['ignore', 'ignore', 'inherit'],
    },
  );
  return { url: `http://127.0.0.1:${port}`, child };
}

/** an engine that ignores SIGTERM this long is killed */
const ENGINE_STOP_MS = 5_000;

/** SIGTERM, then SIGKILL after ENGINE_STOP_MS; resolves once the process has exited. */
async function stopEngine(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), ENGINE_STOP_MS);
  await exited;
  clearTimeout(timer);
}

export interface DemoCase {
  readonly title: string;
  readonly command: string;
  readonly expectStatus: number;
}

function demoCases(base: string): DemoCase[] {
  const post = (path: string, body: unknown): string =>
    `curl -si ${base}${path} -H 'content-type: application/json' -d '${JSON.stringify(body)}'`;
  const chat = (model: string, stream = false): unknown => ({
    model,
    messages: [{ role: 'user', content: 'Hello!' }],
    max_tokens: 8,
    ...(stream ? { stream: true } : {}),
  });
  return [
    { title: 'a ready model answers', command: post('/v1/chat/completions', chat(DEMO_MODELS.ready)), expectStatus: 200 },
    {
      title: 'streaming passes through chunk by chunk',
      command: `curl -sNi ${base}/v1/chat/completions -H 'content-type: application/json' -d '${JSON.stringify(chat(DEMO_MODELS.ready, true))}'`,
      expectStatus: 200,
    },
    { title: 'an alias routes to its model', command: post('/v1/chat/completions', chat(DEMO_MODELS.alias)), expectStatus: 200 },
    {
      title: 'embeddings route by model too',
      command: post('/v1/embeddings', { model: DEMO_MODELS.embed, input: 'hello' }),
      expectStatus: 200,
    },
    {
      title: 'a declared model at zero replicas: 503, Retry-After, x-llm-router-model-state: scaled-to-zero',
      command: post('/v1/chat/completions', chat(DEMO_MODELS.zero)),
      expectStatus: 503,
    },
    {
      title: `a model at zero with a cold-start wait: held while the demo autoscaler starts an engine (~4 s), then answered`,
      command: post('/v1/chat/completions', chat(DEMO_MODELS.wake)),
      expectStatus: 200,
    },
    {
      title: 'a P/D model: the prefill engine computes the prompt, the decode engine streams the answer',
      command: `curl -sNi ${base}/v1/chat/completions -H 'content-type: application/json' -d '${JSON.stringify(chat(DEMO_MODELS.pd, true))}'`,
      expectStatus: 200,
    },
    {
      title: `a LoRA adapter of ${DEMO_MODELS.ready}: the first request loads it on an engine (~0.5 s), later ones go there`,
      command: post('/v1/chat/completions', chat(DEMO_MODELS.adapter)),
      expectStatus: 200,
    },
    {
      title: `a misspelt model: 404 model_not_found, with "Did you mean" the model it is closest to`,
      command: post('/v1/chat/completions', chat(DEMO_MODELS.unknown)),
      expectStatus: 404,
    },
    { title: 'every model with its status', command: `curl -si ${base}/v1/models`, expectStatus: 200 },
    { title: 'every engine with its lifecycle state', command: `curl -si ${base}/engines`, expectStatus: 200 },
  ];
}

async function waitRoutable(base: string, model: string, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const res = await request(`${base}/v1/models`).catch(() => undefined);
    if (res) {
      const list = (await res.body.json()) as { data: { id: string; status: string }[] };
      if (list.data.some((m) => m.id === model && m.status === 'ready')) return true;
    }
    await sleep(100);
  }
  return false;
}

export async function runDemo(argv: string[]): Promise<void> {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(
      usage('demo', 'Starts simulated engines and the router, then prints curl lines for each case.', DEMO_FLAGS) + '\n',
    );
    return;
  }
  const flags = parseFlags(argv, DEMO_FLAGS, { env: process.env, envPrefix: 'LLM_ROUTER_DEMO_' }).values;
  const [p1, p2, p3, p4, p5] = [await freePort(), await freePort(), await freePort(), await freePort(), await freePort()];
  // the P/D pair computes a prompt token in 0.5 ms: the decode engine's TTFT shows whether the prefill engine did it
  const pd = ['--pd-protocol', 'vllm-nixl', '--prefill-ms-per-token', '0.5', '--ttft-ms', '20', '--itl-ms', '40', '--output-tokens', '12'];
  // demo-chat's engines load LoRA adapters at run time, as vLLM with VLLM_ALLOW_RUNTIME_LORA_UPDATING does
  const lora = ['--enable-lora', '--max-loras', '2', '--lora-load-delay-ms', '500'];
  const engines = [
    startEngine(p1, DEMO_MODELS.ready, ['--ttft-ms', '50', '--itl-ms', '40', '--output-tokens', '12', ...lora]),
    // a second engine of the same model that takes a while to load: watch it go discovered -> serving-api -> ready in /engines
    startEngine(p2, DEMO_MODELS.ready, ['--startup-loading-seconds', '8', '--ttft-ms', '50', '--itl-ms', '40', ...lora]),
    startEngine(p3, DEMO_MODELS.embed, []),
    startEngine(p4, DEMO_MODELS.pd, ['--role', 'prefill', ...pd]),
    startEngine(p5, DEMO_MODELS.pd, ['--role', 'decode', ...pd]),
  ];
  const stopEngines = (): void => {
    for (const e of engines) if (e.child.exitCode === null) e.child.kill('SIGTERM');
  };
  process.on('exit', stopEngines);
  // the router starts once every engine listens: a probe sent before would leave an ECONNREFUSED of the start-up race
  // as the endpoint's last error on the operator's page
  if (!(await Promise.all([p1, p2, p3, p4, p5].map((p) => listening(p, 20_000)))).every(Boolean)) {
    process.stderr.write('demo: the simulated engines did not listen in 20 s\n');
    stopEngines();
    process.exitCode = 1;
    return;
  }

  const config = loadRouterConfig(
    [
      '--host',
      flags.host,
      '--port',
      String(flags.port),
      '--static-backends',
      engines.map((e) => e.url).join(','),
      '--static-models',
      [DEMO_MODELS.ready, DEMO_MODELS.ready, DEMO_MODELS.embed, DEMO_MODELS.pd, DEMO_MODELS.pd].join(','),
      '--static-backend-roles',
      'both,both,both,prefill,decode',
      '--static-aliases',
      `${DEMO_MODELS.alias}:${DEMO_MODELS.ready}`,
      '--known-models',
      DEMO_MODELS.zero,
      '--lora-adapters',
      `${DEMO_MODELS.adapter}@${DEMO_MODELS.ready}=/adapters/${DEMO_MODELS.adapter}`,
      '--cold-start-wait-per-model',
      `${DEMO_MODELS.wake}=60`,
      '--scale-to-zero-grace-seconds',
      String(flags['idle-seconds']),
      // a stream whose engine fails mid-way goes on on the other engine of its model
      '--migration-limit',
      '1',
      '--log-level',
      flags['log-level'],
      // tracing passes through to the router: the flags, and the standard OTEL_* variables
      ...(flags['otel-endpoint'] !== undefined ? ['--otel-endpoint', flags['otel-endpoint']] : []),
      ...(flags['otel-service-name'] !== undefined ? ['--otel-service-name', flags['otel-service-name']] : []),
      ...(flags['otel-secure'] ? ['--otel-secure'] : []),
    ],
    // tracing's standard OTEL_* variables pass through; the demo never asks the Hugging Face Hub for a tokenizer
    { ...Object.fromEntries(Object.entries(process.env).filter(([name]) => name.startsWith('OTEL_'))), HF_HUB_OFFLINE: '1' },
  );
  const log = createLogger({ level: config.logLevel, format: 'text' });
  const app = new RouterApp(config, log, { flag: 'demo --port', env: 'LLM_ROUTER_DEMO_PORT' });
  const autoscaler = new DemoAutoscaler(
    app.catalog,
    {
      model: DEMO_MODELS.wake,
      graceMs: flags['idle-seconds'] * 1000,
      startEngine: async () => {
        const port = await freePort();
        const e = startEngine(port, DEMO_MODELS.wake, ['--startup-loading-seconds', '3']);
        engines.push(e);
        // its endpoint appears once it listens (as a pod's does once it is running): no refused probe to show
        await listening(port, 10_000);
        return { url: e.url, stop: () => e.child.kill('SIGTERM') };
      },
    },
    log,
  );
  // the autoscaler declares demo-wakeup before the router starts: its start-up line lists every demo model
  autoscaler.declare();
  await app.start();
  const base = app.url;
  autoscaler.watch(base);
  let stopping = false;
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    autoscaler.stop();
    // exit only once every engine it started is gone: "Ctrl-C stops everything" holds when the demo has exited
    void Promise.allSettled([app.stop({ drainMs: 0, shutdownTimeoutMs: 1_000 }), ...engines.map((e) => stopEngine(e.child))]).then(() =>
      process.exit(0),
    );
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);

  const routable = [DEMO_MODELS.ready, DEMO_MODELS.embed, DEMO_MODELS.pd];
  if (!(await Promise.all(routable.map((m) => waitRoutable(base, m, 20_000)))).every(Boolean)) {
    process.stderr.write('demo: the simulated engines did not become ready in 20 s\n');
    stop();
    return;
  }
  const lines = [
    '',
    `llm-router demo is up at ${base}`,
    `  the operator's page: ${base}/dashboard (open it in a browser: every model and engine, live)`,
    `  ${DEMO_MODELS.ready}: two simulated vLLM engines (the second one is still loading for a few seconds)`,
    `  ${DEMO_MODELS.alias}: an alias of ${DEMO_MODELS.ready}`,
    `  ${DEMO_MODELS.embed}: one simulated embedding engine`,
    `  ${DEMO_MODELS.pd}: a prefill and a decode engine (vllm-nixl): see llm_router_pd_* in /metrics and the roles in /engines`,
    `  ${DEMO_MODELS.adapter}: a LoRA adapter of ${DEMO_MODELS.ready} (--lora-adapters): no engine holds it until a request asks for it`,
    `  ${DEMO_MODELS.zero}: declared with --known-models, no engine (scaled to zero): 503 + Retry-After`,
    `  ${DEMO_MODELS.wake}: at zero too, but a simulated autoscaler starts an engine when requests wait for it,`,
    `      and stops it after ${flags['idle-seconds']} s without requests: watch /engines and llm_router_model_* in /metrics`,
    '',
    'Try:',
  ];
  for (const c of demoCases(base)) lines.push(`  # ${c.title} (expect ${c.expectStatus})`, `  ${c.command}`, '');
  lines.push(
    `  # mid-stream migration (--migration-limit 1): make the first ${DEMO_MODELS.ready} engine cut every stream after 2 chunks,`,
    `  # then stream ${DEMO_MODELS.ready} (above) a few times: a cut stream goes on on the other engine, whole and in one piece`,
    `  curl -s ${(engines[0] as Engine).url}/_sim/fault -H 'content-type: application/json' -d '{"mode":"reset-mid-stream"}'`,
    '',
  );
  lines.push('Press Ctrl-C to stop the router and the engines.', '');
  process.stdout.write(lines.join('\n'));
}
