// Prompts whose ids an engine's /tokenize gave, found again by a later prompt that starts with one of them (a
// completion client's conversation, re-sent every turn with the answer and a new question appended), so that only the
// new text is sent to the engine. Pure: no I/O, no clock.
//
// A prompt is filed under a digest of its first `headChars` characters (and its scope: the model and whether special
// tokens are added); a later prompt looks there, newest first, and takes the longest earlier prompt that is a prefix of
// it (a digest of its own first `length` characters equals the earlier prompt's). The earlier ids are reused only where
// the new text begins at a place a tokenizer cuts anyway: the earlier prompt ends in a character that is not
// whitespace and the new text begins with a space (a byte-level BPE's pre-tokenizer starts a new word there; a
// boundary inside a word, or inside a run of whitespace, would merge across). Whether that holds for a model's
// tokenizer is checked by the caller against whole tokenizations (engine-tokenizer.ts).
import { createHash } from 'node:crypto';
import { ByteLru } from './token-cache.js';

/** An earlier prompt a new one starts with: its length in characters and its ids (shared: read, never write). */
export interface EarlierPrompt {
  readonly chars: number;
  readonly tokens: Uint32Array;
}

interface Filed {
  readonly chars: number;
  readonly digest: string;
  readonly tokens: Uint32Array;
}

/** earlier prompts kept under one head, newest first */
const PER_HEAD = 8;

export class PromptMemory {
  private readonly byHead: ByteLru<Filed[]>;

  constructor(
    maxBytes: number,
    /** characters a prompt must share with an earlier one to find it; shorter prompts are not filed */
    private readonly headChars = 512,
  ) {
    this.byHead = new ByteLru<Filed[]>(maxBytes, (list) => list.reduce((n, f) => n + f.tokens.byteLength + 64, 0));
  }

  /** Files a prompt's ids under `scope` (the model, and whether special tokens were added). */
  remember(scope: string, text: string, tokens: Uint32Array): void {
    if (text.length <= this.headChars) return;
    const key = this.headKey(scope, text);
    const digest = digestOf(text, text.length);
    const list = (this.byHead.get(key) ?? []).filter((f) => f.digest !== digest);
    list.unshift({ chars: text.length, digest, tokens });
    if (list.length > PER_HEAD) list.length = PER_HEAD;
    this.byHead.set(key, list);
  }

  /** The longest earlier prompt of `scope` that `text` starts with and continues at a safe cut; undefined: none. */
  longestPrefix(scope: string, text: string): EarlierPrompt | undefined {
    if (text.length <= this.headChars) return undefined;
    const list = this.byHead.get(this.headKey(scope, text));
    if (list === undefined) return undefined;
    let best: Filed | undefined;
    for (const f of list) {
      if (f.chars >= text.length || (best !== undefined && f.chars <= best.chars)) continue;
      if (!safeCut(text, f.chars)) continue;
      if (digestOf(text, f.chars) === f.digest) best = f;
    }
    return best === undefined ? undefined : { chars: best.chars, tokens: best.tokens };
  }

  get bytes(): number {
    return this.byHead.bytes;
  }

  private headKey(scope: string, text: string): string {
    return `${scope}\u0000${digestOf(text, this.headChars)}`;
  }
}

/** A cut at `at` starts a new word: the text before ends in a non-space, the text after begins with a space. */
export function safeCut(text: string, at: number): boolean {
  if (at <= 0 || at >= text.length || text.charCodeAt(at) !== 0x20) return false;
  const before = text.charCodeAt(at - 1);
  // not whitespace, and not the first half of a surrogate pair
  return !/\s/.test(text[at - 1] as string) && !(before >= 0xd800 && before <= 0xdbff);
}

function digestOf(text: string, chars: number): string {
  return createHash('sha256')
    .update(text.length === chars ? text : text.slice(0, chars))
    .digest('base64');
}
