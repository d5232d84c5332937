// The token ids an engine will compute for a request (its chat template included), for KV-aware routing to look up
// which engine's cache holds the request's leading blocks. Per model, either
//  - `engine` (the default): the engine's own POST /tokenize (engine-tokenizer.ts);
//  - a tokenizer directory: the Hugging Face tokenizer in process (in-process.ts);
//  - `off`.
// Nothing here fails a request: a prompt it cannot tokenize, a slow or failing engine, comes back as a fallback reason
// (the policy then hashes the prefix instead and counts the reason).
import type { EngineTls } from '../config/engine-tls.js';
import type { TraceSpan } from '../core/trace.js';
import { type EnginePost, EngineTokenizer, type TokenizeTarget } from './engine-tokenizer.js';
import { InProcessTokenizers } from './in-process.js';
import type { LocalStats } from './local-tokenizers.js';
import { promptFields, type TokenizeOutcome } from './prompt-fields.js';

export { type EnginePost, type TokenizeTarget, tokensOfAnswer, undiciEnginePost } from './engine-tokenizer.js';
export { encodeInProcess, type LocalStats, promptText } from './local-tokenizers.js';
export {
  promptFields,
  type PromptFields,
  TOKENIZE_FALLBACKS,
  type TokenizeFallback,
  type TokenizeOutcome,
} from './prompt-fields.js';

/** `engine`, `off`, or the path of a tokenizer directory. */
export type TokenizerMode = string;

export interface RequestTokenizerOptions {
  /** the default mode: `engine` (default), `off`, or a tokenizer directory */
  readonly mode?: TokenizerMode;
  /** per-model overrides of `mode` */
  readonly models?: Readonly<Record<string, TokenizerMode>>;
  /** how long to wait for the engine's /tokenize, or for the in-process tokenizer's worker (default 250 ms) */
  readonly timeoutMs?: number;
  /** engine mode: the time-out's share per 1,000 prompt characters (default 10 ms) */
  readonly msPerKChar?: number;
  /** engine mode: a model's tokenizer did not give an earlier prompt's ids plus the new text's (said once) */
  readonly onResumeMismatch?: (model: string) => void;
  /**
   * engine mode: after an endpoint refused the connection, failed to answer or answered 5xx, it is not asked for this
   * long (default 5 s; 0: always ask); a time-out does not count
   */
  readonly backoffMs?: number;
  /** the clock for backoff (default Date.now) */
  readonly now?: () => number;
  /** path mode: characters tokenized between two pauses of the tokenizer worker (default 8 Ki; about 2-5 ms of work) */
  readonly sliceChars?: number;
  /** prompts longer than this many characters are not tokenized, nor chats that render longer (default 512 Ki) */
  readonly maxPromptChars?: number;
  /** --trust-request-chat-template: tokenize chats that carry their own template (else `unsupported-body`) */
  readonly trustRequestChatTemplate?: boolean;
  /** path mode: a line for the log when the tokenizer worker was restarted or cannot run */
  readonly onWorkerTrouble?: (why: string) => void;
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

/** about what a 128k-token context holds (3-4 characters a token in prose and code) */
const DEFAULT_MAX_PROMPT_CHARS = 512 * 1024;
const DEFAULT_CACHE_BYTES = 64 * 1024 * 1024;

/** Tokenizes requests per model by its mode; see the file's header. */
export class RequestTokenizer {
  private readonly maxPromptChars: number;
  private readonly engine: EngineTokenizer;
  private readonly local: InProcessTokenizers;

  constructor(private readonly opts: RequestTokenizerOptions = {}) {
    this.maxPromptChars = opts.maxPromptChars ?? DEFAULT_MAX_PROMPT_CHARS;
    const cacheBytes = opts.cacheBytes ?? DEFAULT_CACHE_BYTES;
    this.engine = new EngineTokenizer({
      cacheBytes,
      ...(opts.timeoutMs !== undefined ? { timeoutMs: opts.timeoutMs } : {}),
      ...(opts.backoffMs !== undefined ? { backoffMs: opts.backoffMs } : {}),
      ...(opts.msPerKChar !== undefined ? { msPerKChar: opts.msPerKChar } : {}),
      ...(opts.onResumeMismatch !== undefined ? { onResumeMismatch: opts.onResumeMismatch } : {}),
      ...(opts.now !== undefined ? { now: opts.now } : {}),
      ...(opts.tokenizePath !== undefined ? { tokenizePath: opts.tokenizePath } : {}),
      ...(opts.post !== undefined ? { post: opts.post } : {}),
      ...(opts.tls !== undefined ? { tls: opts.tls } : {}),
      ...(opts.apiKey !== undefined ? { apiKey: opts.apiKey } : {}),
    });
    this.local = new InProcessTokenizers({
      cacheBytes,
      maxChars: this.maxPromptChars,
      ...(opts.timeoutMs !== undefined ? { timeoutMs: opts.timeoutMs } : {}),
      ...(opts.sliceChars !== undefined ? { sliceChars: opts.sliceChars } : {}),
      ...(opts.onWorkerTrouble !== undefined ? { onTrouble: opts.onWorkerTrouble } : {}),
    });
  }

  /** The mode a model is tokenized in. */
  modeOf(model: string): TokenizerMode {
    return this.opts.models?.[model] ?? this.opts.mode ?? 'engine';
  }

  /**
   * The request's token ids, or why not. `targets` are the engine endpoints to ask in engine mode (ready endpoints of
   * the model, in the order to ask them: the next is asked when one refuses or fails); not used in the other modes.
   */
  async tokenize(
    model: string,
    body: Readonly<Record<string, unknown>>,
    targets?: TokenizeTarget | readonly TokenizeTarget[],
    /** tracing on: the parent of the /tokenize call's CLIENT span */
    trace?: TraceSpan,
    /** the mode to use instead of the model's from the options (what the model's source names) */
    as?: TokenizerMode,
  ): Promise<TokenizeOutcome> {
    const mode = as ?? this.modeOf(model);
    if (mode === 'off') return { fallback: 'off' };
    const p = promptFields(body, { trustChatTemplate: this.opts.trustRequestChatTemplate === true });
    if (p.kind === 'fallback') return { fallback: p.reason };
    if (p.kind === 'ids') return { tokens: p.tokens, source: 'request', cached: false };
    if (p.chars > this.maxPromptChars) return { fallback: 'too-large' };
    if (mode !== 'engine') return this.local.tokenize(mode, p);
    const list = targets === undefined ? [] : 'url' in targets ? [targets as TokenizeTarget] : (targets as readonly TokenizeTarget[]);
    return this.engine.tokenize(model, p, list, trace);
  }

  /**
   * Loads a tokenizer directory ahead of the first request (path mode loads on first use otherwise). A directory that
   * does not load is not tried again: its models get `tokenizer-error` until the process restarts.
   */
  preload(dir: string): Promise<boolean> {
    return this.local.preload(dir);
  }

  /** Bytes held by the engine-answer cache. */
  get engineCacheBytes(): number {
    return this.engine.cacheBytes;
  }

  /** What a loaded tokenizer directory's caches hold and did (for stats and tests); undefined when not loaded. */
  localStats(dir: string): Promise<LocalStats | undefined> {
    return this.local.stats(dir);
  }

  /** Times the in-process tokenizer's worker was restarted (a job's step ran far past its deadline, or it died). */
  get workerRestarts(): number {
    return this.local.restarts;
  }

  async close(): Promise<void> {
    await Promise.all([this.engine.close(), this.local.close()]);
  }
}
