// Token ids from Hugging Face tokenizer directories loaded in this thread (hf-tokenizer.ts), earlier turns of a
// conversation reused: their rendering where the template allows (chat-prefix.ts), their ids piece by piece
// (token-cache.ts). The router runs this in its tokenizer worker (tokenize-worker.ts), never on its event loop; the
// simulator calls encodeInProcess directly. A directory loads once; one that does not load is not tried again. Nothing
// here throws for a prompt: one it cannot tokenize comes back as a fallback reason.
import { ChatPrefixCache, type ChatPrefixStats, type ChatRenderer } from './chat-prefix.js';
import { type ChatRenderOptions, ChatTemplateError, HfTokenizer } from './hf-tokenizer.js';
import type { TextPrompt, TokenizeOutcome } from './prompt-fields.js';
import { type EncodeResume, type EncodeStats, SegmentedEncoder } from './token-cache.js';

/** A loaded tokenizer directory: its piece cache and its rendered-chat cache. */
export interface LoadedTokenizer {
  readonly encoder: SegmentedEncoder;
  /** rendered chats, each with where its ids can be resumed from */
  readonly chats: ChatPrefixCache<EncodeResume>;
}

/** What a loaded directory's caches hold and did (for stats and tests). */
export interface LocalStats {
  /** the piece cache: bytes and entries held, and the last encoding to finish */
  readonly encoder: { readonly cacheBytes: number; readonly cacheEntries: number; readonly last: EncodeStats };
  /** the rendered-chat cache: its counts and bytes */
  readonly chats: ChatPrefixStats & { readonly bytes: number };
}

/** How one prompt is tokenized. */
export interface LocalJob {
  /** characters a rendered chat may have (a template's output is bounded too): `too-large` above */
  readonly maxChars: number;
  /** characters tokenized between two pauses */
  readonly sliceChars: number;
  /** awaited between slices; throws DeadlinePassed to stop there (the job then falls back with `timeout`) */
  readonly pause?: () => Promise<void>;
}

/** Thrown by a job's pause when its deadline has passed. */
export class DeadlinePassed extends Error {}

/** The tokenizer directories loaded in this thread; see the file's header. */
export class LocalTokenizers {
  private readonly loaded = new Map<string, Promise<LoadedTokenizer | undefined>>();

  /** `cacheBytes`: bytes each tokenizer's piece cache and rendered-chat cache may hold */
  constructor(private readonly cacheBytes: number) {}

  /** The loaded directory, loading it on first use; undefined when it does not load (it is not tried again). */
  load(dir: string): Promise<LoadedTokenizer | undefined> {
    let e = this.loaded.get(dir);
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
      this.loaded.set(dir, e);
    }
    return e;
  }

  /** What a loaded directory's caches hold; undefined when it is not loaded. */
  async stats(dir: string): Promise<LocalStats | undefined> {
    const t = await this.loaded.get(dir);
    if (!t) return undefined;
    return {
      encoder: { cacheBytes: t.encoder.cacheBytes, cacheEntries: t.encoder.cacheEntries, last: t.encoder.stats },
      chats: { ...t.chats.stats, bytes: t.chats.bytes },
    };
  }
}

/** A prompt's ids with a loaded tokenizer, or why not; its only awaits are the job's pauses between slices. */
export async function tokenizeLoaded(t: LoadedTokenizer, p: TextPrompt, job: LocalJob): Promise<TokenizeOutcome> {
  const { encoder, chats } = t;
  try {
    if (p.kind === 'prompt') {
      const { text, addSpecialTokens } = promptText(chats, p);
      const { ids, reusedChars } = await encoder.encodeAsync(text, addSpecialTokens, job.sliceChars, { pause: job.pause });
      return { tokens: ids, source: 'path', cached: reusedChars > 0 };
    }
    // a chat: its ids resume where those of the remembered rendering it starts with ended (those characters are not
    // walked again), and it leaves such a point on its own rendering for the next turn
    const chat = chats.render(p.fields.messages as unknown[], chatOptions(p.fields));
    if (chat.text.length > job.maxChars) return { fallback: 'too-large' };
    const { ids, reusedChars, resume } = await encoder.encodeAsync(chat.text, p.fields.add_special_tokens === true, job.sliceChars, {
      resume: chat.prefix?.attached,
      keepAt: chat.ownChars,
      pause: job.pause,
    });
    if (resume) chat.attach(resume, resume.ids.byteLength);
    return { tokens: ids, source: 'path', cached: reusedChars > 0 };
  } catch (err) {
    if (err instanceof DeadlinePassed) return { fallback: 'timeout' };
    return { fallback: err instanceof ChatTemplateError ? 'unsupported-body' : 'tokenizer-error' };
  }
}

/**
 * The text an in-process tokenizer tokenizes for a prompt, and whether with added special tokens, as vLLM does it: a
 * chat rendered through the template (vLLM's defaults: the generation prompt on, no added special tokens unless
 * `add_special_tokens`), a prompt with the special tokens added unless `add_special_tokens` is false. Throws
 * ChatTemplateError for a chat the template cannot render.
 */
export function promptText(tokenizer: ChatRenderer, p: TextPrompt): { text: string; addSpecialTokens: boolean } {
  const f = p.fields;
  if (p.kind === 'prompt') return { text: f.prompt as string, addSpecialTokens: f.add_special_tokens !== false };
  const text = tokenizer.renderChat(f.messages as unknown[], chatOptions(f));
  return { text, addSpecialTokens: f.add_special_tokens === true };
}

/** The template arguments of a chat's prompt fields. */
function chatOptions(f: Readonly<Record<string, unknown>>): ChatRenderOptions {
  const kwargs = isRecord(f.chat_template_kwargs) ? f.chat_template_kwargs : undefined;
  return {
    add_generation_prompt: optBool(f.add_generation_prompt),
    continue_final_message: optBool(f.continue_final_message),
    tools: Array.isArray(f.tools) ? f.tools : null,
    documents: Array.isArray(f.documents) ? f.documents : null,
    // the request's own template (refused before here unless trusted): top level, else in the kwargs, as vLLM takes it
    chat_template:
      typeof f.chat_template === 'string' ? f.chat_template : typeof kwargs?.chat_template === 'string' ? kwargs.chat_template : null,
    chat_template_kwargs: kwargs ?? null,
  };
}

/** A prompt's ids with an in-process tokenizer, at once, on this thread (the simulator's; see promptText). */
export function encodeInProcess(encoder: SegmentedEncoder, p: TextPrompt): Uint32Array {
  const { text, addSpecialTokens } = promptText(encoder.tokenizer, p);
  return encoder.encode(text, addSpecialTokens);
}

function optBool(v: unknown): boolean | undefined {
  return typeof v === 'boolean' ? v : undefined;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
