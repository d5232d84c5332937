// What a migrated stream is sent as (src/router/proxy/migration): the request again, plus what the client has already
// received, so that another engine goes on from there. Pure: bodies in, bodies out.
//
// chat: the messages plus a final assistant message holding the text so far, `continue_final_message: true` and
//   `add_generation_prompt: false` (vLLM's and SGLang's parameters);
// completions: the prompt with the text so far appended;
// both: `max_tokens` / `max_completion_tokens` (and `min_tokens`) lowered by the tokens already sent.
// And the cases where a stream must not be continued elsewhere, because the continuation would not be the same answer.

/** The APIs whose streams can be continued: chat and text completions. */
export type MigrationApi = 'chat' | 'completion';

/** The request's API by its route path (query excluded), when its streams can be continued. */
export function migrationApiOf(path: string): MigrationApi | undefined {
  if (path === '/v1/chat/completions') return 'chat';
  if (path === '/v1/completions') return 'completion';
  return undefined;
}

/**
 * Why a stream of this request must never be continued elsewhere, whatever it has sent; undefined when it may be.
 * - `n`: several choices (`n` or `best_of` above 1, several prompts) share the stream;
 * - `logprobs`: the client asked for log probabilities (the continuation's would be of another prompt);
 * - `echo`: the answer repeats the prompt;
 * - `seed`: a seed the client fixed (the continuation would not be the same sample);
 * - `prompt-not-text`: a completion whose prompt is token ids or several prompts (no text to append to);
 * - `final-message-not-text`: a chat continuing its own final message whose content is not a string.
 */
export function requestRefusal(api: MigrationApi, body: Readonly<Record<string, unknown>>): string | undefined {
  // several choices share the stream: `n` or `best_of` above 1, a completion of several prompts
  if (above1(body.n) || above1(body.best_of)) return 'n';
  if (api === 'completion' && Array.isArray(body.prompt) && body.prompt.length > 1 && body.prompt.every((p) => typeof p === 'string'))
    return 'n';
  if (body.logprobs === true || (typeof body.logprobs === 'number' && api === 'completion')) return 'logprobs';
  if (present(body.top_logprobs) || present(body.prompt_logprobs)) return 'logprobs';
  if (body.echo === true) return 'echo';
  if (typeof body.seed === 'number') return 'seed';
  if (api === 'completion' && promptText(body.prompt) === undefined) return 'prompt-not-text';
  if (api === 'chat') {
    if (!Array.isArray(body.messages)) return 'no-messages';
    if (body.continue_final_message === true && finalAssistantText(body.messages) === undefined) return 'final-message-not-text';
  }
  return undefined;
}

/** The fields that constrain the output to a grammar: a continuation would start its grammar over in mid-answer. */
const CONSTRAINED_FIELDS = ['guided_json', 'guided_regex', 'guided_choice', 'guided_grammar', 'structured_outputs'] as const;

/** What the client has received of the answer so far. */
export interface SentSoFar {
  readonly text: string;
  /** tokens already sent: from the chunks' usage when they carry it, else one per content chunk */
  readonly tokens: number;
}

/**
 * Why this stream cannot be continued now that it has sent `sent`; undefined when it can.
 * - `structured-output`: a JSON schema or another grammar (`response_format` json_schema/json_object, vLLM's `guided_*`,
 *   `structured_outputs`) is in progress;
 * - `no-tokens-left`: the tokens already sent use up `max_tokens` / `max_completion_tokens`.
 */
export function sentRefusal(body: Readonly<Record<string, unknown>>, sent: SentSoFar): string | undefined {
  if (sent.text !== '' && constrained(body)) return 'structured-output';
  for (const key of LIMIT_FIELDS) {
    const limit = body[key];
    if (typeof limit === 'number' && limit - sent.tokens < 1) return 'no-tokens-left';
  }
  return undefined;
}

const LIMIT_FIELDS = ['max_tokens', 'max_completion_tokens'] as const;

/**
 * The body that continues the answer on another engine: `body` (what the first engine was sent) with the text so far
 * and the limits lowered. Nothing sent yet: the body itself, as it was.
 */
export function continuationBody(
  api: MigrationApi,
  body: Readonly<Record<string, unknown>>,
  sent: SentSoFar,
): Readonly<Record<string, unknown>> {
  if (sent.text === '' && sent.tokens === 0) return body;
  const next: Record<string, unknown> = { ...body };
  if (api === 'chat') {
    const messages = body.messages as readonly unknown[];
    if (body.continue_final_message === true) {
      // the client continues an assistant message of its own: the text so far goes on from it
      const last = messages[messages.length - 1] as Record<string, unknown>;
      next.messages = [...messages.slice(0, -1), { ...last, content: `${last.content as string}${sent.text}` }];
    } else next.messages = [...messages, { role: 'assistant', content: sent.text }];
    next.continue_final_message = true;
    next.add_generation_prompt = false;
  } else {
    next.prompt = `${promptText(body.prompt) as string}${sent.text}`;
  }
  for (const key of LIMIT_FIELDS) {
    const limit = body[key];
    if (typeof limit === 'number') next[key] = limit - sent.tokens;
  }
  if (typeof body.min_tokens === 'number') next.min_tokens = Math.max(0, body.min_tokens - sent.tokens);
  return next;
}

function above1(v: unknown): boolean {
  return typeof v === 'number' && v > 1;
}

function present(v: unknown): boolean {
  return v !== undefined && v !== null && v !== false;
}

/** A completion's prompt as one text: a string, or a list of one string. */
function promptText(prompt: unknown): string | undefined {
  if (typeof prompt === 'string') return prompt;
  if (Array.isArray(prompt) && prompt.length === 1 && typeof prompt[0] === 'string') return prompt[0];
  return undefined;
}

/** The text of a final assistant message, when the messages end with one whose content is a string. */
function finalAssistantText(messages: readonly unknown[]): string | undefined {
  const last = messages[messages.length - 1];
  if (typeof last !== 'object' || last === null) return undefined;
  const m = last as Record<string, unknown>;
  return m.role === 'assistant' && typeof m.content === 'string' ? m.content : undefined;
}

function constrained(body: Readonly<Record<string, unknown>>): boolean {
  const format = body.response_format;
  if (typeof format === 'object' && format !== null) {
    const type = (format as Record<string, unknown>).type;
    if (type === 'json_schema' || type === 'json_object' || type === 'structural_tag' || type === 'grammar') return true;
  }
  return CONSTRAINED_FIELDS.some((key) => present(body[key]));
}
