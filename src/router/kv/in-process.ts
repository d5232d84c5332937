// Token ids from a Hugging Face tokenizer directory in this process (hf-tokenizer.ts), earlier turns of a conversation
// reused: their rendering where the template allows (chat-prefix.ts), their ids piece by piece (token-cache.ts). A
// directory loads once; one that does not load is not tried again. Nothing here fails a request: a prompt it cannot
// tokenize comes back as a fallback reason.
import { ChatPrefixCache, type ChatRenderer } from './chat-prefix.js';
import { type ChatRenderOptions, ChatTemplateError, HfTokenizer } from './hf-tokenizer.js';
import type { TextPrompt, TokenizeOutcome } from './prompt-fields.js';
import { type EncodeResume, SegmentedEncoder } from './token-cache.js';

/** A loaded tokenizer directory: its piece cache and its rendered-chat cache. */
interface Loaded {
  readonly encoder: SegmentedEncoder;
  /** rendered chats, each with where its ids can be resumed from */
  readonly chats: ChatPrefixCache<EncodeResume>;
}

export interface InProcessOptions {
  /** bytes each tokenizer's piece cache and rendered-chat cache may hold */
  readonly cacheBytes: number;
  /** characters tokenized between two turns of the event loop (default 8 Ki; about 2-5 ms of work) */
  readonly sliceChars?: number;
}

/** The loaded tokenizer directories of this process; see the file's header. */
export class InProcessTokenizers {
  private readonly loaded = new Map<string, Promise<Loaded | undefined>>();
  private readonly sliceChars: number;

  constructor(private readonly opts: InProcessOptions) {
    this.sliceChars = opts.sliceChars ?? 8192;
  }

  /** Loads a directory ahead of its first use; false when it does not load (it is not tried again). */
  async preload(dir: string): Promise<boolean> {
    return (await this.load(dir)) !== undefined;
  }

  /** The piece cache of a loaded tokenizer directory (for stats and tests). */
  async encoder(dir: string): Promise<SegmentedEncoder | undefined> {
    return (await this.load(dir))?.encoder;
  }

  /** The rendered-chat cache of a loaded tokenizer directory (for stats and tests). */
  async chats(dir: string): Promise<ChatPrefixCache<EncodeResume> | undefined> {
    return (await this.load(dir))?.chats;
  }

  async tokenize(dir: string, p: TextPrompt): Promise<TokenizeOutcome> {
    const tokenizer = await this.load(dir);
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

  private load(dir: string): Promise<Loaded | undefined> {
    let e = this.loaded.get(dir);
    if (!e) {
      e = HfTokenizer.load(dir).then(
        (t) => {
          const chats = new ChatPrefixCache<EncodeResume>(t, this.opts.cacheBytes);
          // the template checks run at load, not on the first request
          chats.prepare();
          return { encoder: new SegmentedEncoder(t, this.opts.cacheBytes), chats };
        },
        () => undefined,
      );
      this.loaded.set(dir, e);
    }
    return e;
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
