// Crude, deterministic token accounting: good enough for usage numbers and output lengths in tests.

const TOKEN = /[A-Za-z0-9]+|[^\sA-Za-z0-9]/g;

/** Words and punctuation marks each count as one token. */
export function countTokens(text: string): number {
  return text.match(TOKEN)?.length ?? 0;
}

/** Body fields that carry prompt text across the OpenAI, rerank, score, tokenize and Anthropic shapes. */
const PROMPT_FIELDS = ['messages', 'prompt', 'input', 'system', 'query', 'documents', 'text_1', 'text_2', 'text', 'tokens'] as const;

/**
 * Tokens of a value: strings are counted, numbers are token ids, message parts count by their content/text.
 * Iterative, so that any nesting depth a client sends is counted instead of overflowing the stack.
 */
export function tokensOf(value: unknown): number {
  let total = 0;
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === 'string') total += countTokens(v);
    else if (typeof v === 'number') total += 1;
    else if (Array.isArray(v)) for (const item of v) stack.push(item);
    else if (typeof v === 'object' && v !== null) {
      const record = v as Record<string, unknown>;
      stack.push(record.content, record.text);
    }
  }
  return total;
}

export function promptTokens(body: Record<string, unknown>): number {
  let total = 0;
  for (const field of PROMPT_FIELDS) total += tokensOf(body[field]);
  return total;
}

const LIMIT_FIELDS = ['max_tokens', 'max_completion_tokens', 'max_output_tokens', 'max_new_tokens'] as const;

export interface OutputBudget {
  readonly tokens: number;
  /** OpenAI finish_reason once the budget is spent: `length` when the request's own limit cut it short */
  readonly finishReason: 'stop' | 'length';
}

/**
 * The engine's --output-tokens, lowered by the request's max_tokens (or its synonyms). `start`: a generation that goes
 * on from this position of the filler text (a continuation) ends where the whole answer would: --output-tokens counts
 * from position 0 (at least one token is generated).
 */
export function outputBudget(body: Record<string, unknown>, engineDefault: number, start = 0): OutputBudget {
  let tokens = Math.max(1, engineDefault - start);
  let limited = false;
  for (const field of LIMIT_FIELDS) {
    const limit = body[field];
    if (typeof limit === 'number' && Number.isFinite(limit) && limit <= tokens) {
      tokens = Math.max(1, Math.floor(limit));
      limited = true;
    }
  }
  return { tokens, finishReason: limited ? 'length' : 'stop' };
}

const FILLER = [
  'The',
  'quick',
  'brown',
  'fox',
  'jumps',
  'over',
  'the',
  'lazy',
  'dog',
  'while',
  'the',
  'simulator',
  'streams',
  'tokens',
  'to',
  'you',
];

/**
 * Where a generation starts in the filler text: 0, or for a continuation the position the text so far ends at, counted
 * in the simulator's own tokens (words and punctuation marks), so that an answer continued on another engine reads as
 * one uninterrupted generation:
 * - chat with `continue_final_message: true`: the tokens of the final assistant message;
 * - a text completion whose prompt ends with the filler text from its start ("The quick ..."): the tokens of that tail.
 */
export function generationStart(api: 'chat' | 'completion', body: Record<string, unknown>): number {
  if (api === 'chat') {
    if (body.continue_final_message !== true || !Array.isArray(body.messages)) return 0;
    const last = body.messages[body.messages.length - 1] as { role?: unknown; content?: unknown } | undefined;
    return typeof last === 'object' && last !== null && last.role === 'assistant' ? tokensOf(last.content) : 0;
  }
  const prompt = Array.isArray(body.prompt) && body.prompt.length === 1 ? body.prompt[0] : body.prompt;
  return typeof prompt === 'string' ? fillerTail(prompt) : 0;
}

/** The tokens of the longest tail of `text` that is the filler text from its first token. */
function fillerTail(text: string): number {
  const first = FILLER[0] as string;
  for (let at = text.indexOf(first); at >= 0; at = text.indexOf(first, at + 1)) {
    const tail = text.slice(at);
    const tokens = countTokens(tail);
    if (fillerText(tokens) === tail) return tokens;
  }
  return 0;
}

/** The i-th generated token; tokens after the first carry a leading space so they concatenate into text. */
export function fillerToken(i: number): string {
  const word = FILLER[i % FILLER.length] as string;
  return i === 0 ? word : ` ${word}`;
}

/** `tokens` tokens of the filler text, from position `from`. */
export function fillerText(tokens: number, from = 0): string {
  let text = '';
  for (let i = from; i < from + tokens; i++) text += fillerToken(i);
  return text;
}
