// The KV-cache-aware routing settings: where each engine's KV-cache events come from and how a request's token ids
// are found. Static backends name their publishers in two lists zipped with --static-backends (an empty item = none);
// Kubernetes pods get theirs from --kv-events-port / --kv-events-replay-port or their annotations (discovery).
import type { KvEventsSource } from '../core/endpoint.js';
import { UsageError } from './flags.js';
import { ENGINE_TOKENIZER } from './router-flags.js';

export interface KvConfig {
  /** Kubernetes: the publisher port on each pod IP, unless annotated */
  readonly eventsPort: number;
  /** Kubernetes: the replay port, unless annotated; undefined = none */
  readonly replayPort: number | undefined;
  /** '' = every topic */
  readonly topic: string;
  /** tokens per block when neither the events nor the engine's metrics say */
  readonly blockSize: number;
  /** blocks indexed per endpoint when its num_gpu_blocks is unknown */
  readonly maxBlocksPerEndpoint: number;
  /** 'engine' or a Hugging Face tokenizer directory */
  readonly tokenizer: string;
  /** model -> 'engine' or a directory */
  readonly tokenizers: ReadonlyMap<string, string>;
  readonly tokenizerTimeoutMs: number;
  /** prompts longer than this many characters (or chats rendering longer) are not tokenized */
  readonly tokenizerMaxChars: number;
  /** chats carrying their own chat_template are tokenized (else they fall back, unsupported-body) */
  readonly trustRequestChatTemplate: boolean;
  /** how long a prompt just sent counts as held by its engine before its events say so; 0 = never */
  readonly pendingMs: number;
}

export interface KvFlagValues {
  readonly 'static-backend-kv-events'?: string | undefined;
  readonly 'static-backend-kv-replay'?: string | undefined;
  readonly 'kv-events-port': number;
  readonly 'kv-events-replay-port'?: number | undefined;
  readonly 'kv-events-topic': string;
  readonly 'kv-block-size': number;
  readonly 'kv-index-max-blocks': number;
  readonly tokenizer: string;
  readonly tokenizers: readonly string[];
  readonly 'tokenizer-timeout-ms': number;
  readonly 'tokenizer-max-chars': number;
  readonly 'trust-request-chat-template': boolean;
  readonly 'kv-pending-seconds': number;
}

/** Splits a zipped list keeping empty items: "tcp://a:1,,tcp://c:1" is three backends, the second without. */
function zippedItems(raw: string | undefined): string[] {
  if (raw === undefined || raw.trim() === '') return [];
  return raw.split(',').map((s) => s.trim());
}

function zmqTcpUrl(flag: string, raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new UsageError(`${flag}: ${JSON.stringify(raw)} is not a URL; use tcp://HOST:PORT`);
  }
  if (url.protocol !== 'tcp:' || url.hostname === '' || url.port === '' || url.pathname.replace(/\/+$/, '') !== '')
    throw new UsageError(`${flag}: ${JSON.stringify(raw)} must look like tcp://HOST:PORT`);
  return `tcp://${url.hostname}:${url.port}`;
}

/**
 * The KV-cache event source of each static backend URL (as zipped with --static-backends; a URL listed twice takes
 * its first non-empty entry).
 */
export function staticKvEvents(backendUrls: readonly string[], v: KvFlagValues): Map<string, KvEventsSource> {
  const events = zippedItems(v['static-backend-kv-events']);
  const replay = zippedItems(v['static-backend-kv-replay']);
  for (const [flag, list] of [
    ['--static-backend-kv-events', events],
    ['--static-backend-kv-replay', replay],
  ] as const) {
    if (list.length > 0 && list.length !== backendUrls.length)
      throw new UsageError(
        `--static-backends has ${backendUrls.length} URL(s) but ${flag} has ${list.length} item(s); they are zipped one to one (an empty item = none)`,
      );
  }
  const out = new Map<string, KvEventsSource>();
  backendUrls.forEach((raw, i) => {
    const url = raw.replace(/\/+$/, '');
    const ev = events[i] ?? '';
    const rp = replay[i] ?? '';
    if (rp !== '' && ev === '')
      throw new UsageError(`--static-backend-kv-replay: ${url} has a replay socket but no --static-backend-kv-events entry`);
    if (ev === '' || out.has(url)) return;
    out.set(url, {
      eventsUrls: [zmqTcpUrl('--static-backend-kv-events', ev)],
      replayUrls: [rp === '' ? undefined : zmqTcpUrl('--static-backend-kv-replay', rp)],
    });
  });
  return out;
}

function parseTokenizers(pairs: readonly string[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const pair of pairs) {
    const idx = pair.indexOf('=');
    const model = pair.slice(0, idx).trim();
    const where = pair.slice(idx + 1).trim();
    if (idx <= 0 || model === '' || where === '')
      throw new UsageError(`--tokenizers: ${JSON.stringify(pair)} must look like MODEL=${ENGINE_TOKENIZER} or MODEL=PATH`);
    out.set(model, where);
  }
  return out;
}

export function kvConfig(v: KvFlagValues): KvConfig {
  const tokenizer = v.tokenizer.trim() || ENGINE_TOKENIZER;
  return {
    eventsPort: v['kv-events-port'],
    replayPort: v['kv-events-replay-port'],
    topic: v['kv-events-topic'],
    blockSize: v['kv-block-size'],
    maxBlocksPerEndpoint: v['kv-index-max-blocks'],
    tokenizer,
    tokenizers: parseTokenizers(v.tokenizers),
    tokenizerTimeoutMs: v['tokenizer-timeout-ms'],
    tokenizerMaxChars: v['tokenizer-max-chars'],
    trustRequestChatTemplate: v['trust-request-chat-template'],
    pendingMs: Math.round(v['kv-pending-seconds'] * 1000),
  };
}
