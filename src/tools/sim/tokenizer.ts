// The simulator's tokenizer: the token ids its prefix cache holds, its KV-cache events announce and /tokenize answers.
// The interface is what an engine needs of a tokenizer; the default is word level (each run of letters and digits, and
// each other non-space character, is one token, as countTokens counts them) with ids hashed into a fixed vocabulary, so
// that the same text always has the same ids in every simulator. A Hugging Face tokenizer can stand in for it.

/**
 * What the simulated engine asks of a tokenizer. Implementations must be deterministic (the same input gives the same
 * ids in every process), since a router re-derives block keys from these ids.
 */
export interface SimTokenizer {
  /** The token ids of a text, without special tokens added. */
  encode(text: string): number[];
  /**
   * The token ids of a request's prompt, as the engine computes it: chat `messages` rendered through the tokenizer's
   * chat template (the assistant turn opened unless `add_generation_prompt` is false; promptOf reads the body), else
   * `prompt` (or `input`) text, or the token ids given there.
   */
  encodeBody(body: Record<string, unknown>): number[];
}

export interface ChatMessage {
  readonly role: string;
  /** the message's text (parts of a multi-part content joined) */
  readonly content: string;
}

/** A request's prompt before tokenization: the part of a body every tokenizer reads the same way. */
export type PromptInput =
  | { readonly kind: 'chat'; readonly messages: readonly ChatMessage[]; readonly addGenerationPrompt: boolean }
  | { readonly kind: 'text'; readonly text: string }
  | { readonly kind: 'ids'; readonly ids: readonly number[] };

/**
 * The prompt of a body: `messages` (with an Anthropic-style top-level `system` first) as chat, else `prompt` or
 * `input`: a string, token ids, or a list of either (its first item, as the engine serves the first prompt of a
 * batch here). `add_generation_prompt` defaults to true, as vLLM's chat completions and /tokenize have it.
 */
export function promptOf(body: Record<string, unknown>): PromptInput {
  if (Array.isArray(body.messages)) {
    const messages: ChatMessage[] = [];
    if (body.system !== undefined) messages.push({ role: 'system', content: contentText(body.system) });
    for (const m of body.messages as unknown[]) {
      if (typeof m !== 'object' || m === null) continue;
      const msg = m as { role?: unknown; content?: unknown };
      messages.push({ role: typeof msg.role === 'string' ? msg.role : '', content: contentText(msg.content) });
    }
    return { kind: 'chat', messages, addGenerationPrompt: body.add_generation_prompt !== false };
  }
  let prompt = body.prompt ?? body.input;
  if (Array.isArray(prompt) && prompt.length > 0 && typeof prompt[0] !== 'number') prompt = prompt[0];
  if (typeof prompt === 'string') return { kind: 'text', text: prompt };
  if (Array.isArray(prompt)) return { kind: 'ids', ids: prompt.filter((v): v is number => Number.isInteger(v)) };
  return { kind: 'text', text: '' };
}

/** The text of a message's content: a string, or the text parts of a list. */
export function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  let text = '';
  for (const part of content as unknown[]) {
    if (typeof part === 'string') text += part;
    else if (typeof part === 'object' && part !== null && typeof (part as { text?: unknown }).text === 'string')
      text += (part as { text: string }).text;
  }
  return text;
}

/**
 * The simulator's own chat template: each message as its role on a line, then its content on the next; with the
 * generation prompt, a last line `assistant`.
 */
export function renderChat(messages: readonly ChatMessage[], addGenerationPrompt: boolean): string {
  let text = '';
  for (const m of messages) text += `${m.role}\n${m.content}\n`;
  return addGenerationPrompt ? `${text}assistant\n` : text;
}

/** Ids of the word-level tokenizer lie in [0, WORD_VOCAB_SIZE). */
export const WORD_VOCAB_SIZE = 50_000;

const TOKEN = /[A-Za-z0-9]+|[^\sA-Za-z0-9]/g;

/** The default tokenizer: words and punctuation marks, each hashed (FNV-1a) into a vocabulary of 50,000 ids. */
export class WordTokenizer implements SimTokenizer {
  // the vocabulary a run has seen: most prompts repeat their words
  private readonly ids = new Map<string, number>();

  encode(text: string): number[] {
    const out: number[] = [];
    for (const m of text.matchAll(TOKEN)) out.push(this.idOf(m[0]));
    return out;
  }

  encodeBody(body: Record<string, unknown>): number[] {
    const prompt = promptOf(body);
    if (prompt.kind === 'ids') return [...prompt.ids];
    return this.encode(prompt.kind === 'text' ? prompt.text : renderChat(prompt.messages, prompt.addGenerationPrompt));
  }

  private idOf(word: string): number {
    let id = this.ids.get(word);
    if (id === undefined) {
      let h = 0x811c9dc5;
      for (let i = 0; i < word.length; i++) h = Math.imul(h ^ word.charCodeAt(i), 0x01000193);
      id = (h >>> 0) % WORD_VOCAB_SIZE;
      // a bounded memo: an endless stream of new words must not grow it without limit
      if (this.ids.size >= 200_000) this.ids.clear();
      this.ids.set(word, id);
    }
    return id;
  }
}
