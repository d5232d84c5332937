// The `llm-router sim` flag table: the one place each simulator setting and its default is written. The command line
// and startSimEngine (whose callers give only what they change) both take their defaults from it.
import { readFileSync } from 'node:fs';
import { UsageError, parseFlags, type FlagSpec, type FlagValues } from '../../router/config/flags.js';
import type { SimEngineOptions, SimSettings } from './engine-api.js';
import { FAULT_MODES, type Fault } from './types.js';
import { ENGINE_KINDS } from '../../router/core/engine.js';
import { ENDPOINT_ROLES, PD_PROTOCOLS } from '../../router/core/pd.js';
import { parseAdapterPair } from '../../router/core/lora.js';
import type { SimLoraOptions } from './lora.js';
import { KV_EVENT_ENCODINGS, KV_EVENT_HASH_KINDS, type SimKvEventsOptions } from './types.js';

export const SIM_FLAGS = [
  { name: 'host', kind: 'string', default: '127.0.0.1', help: 'address to listen on' },
  { name: 'port', kind: 'int', default: 8000, min: 0, help: 'port to listen on; 0 picks a free port' },
  { name: 'model', kind: 'list', default: ['sim-model'], help: 'served model names, comma separated' },
  {
    name: 'model-root',
    kind: 'string',
    help: "what the models are loaded from, as vLLM's `vllm serve REPO --served-model-name NAME` reports it: `root` in /v1/models; with --engine-kind sglang `model_path` and `tokenizer_path` in /get_model_info (a Hub repo id such as Qwen/Qwen3-8B, or a path); unset: each model's own name",
  },
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
  {
    name: 'prefill-stalls-decode',
    kind: 'boolean',
    default: false,
    help: "prefills run one at a time, and running streams' next tokens wait while one runs (no chunked prefill); off: each request has its own timers",
  },
  {
    name: 'num-gpu-blocks',
    kind: 'int',
    default: 0,
    min: 0,
    help: "the KV cache's size in blocks of --kv-block-size tokens (vLLM's num_gpu_blocks): running sequences hold their prompt's and generated tokens' blocks (vllm:kv_cache_usage_perc), and a request waits until its blocks fit; 0: room for --max-num-seqs sequences of --max-model-len tokens (only the slots limit the batch)",
  },
  {
    name: 'prefix-cache-blocks',
    kind: 'int',
    default: 4096,
    min: 0,
    help: 'prefix cache capacity in blocks (LRU; 0 = no prefix caching), at most --num-gpu-blocks',
  },
  {
    name: 'kv-block-size',
    aliases: ['prefix-block-tokens'],
    kind: 'int',
    default: 16,
    min: 1,
    help: "tokens per KV-cache block (vLLM's --block-size): the prefix cache's and the KV-cache events' unit",
  },
  {
    name: 'kv-events-port',
    kind: 'int',
    min: 0,
    help: 'publish KV-cache events as vLLM does, on a ZMQ PUB socket on this port of --host (0 picks a free one); unset: no events',
  },
  {
    name: 'kv-events-replay-port',
    kind: 'int',
    min: 0,
    help: 'with --kv-events-port: the ZMQ ROUTER socket that replays buffered batches (0 picks a free one); unset: no replay',
  },
  {
    name: 'kv-events-encoding',
    kind: 'string',
    default: 'map',
    choices: KV_EVENT_ENCODINGS,
    help: 'with --kv-events-port: map (vLLM > 0.26: tagged maps) or array (vLLM <= 0.26: array-like structs)',
  },
  {
    name: 'kv-events-hashes',
    kind: 'string',
    default: 'int',
    choices: KV_EVENT_HASH_KINDS,
    help: 'with --kv-events-port: block hashes as uint64 (int) or the 32 raw sha256 bytes (bytes)',
  },
  { name: 'kv-events-topic', kind: 'string', default: '', help: 'with --kv-events-port: the topic frame of every message' },
  {
    name: 'kv-events-buffer-steps',
    kind: 'int',
    default: 10000,
    min: 1,
    help: "with --kv-events-port: batches kept for replay (vLLM's buffer_steps)",
  },
  {
    name: 'tokenizer',
    kind: 'string',
    help: 'a Hugging Face tokenizer directory (tokenizer.json, tokenizer_config.json with its chat_template): prompts, chats, the prefix cache, KV-cache events and /tokenize use its ids; unset: the word-level tokenizer',
  },
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
  {
    name: 'enable-lora',
    kind: 'boolean',
    default: false,
    help: 'serve LoRA adapters, as vLLM or SGLang (--engine-kind) with --enable-lora',
  },
  {
    name: 'max-loras',
    kind: 'int',
    default: 1,
    min: 1,
    help: 'with --enable-lora: adapters running in one batch at most (requests for another wait); reported as max_lora',
  },
  { name: 'lora-modules', kind: 'list', default: [], help: 'with --enable-lora: adapters loaded at start, NAME=PATH comma separated' },
  {
    name: 'lora-load-delay-ms',
    kind: 'number',
    default: 0,
    min: 0,
    help: 'with --enable-lora: how long a load takes (the engine reads one adapter at a time)',
  },
  {
    name: 'lora-missing-paths',
    kind: 'list',
    default: [],
    help: "with --enable-lora: lora_path values with no adapter: loading them answers vLLM's 404 (No adapter found)",
  },
  {
    name: 'max-loaded-loras',
    kind: 'int',
    default: 0,
    min: 0,
    help: "with --enable-lora and --engine-kind sglang: adapters registered at most (SGLang's --max-loaded-loras; 0: no limit); a load beyond is a 400",
  },
  {
    name: 'runtime-lora-updating',
    kind: 'boolean',
    default: true,
    help: 'with --enable-lora, vLLM: serve POST /v1/load_lora_adapter and /v1/unload_lora_adapter (VLLM_ALLOW_RUNTIME_LORA_UPDATING); false: they are 404',
  },
  {
    name: 'otel-endpoint',
    kind: 'string',
    help: "export a SERVER span per request (continuing the caller's traceparent) to this OTLP endpoint, as serve's --otel-endpoint: HOST:PORT (gRPC) or an http(s) URL",
  },
  { name: 'otel-service-name', kind: 'string', default: 'llm-router-sim', help: "with --otel-endpoint: the spans' service.name" },
  { name: 'otel-secure', kind: 'boolean', default: false, help: 'with --otel-endpoint HOST:PORT: talk TLS' },
  { name: 'help', kind: 'boolean', help: 'print this help' },
] as const satisfies readonly FlagSpec[];

export type SimFlagValues = FlagValues<typeof SIM_FLAGS>;

function readPem(flags: SimFlagValues, name: 'tls-cert' | 'tls-key' | 'tls-client-ca'): string | undefined {
  const path = flags[name];
  if (path === undefined || path === '') return undefined;
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new UsageError(`--${name} ${path}: ${(err as Error).message}`);
  }
}

/** --enable-lora and its settings, or undefined without it. */
function loraOptions(flags: SimFlagValues): SimLoraOptions | undefined {
  if (!flags['enable-lora']) return undefined;
  if (flags['max-loaded-loras'] > 0 && flags['engine-kind'] !== 'sglang')
    throw new UsageError('--max-loaded-loras is an SGLang setting: it needs --engine-kind sglang');
  const modules = new Map<string, string>();
  for (const entry of flags['lora-modules']) {
    const parsed = parseAdapterPair(entry, '');
    if (!parsed.ok) throw new UsageError(`--lora-modules: ${parsed.why}`);
    modules.set(parsed.value.name, parsed.value.path);
  }
  return {
    maxLoras: flags['max-loras'],
    modules,
    loadDelayMs: flags['lora-load-delay-ms'],
    missingPaths: new Set(flags['lora-missing-paths']),
    runtimeUpdating: flags['runtime-lora-updating'],
    maxLoaded: flags['max-loaded-loras'],
  };
}

/** --kv-events-port and its settings, or undefined without it. */
function kvEventsOptions(flags: SimFlagValues): SimKvEventsOptions | undefined {
  const port = flags['kv-events-port'];
  const replayPort = flags['kv-events-replay-port'];
  if (port === undefined) {
    if (replayPort !== undefined) throw new UsageError('--kv-events-replay-port needs --kv-events-port');
    return undefined;
  }
  return {
    port,
    ...(replayPort !== undefined ? { replayPort } : {}),
    encoding: flags['kv-events-encoding'],
    hashes: flags['kv-events-hashes'],
    topic: flags['kv-events-topic'],
    bufferSteps: flags['kv-events-buffer-steps'],
  };
}

/** Maps parsed flags onto engine options; the table holds every default. */
export function simOptionsFromFlags(flags: SimFlagValues): SimSettings {
  const fault: { -readonly [K in keyof Fault]: Fault[K] } = { mode: flags.fault };
  if (flags['fault-seconds'] !== undefined) fault.seconds = flags['fault-seconds'];
  if (flags['fault-delay-ms'] !== undefined) fault.delayMs = flags['fault-delay-ms'];
  const id = flags.id;
  const cert = readPem(flags, 'tls-cert');
  const key = readPem(flags, 'tls-key');
  const clientCa = readPem(flags, 'tls-client-ca');
  const lora = loraOptions(flags);
  const kvEvents = kvEventsOptions(flags);
  if ((cert === undefined) !== (key === undefined)) throw new UsageError('--tls-cert and --tls-key go together');
  if (clientCa !== undefined && cert === undefined) throw new UsageError('--tls-client-ca needs --tls-cert and --tls-key');
  return {
    host: flags.host,
    port: flags.port,
    models: flags.model,
    kind: flags['engine-kind'],
    startupRefuseSeconds: flags['startup-refuse-seconds'],
    startupLoadingSeconds: flags['startup-loading-seconds'],
    ttftMs: flags['ttft-ms'],
    itlMs: flags['itl-ms'],
    outputTokens: flags['output-tokens'],
    maxNumSeqs: flags['max-num-seqs'],
    prefillMsPerToken: flags['prefill-ms-per-token'],
    prefixCacheBlocks: flags['prefix-cache-blocks'],
    numGpuBlocks: flags['num-gpu-blocks'],
    prefillStallsDecode: flags['prefill-stalls-decode'],
    prefixBlockTokens: flags['kv-block-size'],
    embeddingDim: flags['embedding-dim'],
    maxModelLen: flags['max-model-len'],
    ...(id !== undefined && id !== '' ? { id } : {}),
    ...(flags['model-root'] !== undefined && flags['model-root'].trim() !== '' ? { modelRoot: flags['model-root'].trim() } : {}),
    ...(cert !== undefined && key !== undefined ? { tls: { cert, key, ...(clientCa !== undefined ? { clientCa } : {}) } } : {}),
    role: flags.role,
    pdProtocol: flags['pd-protocol'],
    fault,
    ...(lora ? { lora } : {}),
    ...(kvEvents ? { kvEvents } : {}),
  };
}

/** Every setting of an engine started in code: what the caller gave, else the table's default (port: any free one). */
export function simSettings(options: SimEngineOptions): SimSettings {
  const d = TABLE_DEFAULTS;
  return {
    host: options.host ?? d.host,
    port: options.port ?? 0,
    models: options.models !== undefined && options.models.length > 0 ? options.models : d.models,
    kind: options.kind ?? d.kind,
    startupRefuseSeconds: options.startupRefuseSeconds ?? d.startupRefuseSeconds,
    startupLoadingSeconds: options.startupLoadingSeconds ?? d.startupLoadingSeconds,
    ttftMs: options.ttftMs ?? d.ttftMs,
    itlMs: options.itlMs ?? d.itlMs,
    outputTokens: options.outputTokens ?? d.outputTokens,
    maxNumSeqs: options.maxNumSeqs ?? d.maxNumSeqs,
    embeddingDim: options.embeddingDim ?? d.embeddingDim,
    maxModelLen: options.maxModelLen ?? d.maxModelLen,
    prefillMsPerToken: options.prefillMsPerToken ?? d.prefillMsPerToken,
    prefixCacheBlocks: options.prefixCacheBlocks ?? d.prefixCacheBlocks,
    numGpuBlocks: options.numGpuBlocks ?? d.numGpuBlocks,
    prefillStallsDecode: options.prefillStallsDecode ?? d.prefillStallsDecode,
    prefixBlockTokens: options.prefixBlockTokens ?? d.prefixBlockTokens,
    role: options.role ?? d.role,
    pdProtocol: options.pdProtocol ?? d.pdProtocol,
    fault: options.fault ?? d.fault,
    ...(options.id !== undefined ? { id: options.id } : {}),
    ...(options.modelRoot !== undefined ? { modelRoot: options.modelRoot } : {}),
    ...(options.tls !== undefined ? { tls: options.tls } : {}),
    ...(options.lora !== undefined ? { lora: { ...LORA_DEFAULTS, ...options.lora } } : {}),
    ...(options.kvEvents !== undefined ? { kvEvents: { ...KV_EVENTS_DEFAULTS, ...options.kvEvents } } : {}),
    ...(options.tokenizer !== undefined ? { tokenizer: options.tokenizer } : {}),
    ...(options.tracer !== undefined ? { tracer: options.tracer } : {}),
  };
}

/**
 * The KV pool's blocks (num_gpu_blocks): --num-gpu-blocks, or when 0 enough for --max-num-seqs sequences of
 * --max-model-len tokens, and never fewer than the prefix cache's (the cache lives in the pool).
 */
export function kvPoolBlocks(
  s: Pick<SimSettings, 'numGpuBlocks' | 'maxNumSeqs' | 'maxModelLen' | 'prefixBlockTokens' | 'prefixCacheBlocks'>,
): number {
  if (s.numGpuBlocks > 0) return s.numGpuBlocks;
  return Math.max(s.prefixCacheBlocks, Math.ceil((s.maxNumSeqs * s.maxModelLen) / Math.max(1, s.prefixBlockTokens)), 1);
}

const TABLE_DEFAULTS = simOptionsFromFlags(parseFlags([], SIM_FLAGS).values);
const KV_EVENTS_DEFAULTS = kvEventsOptions({ ...parseFlags([], SIM_FLAGS).values, 'kv-events-port': 0 }) as SimKvEventsOptions;
const LORA_DEFAULTS = loraOptions({ ...parseFlags([], SIM_FLAGS).values, 'enable-lora': true }) as SimLoraOptions;
