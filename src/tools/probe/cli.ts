// `llm-router probe`: the readiness sidecar for an engine pod (see sidecar.ts and docs/operations.md).
import { UsageError, parseFlags, usage, type FlagSpec } from '../../router/config/flags.js';
import { ENGINE_KINDS } from '../../router/core/engine.js';
import { createLogger } from '../../router/util/log.js';
import { PROBE_CONTRACT, startProbeSidecar } from './sidecar.js';

export const PROBE_FLAGS = [
  {
    name: 'engine-url',
    kind: 'string',
    default: 'http://127.0.0.1:8000',
    help: 'the engine in this pod (its own port: 8200 for a decode engine behind a routing sidecar)',
  },
  {
    name: 'model',
    kind: 'list',
    aliases: ['models'],
    help: 'model names the engine must list before /ready is 200, comma separated (required)',
  },
  {
    name: 'engine-kind',
    kind: 'string',
    default: 'vllm',
    choices: ENGINE_KINDS,
    help: 'how to tell that the engine has loaded its model (the same rules as the router)',
  },
  { name: 'host', kind: 'string', default: '0.0.0.0', help: 'address to listen on' },
  { name: 'port', kind: 'int', default: 8090, min: 0, help: 'port to listen on (0 = any free port)' },
  {
    name: 'timeout',
    kind: 'number',
    default: 2,
    min: 0.05,
    help: "seconds one check of the engine may take; keep it below the kubelet probe's timeoutSeconds",
  },
  {
    name: 'warmup',
    kind: 'boolean',
    default: false,
    help: 'also require one generated token before /ready is 200 (once per engine start)',
  },
  { name: 'warmup-timeout', kind: 'number', default: 60, min: 0.05, help: 'seconds the warm-up request may take' },
  { name: 'engine-api-key', kind: 'string', env: ['VLLM_API_KEY'], help: 'API key sent to the engine as Authorization: Bearer' },
  { name: 'log-level', kind: 'string', default: 'info', choices: ['trace', 'debug', 'info', 'warn', 'error', 'silent'], help: 'log level' },
  { name: 'log-format', kind: 'string', default: 'text', choices: ['text', 'json'], help: 'log format' },
  { name: 'help', kind: 'boolean', help: 'print this help' },
] as const satisfies readonly FlagSpec[];

const SUMMARY = [
  `Readiness sidecar for an engine pod (contract ${PROBE_CONTRACT}). GET /ready: 200 only when the engine answers and`,
  'lists every --model (after one warm-up token with --warmup); GET /live: 200 while the engine answers at all.',
  'Both answer with a JSON body giving the state and the reason. Flags can also be set as LLM_ROUTER_PROBE_<FLAG>.',
].join('\n');

export async function runProbe(argv: string[]): Promise<void> {
  const flags = parseFlags(argv, PROBE_FLAGS, { env: process.env, envPrefix: 'LLM_ROUTER_PROBE_' }).values;
  if (flags.help) {
    process.stdout.write(usage('probe', SUMMARY, PROBE_FLAGS) + '\n');
    return;
  }
  const models = flags.model;
  if (models.length === 0) throw new UsageError('probe needs --model: the model names the engine must list');
  const engineUrl = flags['engine-url'];
  try {
    const u = new URL(engineUrl);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error('not http');
  } catch {
    throw new UsageError(`--engine-url ${JSON.stringify(engineUrl)} is not an http(s) URL`);
  }
  const log = createLogger({ level: flags['log-level'], format: flags['log-format'] });
  const sidecar = await startProbeSidecar({
    host: flags.host,
    port: flags.port,
    engineUrl,
    models,
    kind: flags['engine-kind'],
    timeoutMs: flags.timeout * 1000,
    apiKey: flags['engine-api-key'],
    warmup: flags.warmup,
    warmupTimeoutMs: flags['warmup-timeout'] * 1000,
    log,
  });
  log.info({ url: sidecar.url, engine: engineUrl, models, contract: PROBE_CONTRACT }, 'llm-router probe listening');
  const stop = (): void => {
    sidecar.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}
