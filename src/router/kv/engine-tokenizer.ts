// Token ids from the engine itself: POST /tokenize to a ready endpoint of the model with the request's own prompt
// fields (`prompt`, or `messages` and the template arguments the request carries), so the engine's own tokenizer and
// template answer. Whole answers are cached under a hash of the model and those fields, and one call serves
// concurrent equal requests. Nothing here fails a request: a slow or failing engine comes back as a fallback reason.
//
// Under load an engine's /tokenize waits behind the engine's other work (100-250 ms were measured on busy
// simulators), and a miss of a long prompt costs seconds of prefill: the time-out is `timeoutMs` plus
// `msPerKChar` a thousand characters of the prompt. A time-out says the engine is busy, not broken, and costs that
// one request its match: nothing else. An endpoint that refuses the connection or answers 5xx is not asked again for
// `backoffMs`, and the request asks the next of the model's endpoints at once (within the same time-out).
//
// A prompt that starts with one the engine tokenized before (a completion client's conversation, re-sent every turn
// with the answer and a new question appended; prompt-memory.ts finds it) sends only its new text, with the earlier
// ids in front, where the new text begins a word. That is exact for the byte-level BPE tokenizers of today's models; per
// model the first four such requests and one in 64 after are also tokenized whole and compared, and a difference
// turns it off for the model (said once). A chat cannot be cut so: the engine renders the template, the router has
// none in this mode.
import { createHash } from 'node:crypto';
import { Agent, request } from 'undici';
import { tlsConnectOptions, type EngineTls } from '../config/engine-tls.js';
import type { TraceSpan } from '../core/trace.js';
import { ENDPOINT, HTTP_REQUEST_METHOD, HTTP_RESPONSE_STATUS_CODE, SPAN, TOKENIZE_OUTCOME, URL_PATH } from '../tracing/attributes.js';
import type { TextPrompt, TokenizeOutcome } from './prompt-fields.js';
import { type EarlierPrompt, PromptMemory } from './prompt-memory.js';
import { ByteLru } from './token-cache.js';

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

export interface EngineTokenizerOptions {
  /** how long to wait for /tokenize, before the prompt's own share (default 1 s) */
  readonly timeoutMs?: number;
  /** and this much more per 1,000 characters of the prompt (default 10 ms: 0.5 s more for a 12k-token prompt) */
  readonly msPerKChar?: number;
  /**
   * after an endpoint refused the connection, failed to answer or answered 5xx, it is not asked for this long
   * (default 5 s; 0: always ask); a time-out does not count
   */
  readonly backoffMs?: number;
  /** the clock for backoff (default Date.now) */
  readonly now?: () => number;
  /** bytes the answer cache may hold */
  readonly cacheBytes: number;
  /** the engine's tokenize path (default /tokenize, vLLM's and SGLang's) */
  readonly tokenizePath?: string;
  /** how to POST to an engine; default: undici with its own small agent (as the stats scraper does) */
  readonly post?: EnginePost;
  /** https engines, for the default `post` */
  readonly tls?: EngineTls;
  /** sent as a bearer token by the default `post` */
  readonly apiKey?: string;
  /** a model's tokenizer did not give an earlier prompt's ids plus the new text's for a longer prompt: said once */
  readonly onResumeMismatch?: (model: string) => void;
}

const DEFAULT_TIMEOUT_MS = 1000;
const DEFAULT_MS_PER_K_CHAR = 10;
/** Where and how long one request's tokenizations may ask: the endpoints in order, the time-out, the trace. */
interface Ask {
  readonly targets: readonly TokenizeTarget[];
  readonly timeoutMs: number;
  readonly trace: TraceSpan | undefined;
}

/** endpoints asked for one request at most (the first and, after a failure, others) */
const MAX_ASKED = 3;
const DEFAULT_BACKOFF_MS = 5_000;
const MAX_ANSWER_BYTES = 64 * 1024 * 1024;

/** Asks engines' /tokenize; see the file's header. */
export class EngineTokenizer {
  private readonly timeoutMs: number;
  private readonly msPerKChar: number;
  private readonly tokenizePath: string;
  private readonly post: EnginePost;
  private readonly agent: Agent | undefined;
  private readonly answers: ByteLru<Uint32Array>;
  private readonly inFlight = new Map<string, Promise<TokenizeOutcome>>();
  /** endpoint URL -> until when it is not asked */
  private readonly backoff = new Map<string, number>();
  private readonly backoffMs: number;
  private readonly now: () => number;
  private readonly memory: PromptMemory;
  /** model -> prompts resumed so far (the first four and one in 64 are checked against a whole tokenization) */
  private readonly resumes = new Map<string, number>();
  /** models whose tokenizer gave something else for a resumed prompt than for the whole */
  private readonly noResume = new Set<string>();
  private readonly onResumeMismatch: ((model: string) => void) | undefined;

  constructor(opts: EngineTokenizerOptions) {
    this.timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.msPerKChar = Math.max(0, opts.msPerKChar ?? DEFAULT_MS_PER_K_CHAR);
    this.tokenizePath = opts.tokenizePath ?? '/tokenize';
    this.backoffMs = opts.backoffMs ?? DEFAULT_BACKOFF_MS;
    this.now = opts.now ?? Date.now;
    this.answers = new ByteLru<Uint32Array>(opts.cacheBytes, (v) => v.byteLength);
    this.memory = new PromptMemory(opts.cacheBytes);
    this.onResumeMismatch = opts.onResumeMismatch;
    if (opts.post) this.post = opts.post;
    else {
      const made = undiciEnginePost({ ...(opts.tls ? { tls: opts.tls } : {}), ...(opts.apiKey ? { apiKey: opts.apiKey } : {}) });
      this.agent = made.agent;
      this.post = made.post;
    }
  }

  /** Bytes held by the answer cache. */
  get cacheBytes(): number {
    return this.answers.bytes;
  }

  async close(): Promise<void> {
    await this.agent?.destroy().catch(() => undefined);
  }

  /** How long a prompt of `chars` characters may wait for its ids. */
  timeoutFor(chars: number): number {
    return this.timeoutMs + (this.msPerKChar * chars) / 1000;
  }

  /**
   * The prompt's ids from the first of `targets` (the model's ready endpoints, in the order to ask them) that is not
   * backed off; after a refused connection or a 5xx, from the next, until the time-out.
   */
  tokenize(model: string, p: TextPrompt, targets: readonly TokenizeTarget[], trace: TraceSpan | undefined): Promise<TokenizeOutcome> {
    const payload = JSON.stringify({ model, ...p.fields });
    const key = createHash('sha256').update(payload).digest('base64');
    const hit = this.answers.get(key);
    if (hit) return Promise.resolve({ tokens: hit, source: 'engine', cached: true });
    if (targets.length === 0) return Promise.resolve({ fallback: 'no-endpoint' });
    let pending = this.inFlight.get(key);
    if (!pending) {
      const usable = this.usable(targets);
      if (usable.length === 0) return Promise.resolve({ fallback: 'backoff' });
      const ask: Ask = { targets: usable, timeoutMs: this.timeoutFor(p.chars), trace };
      const text = p.kind === 'prompt' ? (p.fields.prompt as string) : undefined;
      const scope = `${model}\u0000${p.fields.add_special_tokens === false ? 0 : 1}`;
      const earlier = text !== undefined && !this.noResume.has(model) ? this.memory.longestPrefix(scope, text) : undefined;
      const asked =
        text !== undefined && earlier !== undefined
          ? this.resume(model, scope, text, earlier, ask, payload, key)
          : this.askAll(ask, payload, key).then((outcome) => {
              if (text !== undefined && outcome.tokens !== undefined) this.memory.remember(scope, text, outcome.tokens);
              return outcome;
            });
      pending = asked.finally(() => this.inFlight.delete(key));
      this.inFlight.set(key, pending);
    }
    return pending;
  }

  /**
   * A prompt that continues an earlier one: only its new text is sent, the earlier ids put in front. The first four per
   * model and one in 64 after are also tokenized whole: the whole answer is used, and a difference turns resuming off
   * for the model.
   */
  private async resume(
    model: string,
    scope: string,
    text: string,
    earlier: EarlierPrompt,
    ask: Ask,
    payload: string,
    key: string,
  ): Promise<TokenizeOutcome> {
    const n = (this.resumes.get(model) ?? 0) + 1;
    this.resumes.set(model, n);
    const check = n <= 4 || n % 64 === 0;
    const tailPayload = JSON.stringify({ model, prompt: text.slice(earlier.chars), add_special_tokens: false });
    const tailKey = createHash('sha256').update(tailPayload).digest('base64');
    const [tail, whole] = await Promise.all([this.askAll(ask, tailPayload, tailKey), check ? this.askAll(ask, payload, key) : undefined]);
    if (tail.tokens === undefined) return whole ?? tail;
    const tokens = new Uint32Array(earlier.tokens.length + tail.tokens.length);
    tokens.set(earlier.tokens);
    tokens.set(tail.tokens, earlier.tokens.length);
    if (whole !== undefined) {
      if (whole.tokens === undefined) return whole;
      if (!sameIds(tokens, whole.tokens)) {
        this.noResume.add(model);
        this.onResumeMismatch?.(model);
      }
      this.memory.remember(scope, text, whole.tokens);
      return whole;
    }
    this.answers.set(key, tokens);
    this.memory.remember(scope, text, tokens);
    return { tokens, source: 'engine', cached: false, resumedChars: earlier.chars };
  }

  /** The targets not backed off now, in order, MAX_ASKED at most. */
  private usable(targets: readonly TokenizeTarget[]): TokenizeTarget[] {
    const now = this.now();
    const out: TokenizeTarget[] = [];
    for (const t of targets) {
      const until = this.backoff.get(t.url);
      if (until !== undefined) {
        if (now < until) continue;
        this.backoff.delete(t.url);
      }
      out.push(t);
      if (out.length === MAX_ASKED) break;
    }
    return out;
  }

  private async askAll(ask: Ask, payload: string, key: string): Promise<TokenizeOutcome> {
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(), ask.timeoutMs);
    try {
      let outcome: TokenizeOutcome = { fallback: 'engine-error' };
      for (const target of ask.targets) {
        outcome = await this.ask(target, payload, key, ac.signal, ask.trace);
        // tokens, a time-out (the deadline is the request's, not the endpoint's), or an answer that is not 5xx: done
        if (outcome.fallback === undefined || outcome.fallback === 'timeout' || !this.backoff.has(target.url)) return outcome;
      }
      return outcome;
    } finally {
      clearTimeout(timer);
    }
  }

  private async ask(
    target: TokenizeTarget,
    payload: string,
    key: string,
    signal: AbortSignal,
    trace: TraceSpan | undefined,
  ): Promise<TokenizeOutcome> {
    const span = trace?.child(SPAN.tokenize, 'client', {
      [ENDPOINT]: target.url,
      [HTTP_REQUEST_METHOD]: 'POST',
      [URL_PATH]: this.tokenizePath,
    });
    const outcome = await this.askEngine(target, payload, key, signal, span);
    if (span) {
      span.set(TOKENIZE_OUTCOME, outcome.fallback ?? 'tokens');
      if (outcome.fallback !== undefined) span.fail(outcome.fallback);
      span.end();
    }
    return outcome;
  }

  private async askEngine(
    target: TokenizeTarget,
    payload: string,
    key: string,
    signal: AbortSignal,
    span: TraceSpan | undefined,
  ): Promise<TokenizeOutcome> {
    if (signal.aborted) return { fallback: 'timeout' };
    try {
      const url = target.url + this.tokenizePath;
      const res = await (span ? this.post(url, payload, signal, span.propagation()) : this.post(url, payload, signal));
      span?.set(HTTP_RESPONSE_STATUS_CODE, res.status);
      if (res.status >= 500) this.backOff(target);
      if (res.status !== 200) return { fallback: 'engine-error' };
      const tokens = tokensOfAnswer(res.text);
      if (!tokens) return { fallback: 'engine-error' };
      this.answers.set(key, tokens);
      return { tokens, source: 'engine', cached: false };
    } catch {
      // the request's time is up: the engine is busy, not broken
      if (signal.aborted) return { fallback: 'timeout' };
      this.backOff(target);
      return { fallback: 'engine-error' };
    }
  }

  private backOff(target: TokenizeTarget): void {
    if (this.backoffMs <= 0) return;
    // bounded: endpoints come and go; an old entry is dropped when it is next read or when the map grows large
    if (this.backoff.size >= 4096) this.backoff.clear();
    this.backoff.set(target.url, this.now() + this.backoffMs);
  }
}

function sameIds(a: Uint32Array, b: Uint32Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
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
