// What the router remembers of tokenizations, so that a conversation re-sent every turn is not tokenized whole every
// turn. Two caches, both bounded by bytes (least recently used out first):
//  - `SegmentedEncoder` (in-process tokenizer): a rendered chat is cut after each special token that splits text on its
//    own (<|eot_id|>, <|im_end|>, ...); each piece's ids are kept under the piece's own text chained to the entry of
//    the piece before it (its number), so a new turn finds its earlier turns' pieces and tokenizes only the new tail.
//    The keys are the texts themselves, not digests: a lookup costs the Map's own string hash and comparison, and two
//    different texts can never share an entry. Reuse is exact only where no merge or normalizer rule reaches across
//    such a token: the tokenizer checks that when it loads (`segmentable`), else every text is tokenized whole.
//  - whole answers (the engine's /tokenize), under a hash of the model and the request's prompt fields.
import { LRUCache } from 'lru-cache';
import type { HfTokenizer } from './hf-tokenizer.js';

/**
 * A map bounded by the bytes of what it holds, least recently used out first: lru-cache's, whose eviction is O(1). (A
 * Map used as the queue, iterated from its first key to evict, walks every key deleted since the table was rebuilt.)
 */
export class ByteLru<V extends {}> {
  private readonly lru: LRUCache<string, V>;

  constructor(maxBytes: number, sizeOf: (value: V) => number) {
    this.lru = new LRUCache<string, V>({
      maxSize: Math.max(1, maxBytes),
      sizeCalculation: (value, key) => sizeOf(value) + key.length * 2 + ENTRY_OVERHEAD,
    });
  }

  get(key: string): V | undefined {
    return this.lru.get(key);
  }

  /** An entry larger than the whole bound is not kept (and one it replaces is gone). */
  set(key: string, value: V): void {
    this.lru.set(key, value);
  }

  get bytes(): number {
    return this.lru.calculatedSize;
  }

  get size(): number {
    return this.lru.size;
  }

  clear(): void {
    this.lru.clear();
  }
}

/** A rough cost of a Map entry and its record beyond the key's characters and the value's own bytes. */
const ENTRY_OVERHEAD = 96;

export interface EncodeResult {
  readonly ids: Uint32Array;
  /** characters of the text whose ids came from the cache */
  readonly reusedChars: number;
  /** where a text that starts with this one's first `keepAt` characters can resume (when asked for and known) */
  readonly resume?: EncodeResume;
  /** characters that came with the resume point handed in (not walked) */
  readonly resumedChars?: number;
}

/**
 * A point an encoding can resume from: the text's first `chars` characters end a piece (numbered `piece`) and their ids
 * are `ids`. Whoever hands one back to `encodeAsync` vouches that the new text starts with those same characters.
 */
export interface EncodeResume {
  readonly chars: number;
  readonly piece: number;
  readonly ids: Uint32Array;
}

/** Where to start from and where to stop remembering. */
export interface EncodeFrom {
  /** a resume point of an earlier text the new one starts with (its cached pieces are then not walked again) */
  readonly resume?: EncodeResume | undefined;
  /** the offset to make a resume point for (the last piece end at or before it), returned as `resume` */
  readonly keepAt?: number | undefined;
  /**
   * what is awaited between two slices (default: one turn of the event loop); it may throw to stop the encoding there
   * (the tokenizer worker's deadline: tokenize-worker.ts)
   */
  readonly pause?: (() => Promise<void>) | undefined;
}

export interface EncodeStats {
  /** characters of the text whose ids came from the cache */
  readonly reusedChars: number;
  /** of those, characters not walked at all: they came with a resume point */
  readonly resumedChars?: number;
  /** characters tokenized now */
  readonly encodedChars: number;
}

/** A cached piece: its ids, and its number, which the keys of the pieces that follow it name. */
interface Piece {
  readonly id: number;
  readonly ids: Uint32Array;
}

/** The key of a piece of text that follows the piece numbered `parent` (0: the text's start). */
function pieceKey(parent: number, text: string): string {
  return `${parent}\u0001${text}`;
}

/** Encodes texts with an HfTokenizer, reusing the ids of pieces (ending at a boundary token) seen before. */
export class SegmentedEncoder {
  private readonly boundary: RegExp | undefined;
  private readonly boundaryIds: ReadonlySet<number>;
  private readonly cache: ByteLru<Piece>;
  private nextPiece = 1;
  private lastStats: EncodeStats = { reusedChars: 0, encodedChars: 0 };

  constructor(
    readonly tokenizer: HfTokenizer,
    maxBytes: number,
  ) {
    this.cache = new ByteLru<Piece>(maxBytes, (v) => v.ids.byteLength);
    const tokens = [...tokenizer.boundaryTokens.keys()].sort((a, b) => b.length - a.length);
    this.boundary = tokenizer.segmentable && tokens.length > 0 ? new RegExp(tokens.map(escapeRegExp).join('|'), 'g') : undefined;
    this.boundaryIds = new Set(tokenizer.boundaryTokens.values());
  }

  /** How the last encoding to finish went. */
  get stats(): EncodeStats {
    return this.lastStats;
  }

  get cacheBytes(): number {
    return this.cache.bytes;
  }

  get cacheEntries(): number {
    return this.cache.size;
  }

  /** The same ids as `tokenizer.encode(text, addSpecialTokens)`, at once. */
  encode(text: string, addSpecialTokens: boolean): Uint32Array {
    const steps = this.steps(text, addSpecialTokens, Number.POSITIVE_INFINITY);
    let r = steps.next();
    while (!r.done) r = steps.next();
    this.lastStats = { reusedChars: r.value.reusedChars, encodedChars: text.length - r.value.reusedChars };
    return r.value.ids;
  }

  /**
   * The same ids, tokenizing what is not cached in slices of about `sliceChars` (whole pieces), the event loop served
   * between slices: a long new conversation does not hold up every other request of this process for its whole
   * tokenization. Its own stats come back with the ids (`stats` are those of whichever encoding finished last).
   */
  async encodeAsync(text: string, addSpecialTokens: boolean, sliceChars = 8192, from: EncodeFrom = {}): Promise<EncodeResult> {
    const steps = this.steps(text, addSpecialTokens, sliceChars, from);
    const pause = from.pause ?? nextTurn;
    let r = steps.next();
    while (!r.done) {
      await pause();
      r = steps.next();
    }
    this.lastStats = {
      reusedChars: r.value.reusedChars,
      encodedChars: text.length - r.value.reusedChars,
      resumedChars: r.value.resumedChars ?? 0,
    };
    return r.value;
  }

  /** The work of one encoding; it yields where it may pause (between slices of uncached pieces). */
  private *steps(text: string, addSpecialTokens: boolean, sliceChars: number, from: EncodeFrom = {}): Generator<void, EncodeResult, void> {
    const wrap = this.tokenizer.wrap;
    if (!this.boundary || !wrap) return { ids: Uint32Array.from(this.tokenizer.encode(text, addSpecialTokens)), reusedChars: 0 };
    // a resume point: its characters are not looked at again
    const resume = from.resume !== undefined && from.resume.chars <= text.length ? from.resume : undefined;
    const origin = resume?.chars ?? 0;
    // where each piece ends (just after a boundary token); the cached pieces from the start, each under its own text
    // chained to the one before
    const ends: number[] = [];
    this.boundary.lastIndex = origin;
    for (let m = this.boundary.exec(text); m !== null; m = this.boundary.exec(text)) ends.push(m.index + m[0].length);
    const pieces: (Uint32Array | number[])[] = resume ? [resume.ids] : [];
    // the last piece end, its number and the ids up to it, for a resume point at or before `keepAt`
    const keepAt = from.keepAt ?? -1;
    let keep: { chars: number; piece: number; pieces: number } | undefined =
      resume && resume.chars <= keepAt ? { chars: resume.chars, piece: resume.piece, pieces: 1 } : undefined;
    let parent = resume?.piece ?? 0;
    let k = 0;
    for (let from = origin; k < ends.length; k++) {
      const end = ends[k] as number;
      const hit = this.cache.get(pieceKey(parent, text.slice(from, end)));
      if (!hit) break;
      pieces.push(hit.ids);
      parent = hit.id;
      from = end;
      if (end <= keepAt) keep = { chars: end, piece: parent, pieces: pieces.length };
    }
    const reusedChars = k > 0 ? (ends[k - 1] as number) : origin;
    // the rest, whole pieces a slice at a time (each slice starts right after a boundary token), then what follows
    // the last boundary token
    let start = reusedChars;
    while (k < ends.length) {
      let j = k;
      while (j + 1 < ends.length && (ends[j + 1] as number) - start <= sliceChars) j++;
      const ids = this.tokenizer.encode(text.slice(start, ends[j]), false);
      const stored = this.storePieces(text, ids, ends, start, k, j + 1, parent);
      if (stored !== undefined) {
        for (const piece of stored) {
          pieces.push(piece.ids);
          if (piece.end <= keepAt) keep = { chars: piece.end, piece: piece.id, pieces: pieces.length };
        }
        parent = (stored[stored.length - 1] as StoredPiece).id;
      } else {
        pieces.push(ids);
        parent = -1;
      }
      start = ends[j] as number;
      k = j + 1;
      // a pause only before another slice: what follows the last boundary token (a chat's generation prompt) is short
      if (k < ends.length) yield;
    }
    if (start < text.length) pieces.push(this.tokenizer.encode(text.slice(start), false));
    const before = addSpecialTokens ? wrap.before : [];
    const after = addSpecialTokens ? wrap.after : [];
    let n = before.length + after.length;
    for (const p of pieces) n += p.length;
    const out = new Uint32Array(n);
    let at = 0;
    for (const id of before) out[at++] = id;
    for (const p of pieces) {
      out.set(p, at);
      at += p.length;
    }
    for (const id of after) out[at++] = id;
    let resumeAt: EncodeResume | undefined;
    if (keep !== undefined) {
      let count = 0;
      for (let i = 0; i < keep.pieces; i++) count += (pieces[i] as Uint32Array | number[]).length;
      // a copy, not a view: the ids returned may be handed to another thread (their buffer transferred)
      resumeAt = { chars: keep.chars, piece: keep.piece, ids: out.slice(before.length, before.length + count) };
    }
    return { ids: out, reusedChars, resumedChars: origin, ...(resumeAt ? { resume: resumeAt } : {}) };
  }

  /**
   * Cuts `ids` (the text of pieces first..last-1, from `start`) after each boundary id and keeps each piece under its
   * text chained to `parent`; returns the pieces kept, or undefined (no piece can follow) when the ids do not cut one to
   * one or no piece precedes them.
   */
  private storePieces(
    text: string,
    ids: readonly number[],
    ends: readonly number[],
    start: number,
    first: number,
    last: number,
    parent: number,
  ): StoredPiece[] | undefined {
    if (parent < 0) return undefined;
    const cuts: number[] = [];
    for (let i = 0; i < ids.length; i++) if (this.boundaryIds.has(ids[i] as number)) cuts.push(i + 1);
    // a boundary token's text inside a longer added token would break the one-to-one match: keep nothing then
    if (cuts.length !== last - first || cuts[cuts.length - 1] !== ids.length) return undefined;
    const out: StoredPiece[] = [];
    let at = 0;
    let from = start;
    for (let k = first; k < last; k++) {
      const cut = cuts[k - first] as number;
      const end = ends[k] as number;
      const piece: Piece = { id: this.nextPiece++, ids: Uint32Array.from(ids.slice(at, cut)) };
      this.cache.set(pieceKey(parent, text.slice(from, end)), piece);
      out.push({ ...piece, end });
      parent = piece.id;
      at = cut;
      from = end;
    }
    return out;
  }
}

/** A piece just kept, and where it ends in the text. */
interface StoredPiece extends Piece {
  readonly end: number;
}

/** One turn of the event loop. */
function nextTurn(): Promise<void> {
  return new Promise<void>((resolve) => setImmediate(resolve));
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
