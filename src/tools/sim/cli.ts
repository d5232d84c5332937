// `llm-router sim`: flags -> startSimEngine, one "listening" line, exit 0 on SIGTERM/SIGINT.
import { readFileSync } from 'node:fs';
import { FlagReader, UsageError, parseFlags, usage, type FlagSpec } from '../../router/config/flags.js';
import { startSimEngine, type SimEngine, type SimEngineOptions } from './engine.js';
import { FAULT_MODES, type Fault, type FaultMode } from './types.js';
import { ENGINE_KINDS, type EngineKind } from '../../router/core/engine.js';
import { ENDPOINT_ROLES, PD_PROTOCOLS, type EndpointRole, type PdProtocol } from '../../router/core/pd.js';
import { parseAdapterPair } from '../../router/core/lora.js';
import type { SimLoraOptions } from './lora.js';

export const SIM_FLAGS: readonly FlagSpec[] = [
  { name: 'host', kind: 'string', default: '127.0.0.1', help: 'address to listen on' },
  { name: 'port', kind: 'int', default: 8000, min: 0, help: 'port to listen on; 0 picks a free port' },
  { name: 'model', kind: 'list', default: ['sim-model'], help: 'served model names, comma separated' },
  {
    name: 'engine-kind',
    kind: 'string',
    default: 'vllm',
    choices: ENGINE_KINDS,
    help: 'which engine to imitate (health, model-info and metric names differ)',
  },
  { name: 'startup-refuse-seconds', kind: 'number', default: 0, min: 0, help: 'at start, the port refuses connections this long' },
  { name: 'startup-loading-seconds', kind: 'number', default: 0, min: 0, help: 'then it listens but the model is still loading this long' },
  { name: 'ttft-ms', kind: 'number', default: 20, min: 0, help: 'time to first token' },
  { name: 'itl-ms', kind: 'number', default: 5, min: 0, help: 'inter-token latency' },
  { name: 'output-tokens', kind: 'int', default: 16, min: 1, help: "tokens generated per request; a request's max_tokens lowers it" },
  { name: 'max-num-seqs', kind: 'int', default: 256, min: 1, help: 'requests running at once; the rest wait in a FIFO queue' },
  {
    name: 'prefill-ms-per-token',
    kind: 'number',
    default: 0,
    min: 0,
    help: 'prefill time per prompt token the prefix cache does not hold, added to the TTFT',
  },
  { name: 'prefix-cache-blocks', kind: 'int', default: 4096, min: 0, help: 'prefix cache capacity in blocks (LRU; 0 = no prefix caching)' },
  { name: 'prefix-block-tokens', kind: 'int', default: 16, min: 1, help: 'tokens per prefix-cache block' },
  { name: 'embedding-dim', kind: 'int', default: 8, min: 1, help: 'length of embedding vectors' },
  { name: 'max-model-len', kind: 'int', default: 4096, min: 1, help: 'context length reported in /v1/models, /info and /tokenize' },
  { name: 'id', kind: 'string', help: 'engine name sent in the x-sim-engine header (default sim-<port>)' },
  {
    name: 'fault',
    kind: 'string',
    default: 'none',
    choices: FAULT_MODES,
    help: 'fault to apply once listening (same modes as POST /_sim/fault)',
  },
  { name: 'fault-seconds', kind: 'number', min: 0, help: 'the startup fault ends after this long (refuse: listen again)' },
  { name: 'fault-delay-ms', kind: 'number', min: 0, help: 'slow-chunks: pause between SSE chunks (default 500)' },
  { name: 'tls-cert', kind: 'string', help: 'serve https with this PEM certificate (needs --tls-key)' },
  { name: 'tls-key', kind: 'string', help: 'PEM private key of --tls-cert' },
  { name: 'tls-client-ca', kind: 'string', help: 'with --tls-cert: require client certificates signed by these PEM CAs (mTLS)' },
  {
    name: 'role',
    kind: 'string',
    default: 'both',
    choices: ENDPOINT_ROLES,
    help: 'the P/D half this engine plays: prefill, decode, or both (whole requests, no P/D checks)',
  },
  {
    name: 'pd-protocol',
    kind: 'string',
    default: 'vllm-nixl',
    choices: PD_PROTOCOLS,
    help: 'with --role prefill or decode: the P/D protocol requests are checked against (malformed P/D fields are a 400)',
  },
  { name: 'enable-lora', kind: 'boolean', default: false, help: 'serve LoRA adapters, as vLLM with --enable-lora' },
  {
    name: 'max-loras',
    kind: 'int',
    default: 1,
    min: 1,
    help: 'with --enable-lora: adapters running in one batch at most (requests for another wait); reported as max_lora',
  },
  { name: 'lora-modules', kind: 'list', default: [], help: 'with --enable-lora: adapters loaded at start, NAME=PATH comma separated' },
  { name: 'lora-load-delay-ms', kind: 'number', default: 0, min: 0, help: 'with --enable-lora: how long a load call takes' },
  {
    name: 'lora-missing-paths',
    kind: 'list',
    default: [],
    help: "with --enable-lora: lora_path values with no adapter: loading them answers vLLM's 404 (No adapter found)",
  },
  {
    name: 'runtime-lora-updating',
    kind: 'boolean',
    default: true,
    help: 'with --enable-lora: serve POST /v1/load_lora_adapter and /v1/unload_lora_adapter (vLLM: VLLM_ALLOW_RUNTIME_LORA_UPDATING); false: they are 404',
  },
  { name: 'help', kind: 'boolean', help: 'print this help' },
];

/** --enable-lora and its settings, or undefined without it. */
function loraOptions(flags: FlagReader): SimLoraOptions | undefined {
  if (!flags.boolean('enable-lora')) return undefined;
  const modules = new Map<string, string>();
  for (const entry of flags.list('lora-modules')) {
    const parsed = parseAdapterPair(entry, '');
    if (!parsed.ok) throw new UsageError(`--lora-modules: ${parsed.why}`);
    modules.set(parsed.value.name, parsed.value.path);
  }
  return {
    maxLoras: flags.number('max-loras') ?? 1,
    modules,
    loadDelayMs: flags.number('lora-load-delay-ms') ?? 0,
    missingPaths: new Set(flags.list('lora-missing-paths')),
    runtimeUpdating: flags.boolean('runtime-lora-updating'),
  };
}

function readPem(flags: FlagReader, name: string): string | undefined {
  const path = flags.string(name);
  if (path === undefined || path === '') return undefined;
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new UsageError(`--${name} ${path}: ${(err as Error).message}`);
  }
}

const SUMMARY = [
  'Run a simulated OpenAI-compatible inference engine (vLLM, SGLang or TGI flavour) for tests, demos and benchmarks.',
  'Phases: refusing connections -> listening but loading -> ready. Control it at runtime with POST /_sim/fault,',
  'GET /_sim/stats and POST /_sim/reset-stats. Flags can also be set as LLM_ROUTER_SIM_<FLAG> environment variables.',
].join('\n');

/** Maps parsed flags onto engine options. */
export function simOptionsFromFlags(flags: FlagReader): SimEngineOptions {
  const faultMode = (flags.string('fault') ?? 'none') as FaultMode;
  const fault: { -readonly [K in keyof Fault]: Fault[K] } = { mode: faultMode };
  const faultSeconds = flags.number('fault-seconds');
  const faultDelay = flags.number('fault-delay-ms');
  if (faultSeconds !== undefined) fault.seconds = faultSeconds;
  if (faultDelay !== undefined) fault.delayMs = faultDelay;
  const id = flags.string('id');
  const lora = loraOptions(flags);
  const cert = readPem(flags, 'tls-cert');
  const key = readPem(flags, 'tls-key');
  const clientCa = readPem(flags, 'tls-client-ca');
  if ((cert === undefined) !== (key === undefined)) throw new UsageError('--tls-cert and --tls-key go together');
  if (clientCa !== undefined && cert === undefined) throw new UsageError('--tls-client-ca needs --tls-cert and --tls-key');
  return {
    host: flags.string('host') ?? '127.0.0.1',
    port: flags.number('port') ?? 8000,
    models: flags.list('model'),
    kind: (flags.string('engine-kind') ?? 'vllm') as EngineKind,
    startupRefuseSeconds: flags.number('startup-refuse-seconds') ?? 0,
    startupLoadingSeconds: flags.number('startup-loading-seconds') ?? 0,
    ttftMs: flags.number('ttft-ms') ?? 20,
    itlMs: flags.number('itl-ms') ?? 5,
    outputTokens: flags.number('output-tokens') ?? 16,
    maxNumSeqs: flags.number('max-num-seqs') ?? 256,
    prefillMsPerToken: flags.number('prefill-ms-per-token') ?? 0,
    prefixCacheBlocks: flags.number('prefix-cache-blocks') ?? 4096,
    prefixBlockTokens: flags.number('prefix-block-tokens') ?? 16,
    embeddingDim: flags.number('embedding-dim') ?? 8,
    maxModelLen: flags.number('max-model-len') ?? 4096,
    ...(id !== undefined && id !== '' ? { id } : {}),
    ...(cert !== undefined && key !== undefined ? { tls: { cert, key, ...(clientCa !== undefined ? { clientCa } : {}) } } : {}),
    role: (flags.string('role') ?? 'both') as EndpointRole,
    pdProtocol: (flags.string('pd-protocol') ?? 'vllm-nixl') as PdProtocol,
    ...(lora ? { lora } : {}),
    fault,
  };
}

export async function runSim(argv: string[]): Promise<void> {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(usage('sim', SUMMARY, SIM_FLAGS) + '\n');
    return;
  }
  const flags = new FlagReader(parseFlags(argv, SIM_FLAGS, { env: process.env, envPrefix: 'LLM_ROUTER_SIM_' }));
  const options = simOptionsFromFlags(flags);
  if (options.models?.length === 0) throw new UsageError('--model needs at least one name');

  let engine: SimEngine | undefined;
  // a refused port has no open handle; this keeps the process alive until a signal arrives
  const keepAlive = setInterval(() => undefined, 1 << 30);
  const stop = (): void => {
    clearInterval(keepAlive);
    const closing = engine ? engine.close() : Promise.resolve();
    closing.then(
      () => process.exit(0),
      () => process.exit(0),
    );
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  engine = await startSimEngine(options);
  process.stdout.write(`sim listening on ${engine.url}\n`);
}
