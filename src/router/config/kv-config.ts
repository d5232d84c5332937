// The KV-cache-aware routing settings: where each engine's KV-cache events come from and how a request's token ids
// are found. Static backends name their publishers in two lists zipped with --static-backends (an empty item = none);
// Kubernetes pods get theirs from --kv-events-port / --kv-events-replay-port or their annotations (discovery). The
// tokenizer settings, and where a tokenizer named by Hub repo is fetched from: the Hub's own variables (HF_ENDPOINT,
// HF_TOKEN or --hf-token-file, HF_HOME / HF_HUB_CACHE, HF_HUB_OFFLINE), read here once.
import { readFileSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';
import type { KvEventsSource } from '../core/endpoint.js';
import { parseTokenizerValue, type TokenizerSpec } from '../core/tokenizer.js';
import { UsageError } from './flags.js';

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
  /** --tokenizer: auto (the model the engines serve), engine, off, a Hub repo or a tokenizer directory */
  readonly tokenizer: TokenizerSpec;
  /** --tokenizers: per model, engine, off, a Hub repo or a directory (never auto) */
  readonly tokenizers: ReadonlyMap<string, TokenizerSpec>;
  readonly tokenizerTimeoutMs: number;
  /** prompts longer than this many characters (or chats rendering longer) are not tokenized */
  readonly tokenizerMaxChars: number;
  /** chats carrying their own chat_template are tokenized (else they fall back, unsupported-body) */
  readonly trustRequestChatTemplate: boolean;
  /** where tokenizers named by Hub repo come from */
  readonly hub: HubConfig;
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
  readonly 'hf-token-file'?: string | undefined;
}

/** The Hugging Face Hub as the router reaches it, from the Hub's own variables (as its Python and JS clients read them). */
export interface HubConfig {
  /** HF_ENDPOINT (a mirror), else the public Hub; no trailing slash */
  readonly endpoint: string;
  /** HF_TOKEN, or the first line of --hf-token-file (for gated and private repos); never logged */
  readonly token: string | undefined;
  /** HF_HUB_CACHE, else HUGGINGFACE_HUB_CACHE, else HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub */
  readonly cacheDir: string;
  /** HF_HUB_OFFLINE=1: the cache only, no network at all */
  readonly offline: boolean;
}

const PUBLIC_HUB = 'https://huggingface.co';

/** Truthy the way huggingface_hub reads its boolean variables (1, ON, YES, TRUE). */
function envFlag(value: string | undefined): boolean {
  return ['1', 'on', 'yes', 'true'].includes((value ?? '').trim().toLowerCase());
}

/** The Hub's cache directory, in the precedence huggingface_hub (and @huggingface/hub's getHFHubCachePath) uses. */
export function hubCacheDir(env: Readonly<Record<string, string | undefined>>): string {
  const home = env.HF_HOME || path.join(env.XDG_CACHE_HOME || path.join(homedir(), '.cache'), 'huggingface');
  return env.HF_HUB_CACHE || env.HUGGINGFACE_HUB_CACHE || path.join(home, 'hub');
}

function readTokenFile(file: string): string {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new UsageError(`--hf-token-file ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  const token = text.split(/\r?\n/)[0]?.trim() ?? '';
  if (token === '') throw new UsageError(`--hf-token-file ${file}: the file is empty`);
  return token;
}

export function hubConfig(v: Pick<KvFlagValues, 'hf-token-file'>, env: Readonly<Record<string, string | undefined>>): HubConfig {
  const raw = (env.HF_ENDPOINT ?? '').trim() || PUBLIC_HUB;
  let endpoint: URL;
  try {
    endpoint = new URL(raw);
  } catch {
    throw new UsageError(`HF_ENDPOINT=${JSON.stringify(raw)} is not a URL; use e.g. https://hf-mirror.example`);
  }
  if (endpoint.protocol !== 'http:' && endpoint.protocol !== 'https:')
    throw new UsageError(`HF_ENDPOINT=${JSON.stringify(raw)} must be an http(s) URL`);
  const file = v['hf-token-file'] || undefined;
  const token = file !== undefined ? readTokenFile(file) : (env.HF_TOKEN || env.HUGGING_FACE_HUB_TOKEN || '').trim() || undefined;
  return { endpoint: raw.replace(/\/+$/, ''), token, cacheDir: hubCacheDir(env), offline: envFlag(env.HF_HUB_OFFLINE) };
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

/** A directory here: a bare `org/name` that is one is a directory, not a Hub repo. */
function isDirectory(p: string): boolean {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
}

function parseTokenizers(pairs: readonly string[]): Map<string, TokenizerSpec> {
  const out = new Map<string, TokenizerSpec>();
  for (const pair of pairs) {
    const idx = pair.indexOf('=');
    const model = pair.slice(0, idx).trim();
    const where = pair.slice(idx + 1).trim();
    if (idx <= 0 || model === '' || where === '')
      throw new UsageError(
        `--tokenizers: ${JSON.stringify(pair)} must look like MODEL=engine, MODEL=off, MODEL=PATH or MODEL=hf:REPO[@REVISION]`,
      );
    const parsed = parseTokenizerValue(where, { isDirectory });
    if (!parsed.ok) throw new UsageError(`--tokenizers: ${JSON.stringify(pair)}: ${parsed.why}`);
    out.set(model, parsed.spec);
  }
  return out;
}

export function kvConfig(v: KvFlagValues, env: Readonly<Record<string, string | undefined>> = {}): KvConfig {
  const parsed = parseTokenizerValue(v.tokenizer.trim() || 'auto', { allowAuto: true, isDirectory });
  if (!parsed.ok) throw new UsageError(`--tokenizer ${JSON.stringify(v.tokenizer)}: ${parsed.why}`);
  const tokenizer = parsed.spec;
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
    hub: hubConfig(v, env),
    pendingMs: Math.round(v['kv-pending-seconds'] * 1000),
  };
}
