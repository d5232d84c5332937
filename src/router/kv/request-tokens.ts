// The token ids an engine will compute for a request (its chat template included), for KV-aware routing to look up
// which engine's cache holds the request's leading blocks. Per model, either
//  - `engine` (the default): POST /tokenize to a ready endpoint of the model with the request's own prompt fields
//    (`prompt`, or `messages` and the template arguments the request carries), so the engine's own tokenizer and
//    template answer; whole answers are cached under a hash of the model and those fields;
//  - a tokenizer directory: the Hugging Face tokenizer in process (hf-tokenizer.ts), earlier turns of a conversation
//    reused: their rendering where the template allows (chat-prefix.ts), their ids piece by piece (token-cache.ts);
//  - `off`.
// Nothing here fails a request: a prompt it cannot tokenize, a slow or failing engine, comes back as a fallback reason
// (the policy then hashes the prefix instead and counts the reason).
import { createHash } from 'node:crypto';
import { Agent, request } from 'undici';
import { tlsConnectOptions, type EngineTls } from '../config/engine-tls.js';
import type { TraceSpan } from '../core/trace.js';
import { ENDPOINT, HTTP_REQUEST_METHOD, HTTP_RESPONSE_STATUS_CODE, SPAN, TOKENIZE_OUTCOME, URL_PATH } from '../tracing/attributes.js';
import { ChatPrefixCache, type ChatRenderer } from './chat-prefix.js';
import { type ChatRenderOptions, ChatTemplateError, HfTokenizer } from './hf-tokenizer.js';
import { ByteLru, type EncodeResume, SegmentedEncoder } from './token-cache.js';

/** `engine`, `off`, or the path of a tokenizer directory. */
export type TokenizerMode = string;

/** Why a request has no token ids; a small fixed set, fit for a metric label. */
export const TOKENIZE_FALLBACKS = [
  'off',
  'no-prompt',
  'unsupported-body',
  'too-large',
  'no-endpoint',
  'timeout',
  'engine-error',
  'backoff',
  'tokenizer-error',
] as const;
export type TokenizeFallback = (typeof TOKENIZE_FALLBACKS)[number];

export type TokenizeOutcome =
  | {
      /** shared with the caches: read them, never write to them */
      readonly tokens: Uint32Array;
      /** who computed them: the engine, the in-process tokenizer, or the request itself (a prompt of token ids) */
      readonly source: 'engine' | 'path' | 'request';
      /** engine: a cached answer; path: characters whose ids came from the cache */
      readonly cached: boolean;
      readonly fallback?: undefined;
    }
  | { readonly tokens?: undefined; readonly source?: undefined; readonly cached?: undefined; readonly fallback: TokenizeFallback };

/** An engine endpoint to ask (a catalog Endpoint fits). */
export interface TokenizeTarget {
  readonly url: string;
}

/**
 * One JSON POST to an engine; resolves with the status and the body text, rejects when the call fails or is aborted.
 * `extraHeaders` (flat [name, value, ...]): the call's trace context, when tracing is on.
 */
export type EnginePost = (
  url: string,
  body: string,
  signal: AbortSignal,
  extraHeaders?: readonly string[],
) => Promise<{ status: number; text: string }>;

export interface RequestTokenizerOptions {
  /** the default mode: `engine` (default), `off`, or a tokenizer directory */
  readonly mode?: TokenizerMode;
  /** per-model overrides of `mode` */
  readonly models?: Readonly<Record<string, TokenizerMode>>;
  /** engine mode: how long to wait for /tokenize (default 250 ms) */
  readonly timeoutMs?: number;
  /**
   * engine mode: after an endpoint timed out, failed to answer or answered 5xx, it is not asked for this long (default
   * 5 s; 0: always ask), so a stalled /tokenize costs one timeout per interval rather than one per request
   */
  readonly backoffMs?: number;
  /** the clock for backoff (default Date.now) */
  readonly now?: () => number;
  /** path mode: characters tokenized between two turns of the event loop (default 8 Ki; about 2-5 ms of work) */
  readonly sliceChars?: number;
  /** prompts longer than this many characters are not tokenized (default 2 Mi) */
  readonly maxPromptChars?: number;
  /** bytes each cache may hold: engine answers, and each tokenizer's pieces and rendered chats (default 64 MiB) */
  readonly cacheBytes?: number;
  /** the engine's tokenize path (default /tokenize, vLLM's and SGLang's) */
  readonly tokenizePath?: string;
  /** how to POST to an engine; default: undici with its own small agent (as the stats scraper does) */
  readonly post?: EnginePost;
  /** https engines, for the default `post` */
  readonly tls?: EngineTls;
  /** sent as a bearer token by the default `post` */
  readonly apiKey?: string;
}

/** A loaded tokenizer directory: its piece cache and its rendered-chat cache. */
interface InProcess {
  readonly encoder: SegmentedEncoder;
  /** rendered chats, each with where its ids can be resumed from */
  readonly chats: ChatPrefixCache<EncodeResume>;
}

/** Fields of a chat request that decide its tokens (vLLM's /tokenize takes them all). */
const CHAT_FIELDS = [
  'messages',
  'add_generation_prompt',
  'continue_final_message',
  'tools',
  'documents',
  'chat_template',
  'chat_template_kwargs',
  'add_special_tokens',
] as const;

export type PromptFields =
  | { readonly kind: 'chat'; readonly fields: Record<string, unknown>; readonly chars: number }
  | { readonly kind: 'prompt'; readonly fields: Record<string, unknown>; readonly chars: number }
  | { readonly kind: 'ids'; readonly tokens: Uint32Array }
  | { readonly kind: 'fallback'; readonly reason: TokenizeFallback };

/**
 * The fields of `body` that decide its tokens, unchanged: a chat's `messages` with the template arguments present, or
 * a completion's `prompt` (a string, a list of one string, or token ids) with `add_special_tokens`.
 */
export function promptFields(body: Readonly<Record<string, unknown>>): PromptFields {
  if (body.messages !== undefined) {
    if (!Array.isArray(body.messages) || body.messages.length === 0) return { kind: 'fallback', reason: 'unsupported-body' };
    const fields: Record<string, unknown> = {};
    for (const f of CHAT_FIELDS) if (body[f] !== undefined) fields[f] = body[f];
    return { kind: 'chat', fields, chars: charsOf(body.messages) + charsOf(body.tools) + charsOf(body.documents) };
  }
  let prompt = body.prompt;
  if (prompt === undefined) return { kind: 'fallback', reason: 'no-prompt' };
  if (Array.isArray(prompt)) {
    if (prompt.length > 0 && prompt.every((t) => Number.isInteger(t) && t >= 0 && t < 2 ** 32))
      return { kind: 'ids', tokens: Uint32Array.from(prompt as number[]) };
    // a batch of prompts has no one answer; a batch of one is that prompt
    if (prompt.length !== 1) return { kind: 'fallback', reason: 'unsupported-body' };
    prompt = prompt[0];
  }
  if (typeof prompt !== 'string') return { kind: 'fallback', reason: 'unsupported-body' };
  const fields: Record<string, unknown> = { prompt };
  if (body.add_special_tokens !== undefined) fields.add_special_tokens = body.add_special_tokens;
  return { kind: 'prompt', fields, chars: prompt.length };
}

/** Characters of every string in a value (iterative: any depth a client sends). */
function charsOf(value: unknown): number {
  let n = 0;
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === 'string') n += v.length;
    else if (Array.isArray(v)) for (const x of v) stack.push(x);
    else if (typeof v === 'object' && v !== null) for (const x of Object.values(v)) stack.push(x);
  }
  return n;
}

const DEFAULT_TIMEOUT_MS = 250;
const DEFAULT_BACKOFF_MS = 5_000;
const DEFAULT_MAX_PROMPT_CHARS = 2 * 1024 * 1024;
const DEFAULT_CACHE_BYTES = 64 * 1024 * 1024;
const MAX_ANSWER_BYTES = 64 * 1024 * 1024;

/** Tokenizes requests per model by its mode; see the file's header. */
export class RequestTokenizer {
  private readonly timeoutMs: number;
  private readonly maxPromptChars: number;
  private readonly cacheBytes: number;
  private readonly tokenizePath: string;
  private readonly post: EnginePost;
  private readonly agent: Agent | undefined;
  private readonly answers: ByteLru<Uint32Array>;
  private readonly inFlight = new Map<string, Promise<TokenizeOutcome>>();
  /** endpoint URL -> until when it is not asked */
  private readonly backoff = new Map<string, number>();
  private readonly backoffMs: number;
  private readonly now: () => number;
  private readonly sliceChars: number;
  private readonly encoders = new Map<string, Promise<InProcess | undefined>>();

  constructor(private readonly opts: RequestTokenizerOptions = {}) {
    this.timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.maxPromptChars = opts.maxPromptChars ?? DEFAULT_MAX_PROMPT_CHARS;
    this.cacheBytes = opts.cacheBytes ?? DEFAULT_CACHE_BYTES;
    this.tokenizePath = opts.tokenizePath ?? '/tokenize';
    this.backoffMs = opts.backoffMs ?? DEFAULT_BACKOFF_MS;
    this.now = opts.now ?? Date.now;
    this.sliceChars = opts.sliceChars ?? 8192;
    this.answers = new ByteLru<Uint32Array>(this.cacheBytes, (v) => v.byteLength);
    if (opts.post) this.post = opts.post;
    else {
      const made = undiciEnginePost({ ...(opts.tls ? { tls: opts.tls } : {}), ...(opts.apiKey ? { apiKey: opts.apiKey } : {}) });
      this.agent = made.agent;
      this.post = made.post;
    }
  }

  /** The mode a model is tokenized in. */
  modeOf(model: string): TokenizerMode {
    return this.opts.models?.[model] ?? this.opts.mode ?? 'engine';
  }

  /**
   * The request's token ids, or why not. `target` is the engine endpoint to ask in engine mode (a ready endpoint of
   * the model); it is not used in the other modes.
   */
  async tokenize(
    model: string,
    body: Readonly<Record<string, unknown>>,
    target?: TokenizeTarget,
    /** tracing on: the parent of the /tokenize call's CLIENT span */
    trace?: TraceSpan,
    /** the mode to use instead of the model's from the options (what the model's source names) */
    as?: TokenizerMode,
  ): Promise<TokenizeOutcome> {
    const mode = as ?? this.modeOf(model);
    if (mode === 'off') return { fallback: 'off' };
    const p = promptFields(body);
    if (p.kind === 'fallback') return { fallback: p.reason };
    if (p.kind === 'ids') return { tokens: p.tokens, source: 'request', cached: false };
    if (p.chars > this.maxPromptChars) return { fallback: 'too-large' };
    return mode === 'engine' ? this.viaEngine(model, p, target, trace) : this.inProcess(mode, p);
  }

  /**
   * Loads a tokenizer directory ahead of the first request (path mode loads on first use otherwise). A directory that
   * does not load is not tried again: its models get `tokenizer-error` until the process restarts.
   */
  async preload(dir: string): Promise<boolean> {
    return (await this.inProcessFor(dir)) !== undefined;
  }

  /** Bytes held by the engine-answer cache. */
  get engineCacheBytes(): number {
    return this.answers.bytes;
  }

  /** The piece cache of a loaded tokenizer directory (for stats and tests). */
  async encoder(dir: string): Promise<SegmentedEncoder | undefined> {
    return (await this.inProcessFor(dir))?.encoder;
  }

  /** The rendered-chat cache of a loaded tokenizer directory (for stats and tests). */
  async chats(dir: string): Promise<ChatPrefixCache<EncodeResume> | undefined> {
    return (await this.inProcessFor(dir))?.chats;
  }

  async close(): Promise<void> {
    await this.agent?.destroy().catch(() => undefined);
  }

  private async inProcess(dir: string, p: PromptFields & { kind: 'chat' | 'prompt' }): Promise<TokenizeOutcome> {
    const tokenizer = await this.inProcessFor(dir);
    if (!tokenizer) return { fallback: 'tokenizer-error' };
    const { encoder, chats } = tokenizer;
    try {
      if (p.kind === 'prompt') {
        const { text, addSpecialTokens } = promptText(chats, p);
        // what is not cached is tokenized in slices, the event loop served between them
        const { ids, reusedChars } = await encoder.encodeAsync(text, addSpecialTokens, this.sliceChars);
        return { tokens: ids, source: 'path', cached: reusedChars > 0 };
      }
      // a chat: its ids resume where those of the remembered rendering it starts with ended (those characters are not
      // walked again), and it leaves such a point on its own rendering for the next turn
      const chat = chats.render(p.fields.messages as unknown[], chatOptions(p.fields));
      const { ids, reusedChars, resume } = await encoder.encodeAsync(chat.text, p.fields.add_special_tokens === true, this.sliceChars, {
        resume: chat.prefix?.attached,
        keepAt: chat.ownChars,
      });
      if (resume) chat.attach(resume, resume.ids.buffer.byteLength);
      return { tokens: ids, source: 'path', cached: reusedChars > 0 };
    } catch (err) {
      return { fallback: err instanceof ChatTemplateError ? 'unsupported-body' : 'tokenizer-error' };
    }
  }

  private inProcessFor(dir: string): Promise<InProcess | undefined> {
    let e = this.encoders.get(dir);
    if (!e) {
      e = HfTokenizer.load(dir).then(
        (t) => {
          const chats = new ChatPrefixCache<EncodeResume>(t, this.cacheBytes);
          // the template checks run at load, not on the first request
          chats.prepare();
          return { encoder: new SegmentedEncoder(t, this.cacheBytes), chats };
        },
        () => undefined,
      );
      this.encoders.set(dir, e);
    }
    return e;
  }

  private viaEngine(
    model: string,
    p: PromptFields & { kind: 'chat' | 'prompt' },
    target: TokenizeTarget | undefined,
    trace: TraceSpan | undefined,
  ): Promise<TokenizeOutcome> {
    const payload = JSON.stringify({ model, ...p.fields });
    const key = createHash('sha256').update(payload).digest('base64');
    const hit = this.answers.get(key);
    if (hit) return Promise.resolve({ tokens: hit, source: 'engine', cached: true });
    if (!target) return Promise.resolve({ fallback: 'no-endpoint' });
    const until = this.backoff.get(target.url);
    if (until !== undefined) {
      if (this.now() < until) return Promise.resolve({ fallback: 'backoff' });
      this.backoff.delete(target.url);
    }
    let pending = this.inFlight.get(key);
    if (!pending) {
      pending = this.ask(target, payload, key, trace).finally(() => this.inFlight.delete(key));
      this.inFlight.set(key, pending);
    }
    return pending;
  }

  private async ask(target: TokenizeTarget, payload: string, key: string, trace: TraceSpan | undefined): Promise<TokenizeOutcome> {
    const span = trace?.child(SPAN.tokenize, 'client', {
      [ENDPOINT]: target.url,
      [HTTP_REQUEST_METHOD]: 'POST',
      [URL_PATH]: this.tokenizePath,
    });
    const outcome = await this.askEngine(target, payload, key, span);
    if (span) {
      span.set(TOKENIZE_OUTCOME, outcome.fallback ?? 'tokens');
      if (outcome.fallback !== undefined) span.fail(outcome.fallback);
      span.end();
    }
    return outcome;
  }

  private async askEngine(target: TokenizeTarget, payload: string, key: string, span: TraceSpan | undefined): Promise<TokenizeOutcome> {
    const ac = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      ac.abort();
    }, this.timeoutMs);
    try {
      const url = target.url + this.tokenizePath;
      const res = await (span ? this.post(url, payload, ac.signal, span.propagation()) : this.post(url, payload, ac.signal));
      span?.set(HTTP_RESPONSE_STATUS_CODE, res.status);
      if (res.status >= 500) this.backOff(target);
      if (res.status !== 200) return { fallback: 'engine-error' };
      const tokens = tokensOfAnswer(res.text);
      if (!tokens) return { fallback: 'engine-error' };
      this.answers.set(key, tokens);
      return { tokens, source: 'engine', cached: false };
    } catch {
      this.backOff(target);
      return { fallback: timedOut ? 'timeout' : 'engine-error' };
    } finally {
      clearTimeout(timer);
    }
  }

  private backOff(target: TokenizeTarget): void {
    if (this.backoffMs <= 0) return;
    // bounded: endpoints come and go; an old entry is dropped when it is next read or when the map grows large
    if (this.backoff.size >= 4096) this.backoff.clear();
    this.backoff.set(target.url, this.now() + this.backoffMs);
  }
}

/**
 * The text an in-process tokenizer tokenizes for a prompt, and whether with added special tokens, as vLLM does it: a
 * chat rendered through the template (vLLM's defaults: the generation prompt on, no added special tokens unless
 * `add_special_tokens`), a prompt with the special tokens added unless `add_special_tokens` is false. Throws
 * ChatTemplateError for a chat the template cannot render.
 */
export function promptText(
  tokenizer: ChatRenderer,
  p: PromptFields & { kind: 'chat' | 'prompt' },
): { text: string; addSpecialTokens: boolean } {
  const f = p.fields;
  if (p.kind === 'prompt') return { text: f.prompt as string, addSpecialTokens: f.add_special_tokens !== false };
  const text = tokenizer.renderChat(f.messages as unknown[], chatOptions(f));
  return { text, addSpecialTokens: f.add_special_tokens === true };
}

/** The template arguments of a chat's prompt fields. */
function chatOptions(f: Readonly<Record<string, unknown>>): ChatRenderOptions {
  return {
    add_generation_prompt: optBool(f.add_generation_prompt),
    continue_final_message: optBool(f.continue_final_message),
    tools: Array.isArray(f.tools) ? f.tools : null,
    documents: Array.isArray(f.documents) ? f.documents : null,
    chat_template: typeof f.chat_template === 'string' ? f.chat_template : null,
    chat_template_kwargs: isRecord(f.chat_template_kwargs) ? f.chat_template_kwargs : null,
  };
}

/** A prompt's ids with an in-process tokenizer, at once (see promptText). */
export function encodeInProcess(encoder: SegmentedEncoder, p: PromptFields & { kind: 'chat' | 'prompt' }): Uint32Array {
  const { text, addSpecialTokens } = promptText(encoder.tokenizer, p);
  return encoder.encode(text, addSpecialTokens);
}

/** The `tokens` of a /tokenize answer, when they are all token ids. */
export function tokensOfAnswer(text: string): Uint32Array | undefined {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return undefined;
  }
  const tokens = (json as { tokens?: unknown } | null)?.tokens;
  if (!Array.isArray(tokens)) return undefined;
  const out = new Uint32Array(tokens.length);
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i];
    if (!Number.isInteger(t) || t < 0 || t >= 2 ** 32) return undefined;
    out[i] = t;
  }
  return out;
}

/** The default EnginePost: undici's `request` over an agent of its own, as the stats scraper and the probes call engines. */
export function undiciEnginePost(opts: { tls?: EngineTls; apiKey?: string; connections?: number } = {}): {
  post: EnginePost;
  agent: Agent;
} {
  const agent = new Agent({
    connections: opts.connections ?? 8,
    pipelining: 1,
    keepAliveTimeout: 10_000,
    ...(opts.tls ? { connect: tlsConnectOptions(opts.tls) } : {}),
  });
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json' };
  if (opts.apiKey) headers.authorization = `Bearer ${opts.apiKey}`;
  const post: EnginePost = async (url, body, signal, extraHeaders) => {
    let sent = headers;
    if (extraHeaders !== undefined && extraHeaders.length > 0) {
      sent = { ...headers };
      for (let i = 0; i + 1 < extraHeaders.length; i += 2) sent[extraHeaders[i] as string] = extraHeaders[i + 1] as string;
    }
    const res = await request(url, { method: 'POST', headers: sent, body, dispatcher: agent, signal });
    if (Number(res.headers['content-length'] ?? 0) > MAX_ANSWER_BYTES) {
      await res.body.dump();
      return { status: 502, text: '' };
    }
    return { status: res.statusCode, text: await res.body.text() };
  };
  return { post, agent };
}

function optBool(v: unknown): boolean | undefined {
  return typeof v === 'boolean' ? v : undefined;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
