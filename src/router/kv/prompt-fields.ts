// The fields of a request body that decide its token ids, and why a request has none: shared by the engine's
// /tokenize (engine-tokenizer.ts) and the in-process tokenizer (in-process.ts).

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
  // the in-process tokenizer's worker is in one long step (or loading again after a restart): no waiting behind it
  'tokenizer-busy',
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
      /** engine: characters of an earlier prompt whose ids were reused (only the rest was sent to the engine) */
      readonly resumedChars?: number;
      readonly fallback?: undefined;
    }
  | { readonly tokens?: undefined; readonly source?: undefined; readonly cached?: undefined; readonly fallback: TokenizeFallback };

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

/** A prompt the tokenizers work on: a chat or a text prompt. */
export type TextPrompt = PromptFields & { kind: 'chat' | 'prompt' };

export interface PromptFieldsOptions {
  /**
   * --trust-request-chat-template: a chat carrying its own template (`chat_template`, or `chat_template` in
   * `chat_template_kwargs`, as vLLM reads both) is tokenized; without it such a chat has no ids (`unsupported-body`),
   * as vLLM refuses it without its flag of the same name
   */
  readonly trustChatTemplate?: boolean;
}

/**
 * The fields of `body` that decide its tokens, unchanged: a chat's `messages` with the template arguments present, or
 * a completion's `prompt` (a string, a list of one string, or token ids) with `add_special_tokens`.
 */
export function promptFields(body: Readonly<Record<string, unknown>>, opts: PromptFieldsOptions = {}): PromptFields {
  if (body.messages !== undefined) {
    if (!Array.isArray(body.messages) || body.messages.length === 0) return { kind: 'fallback', reason: 'unsupported-body' };
    if (!opts.trustChatTemplate && hasRequestTemplate(body)) return { kind: 'fallback', reason: 'unsupported-body' };
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

/** Whether a chat names a template of its own: vLLM's test (a `chat_template`, top level or in the kwargs, not null). */
function hasRequestTemplate(body: Readonly<Record<string, unknown>>): boolean {
  if (body.chat_template !== undefined && body.chat_template !== null) return true;
  const kwargs = body.chat_template_kwargs;
  if (typeof kwargs !== 'object' || kwargs === null) return false;
  const named = (kwargs as Record<string, unknown>).chat_template;
  return named !== undefined && named !== null;
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
