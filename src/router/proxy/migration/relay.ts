// The stream a client sees while its request may move between engines (src/router/proxy/migration): the attempt
// (src/router/proxy/attempt.ts) hands it the engine's complete server-sent events; it follows what the client has been
// sent (the text so far, the tokens, whether it finished) and, on a continuation, makes the new engine's chunks read as
// the rest of the first stream: the first stream's `id`, `created` and `model` in every chunk, no second role chunk,
// `usage` counting both parts. It finds the failures that end an engine's stream without breaking its connection: an
// engine's 5xx error event, a chunk that is not JSON, a stream that ends before its end. Pure: bytes in, bytes out.
import type { FailureKind } from '../../core/forward.js';
import type { MigrationApi } from './continuation.js';

/** Why an engine's stream cannot go on, found in what it sent. */
export interface RelayFault {
  readonly failure: FailureKind;
  readonly detail: string;
  /** the events before the fault, to write: they were good */
  readonly before: Buffer | undefined;
}

interface Chunk {
  id?: unknown;
  created?: unknown;
  model?: unknown;
  choices?: unknown;
  usage?: unknown;
}

interface Usage {
  prompt_tokens?: unknown;
  completion_tokens?: unknown;
  total_tokens?: unknown;
}

/** One server-sent event: its bytes as they came (its blank line included) and its data, when it has any. */
export interface SseEvent {
  readonly raw: string;
  readonly data: string | undefined;
}

/** The events of `text`, which ends on an event boundary (the WHATWG rules: lines end in CRLF, LF or CR). */
export function splitEvents(text: string): SseEvent[] {
  const events: SseEvent[] = [];
  let start = 0;
  let lineStart = 0;
  let data: string | undefined;
  let i = 0;
  while (i < text.length) {
    const c = text.charCodeAt(i);
    if (c !== 0x0a && c !== 0x0d) {
      i++;
      continue;
    }
    const line = text.slice(lineStart, i);
    i += c === 0x0d && text.charCodeAt(i + 1) === 0x0a ? 2 : 1;
    lineStart = i;
    if (line === '') {
      events.push({ raw: text.slice(start, i), data });
      start = i;
      data = undefined;
      continue;
    }
    if (line.startsWith('data')) {
      const value = line.length === 4 ? '' : line[4] === ':' ? line.slice(line[5] === ' ' ? 6 : 5) : undefined;
      if (value !== undefined) data = data === undefined ? value : `${data}\n${value}`;
    }
  }
  if (start < text.length) events.push({ raw: text.slice(start), data });
  return events;
}

/**
 * One client's stream over its engines. The attempt calls `opened` when an engine's event stream begins, `take` with
 * its complete events and `ended` at its end; the migration runner reads what was sent and calls `continueOn` before
 * each continuation.
 */
export class StreamRelay {
  /** the attempt continues a stream whose head the client has: no head of its own goes out */
  continuing = false;
  /** an engine's event stream reached the client (the client has a head) */
  streaming = false;
  /** what the client has been sent ends on an event boundary (the router's error event may start there) */
  atBoundary = true;
  /** bytes of an incomplete event: never held here (the attempt holds them); for streamErrorEvent's state */
  partial: Buffer | undefined = undefined;
  /** the text the client has been sent (choice 0) */
  text = '';
  /** a finish_reason reached the client */
  finished = false;
  /** `data: [DONE]` reached the client */
  done = false;
  /** why this stream cannot be continued any more, once something it sent says so */
  refusal: string | undefined = undefined;
  /** the first stream's, for every chunk of the continuations (undefined until the client has a chunk) */
  private id: unknown = undefined;
  private created: unknown = undefined;
  private model: unknown = undefined;
  private roleSent = false;
  /** the original prompt's tokens, once a usage said (a continuation's prompt holds the text so far too) */
  private promptTokens: number | undefined = undefined;
  /** tokens sent before this engine's stream */
  private baseTokens = 0;
  /** this engine's content chunks so far */
  private legChunks = 0;
  /** this engine's completion_tokens, when its chunks carry usage */
  private legUsage: number | undefined = undefined;

  constructor(readonly api: MigrationApi) {}

  /** Tokens the client has received: the chunks' usage where they carried it, else one per content chunk. */
  get tokens(): number {
    return this.baseTokens + (this.legUsage ?? this.legChunks);
  }

  /** The next engine continues this stream. */
  continueOn(): void {
    this.baseTokens = this.tokens;
    this.legChunks = 0;
    this.legUsage = undefined;
    this.continuing = true;
  }

  /** An engine's event stream begins. */
  opened(): void {
    this.streaming = true;
  }

  /**
   * The engine's complete events (`whole`: they end on an event boundary; false: an event too long to follow, passed on
   * as it comes). What to write to the client, or the fault that ends this engine's stream.
   */
  take(events: Buffer, whole: boolean): Buffer | RelayFault {
    if (!whole || !this.atBoundary) {
      // not a stream the router can follow: passed on as it comes, never continued
      this.atBoundary = whole;
      this.refusal ??= 'unfollowed';
      return events;
    }
    const text = events.toString('utf8');
    let out: string[] | undefined = this.continuing ? [] : undefined;
    let written = 0;
    for (const event of splitEvents(text)) {
      const result = this.event(event);
      if (typeof result === 'object') {
        const before = out !== undefined ? out.join('') : text.slice(0, written);
        return { ...result, before: before === '' ? undefined : Buffer.from(before) };
      }
      if (out !== undefined) {
        if (result !== undefined) out.push(result);
      } else if (result !== undefined && result !== event.raw) {
        // the first rewritten event: from here the output is built
        out = [text.slice(0, written), result];
      }
      written += event.raw.length;
    }
    return out === undefined ? events : Buffer.from(out.join(''));
  }

  /** The engine's stream ended (its body is complete): the fault when it ended before its end. */
  ended(): Omit<RelayFault, 'before'> | undefined {
    // a stream passed on unfollowed, or one the engine ended with its own error event (a 4xx), ends as it came
    if (this.done || this.finished || this.refusal === 'unfollowed' || this.refusal === 'engine-error') return undefined;
    return { failure: 'reset', detail: 'the engine ended its stream before a finish_reason or [DONE]' };
  }

  /**
   * One event: what to write for it (its raw bytes, a rewritten event, or nothing: undefined), or the fault it is.
   */
  private event(event: SseEvent): string | undefined | Omit<RelayFault, 'before'> {
    const data = event.data;
    if (data === undefined) return event.raw;
    if (data === '[DONE]') {
      this.done = true;
      return event.raw;
    }
    let chunk: unknown;
    try {
      chunk = JSON.parse(data);
    } catch {
      return { failure: 'protocol', detail: 'the engine sent a chunk that is not JSON' };
    }
    if (typeof chunk !== 'object' || chunk === null || Array.isArray(chunk))
      return { failure: 'protocol', detail: 'the engine sent a chunk that is not a JSON object' };
    const c = chunk as Chunk & Record<string, unknown>;
    const error = engineError(c);
    if (error !== undefined) {
      // an engine's own error event: a 4xx is the request's and goes to the client; a 5xx is the engine's failure
      if (error < 500) {
        this.refusal ??= 'engine-error';
        return event.raw;
      }
      return { failure: 'engine-5xx', detail: `the engine sent an error event (${error})` };
    }
    if (!this.continuing) {
      this.observe(c);
      return event.raw;
    }
    if (!this.rewrite(c)) return undefined;
    this.observe(c);
    return `data: ${JSON.stringify(c)}\n\n`;
  }

  /** Follows what a chunk the client gets says: its identity, its text, tokens, role, finish, tool calls. */
  private observe(c: Chunk): void {
    if (this.id === undefined) {
      this.id = c.id;
      this.created = c.created;
      this.model = c.model;
    }
    const usage = c.usage as Usage | null | undefined;
    if (typeof usage === 'object' && usage !== null) {
      if (typeof usage.completion_tokens === 'number') this.legUsage = usage.completion_tokens - (this.continuing ? this.baseTokens : 0);
      if (typeof usage.prompt_tokens === 'number') this.promptTokens = usage.prompt_tokens;
    }
    if (!Array.isArray(c.choices)) return;
    if (c.choices.length > 1) this.refusal ??= 'n';
    const choice = c.choices[0] as Record<string, unknown> | undefined;
    if (typeof choice !== 'object' || choice === null) return;
    if (choice.index !== undefined && choice.index !== 0) this.refusal ??= 'n';
    if (choice.finish_reason !== undefined && choice.finish_reason !== null) this.finished = true;
    const part = this.api === 'chat' ? (choice.delta as Record<string, unknown> | undefined) : choice;
    if (typeof part !== 'object' || part === null) return;
    if (this.api === 'chat') {
      if (part.role !== undefined) this.roleSent = true;
      if (Array.isArray(part.tool_calls) && part.tool_calls.length > 0) this.refusal ??= 'tool-calls';
      if (nonEmpty(part.reasoning_content) || nonEmpty(part.reasoning)) this.refusal ??= 'reasoning';
    }
    const text = this.api === 'chat' ? part.content : part.text;
    if (typeof text === 'string' && text !== '') {
      this.text += text;
      this.legChunks++;
    }
  }

  /**
   * A continuation's chunk as the rest of the client's stream: the first stream's identity, no second role, usage of
   * both parts. False: the chunk says nothing the client has not had (the new engine's role chunk).
   */
  private rewrite(c: Chunk & Record<string, unknown>): boolean {
    if (this.id !== undefined) {
      if ('id' in c) c.id = this.id;
      if ('created' in c) c.created = this.created;
      if ('model' in c) c.model = this.model;
    }
    if (this.api === 'chat' && this.roleSent && Array.isArray(c.choices)) {
      const choice = c.choices[0] as Record<string, unknown> | undefined;
      const delta = choice?.delta as Record<string, unknown> | undefined;
      if (typeof delta === 'object' && delta !== null && delta.role !== undefined) {
        delete delta.role;
        const empty = Object.values(delta).every(isEmpty);
        const usage = c.usage !== undefined && c.usage !== null;
        if (empty && (choice?.finish_reason ?? null) === null && !usage && c.choices.length === 1) return false;
      }
    }
    const usage = c.usage as Usage | null | undefined;
    if (typeof usage === 'object' && usage !== null && typeof usage.completion_tokens === 'number') {
      const completion = this.baseTokens + usage.completion_tokens;
      const prompt =
        this.promptTokens ?? (typeof usage.prompt_tokens === 'number' ? Math.max(0, usage.prompt_tokens - this.baseTokens) : undefined);
      c.usage = {
        ...usage,
        ...(prompt !== undefined ? { prompt_tokens: prompt } : {}),
        completion_tokens: completion,
        total_tokens: (prompt ?? 0) + completion,
      };
    }
    return true;
  }
}

/** a delta field that says nothing: null, '', [] */
function isEmpty(v: unknown): boolean {
  return v === null || v === '' || (Array.isArray(v) && v.length === 0);
}

function nonEmpty(v: unknown): boolean {
  return typeof v === 'string' && v !== '';
}

/** An engine's error event's status code (vLLM: `{"error": {..., "code": 500}}`, older `{"object": "error", "code": 500}`); 500 when it names none. */
function engineError(c: Record<string, unknown>): number | undefined {
  const nested = c.error;
  if (typeof nested === 'object' && nested !== null) return codeOf((nested as Record<string, unknown>).code);
  if (c.object === 'error') return codeOf(c.code);
  return undefined;
}

function codeOf(code: unknown): number {
  const n = typeof code === 'number' ? code : typeof code === 'string' ? Number(code) : Number.NaN;
  return Number.isInteger(n) && n >= 400 && n <= 599 ? n : 500;
}
