// `llm-router sim --tokenizer DIR`: the simulator tokenizes with a Hugging Face tokenizer directory, through the
// router's own in-process tokenizer (src/router/kv), so its prefix cache, its KV-cache events and its /tokenize use
// the ids a real engine with that tokenizer computes, and a router in path mode computes the same. Earlier turns of a
// conversation are reused as the router reuses them (the piece cache).
import { ChatTemplateError, HfTokenizer } from '../../router/kv/hf-tokenizer.js';
import { encodeInProcess, promptFields } from '../../router/kv/request-tokens.js';
import { SegmentedEncoder } from '../../router/kv/token-cache.js';
import { promptOf, renderChat, type SimTokenizer } from './tokenizer.js';

/** Bytes of token ids the simulator keeps for reuse. */
const CACHE_BYTES = 32 * 1024 * 1024;

export class HfSimTokenizer implements SimTokenizer {
  private readonly encoder: SegmentedEncoder;

  constructor(readonly tokenizer: HfTokenizer) {
    this.encoder = new SegmentedEncoder(tokenizer, CACHE_BYTES);
  }

  static async load(dir: string): Promise<HfSimTokenizer> {
    return new HfSimTokenizer(await HfTokenizer.load(dir));
  }

  encode(text: string): number[] {
    return Array.from(this.encoder.encode(text, false));
  }

  /**
   * As vLLM: a chat through the chat template with the request's template arguments, a prompt with the special tokens
   * added unless `add_special_tokens` is false, token ids as given. A body the template refuses (vLLM answers 400) or
   * with no prompt (`input` of an embeddings request) falls back to its text as the word-level tokenizer reads it.
   */
  encodeBody(body: Record<string, unknown>): number[] {
    const p = promptFields(body);
    if (p.kind === 'ids') return Array.from(p.tokens);
    if (p.kind === 'chat' || p.kind === 'prompt') {
      try {
        return Array.from(encodeInProcess(this.encoder, p));
      } catch (err) {
        if (!(err instanceof ChatTemplateError)) throw err;
      }
    }
    const prompt = promptOf(body);
    if (prompt.kind === 'ids') return [...prompt.ids];
    return this.encode(prompt.kind === 'text' ? prompt.text : renderChat(prompt.messages, prompt.addGenerationPrompt));
  }
}
