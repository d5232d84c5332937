// The pure parts of the KV-aware routing benchmark (bench/kv.ts): traces in the public JSONL format of the Mooncake
// project's FAST'25 release (one request a line: `timestamp` ms, `input_length` and `output_length` tokens,
// `hash_ids` one id per 512-token block of the prompt, the last possibly partial, equal leading ids = shared prefix),
// a generator of such traces, the prompt text that makes a simulator's tokenizer see the same block structure at a
// smaller scale, and the hit rate one LRU cache of a given size reaches on the same requests. No I/O, no processes.
import { mulberry32 } from './routing-quality.js';

/** Tokens per block in the trace format. */
export const TRACE_BLOCK_TOKENS = 512;

export interface TraceRow {
  /** arrival, ms from the start */
  readonly timestamp: number;
  readonly input_length: number;
  readonly output_length: number;
  readonly hash_ids: readonly number[];
}

/** Parses JSONL; every malformed line is an error naming its number. Rows come back in timestamp order (stable). */
export function parseTrace(text: string): TraceRow[] {
  const rows: TraceRow[] = [];
  const lines = text.split('\n');
  for (const [i, raw] of lines.entries()) {
    const line = raw.trim();
    if (line === '') continue;
    let v: unknown;
    try {
      v = JSON.parse(line);
    } catch {
      throw new Error(`trace line ${i + 1}: not JSON`);
    }
    const o = v as Record<string, unknown>;
    const num = (name: string): number => {
      const n = o[name];
      if (typeof n !== 'number' || !Number.isFinite(n) || n < 0) throw new Error(`trace line ${i + 1}: ${name} must be a number >= 0`);
      return n;
    };
    if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new Error(`trace line ${i + 1}: not an object`);
    const ids = o.hash_ids;
    if (!Array.isArray(ids) || ids.some((x) => !Number.isSafeInteger(x) || (x as number) < 0))
      throw new Error(`trace line ${i + 1}: hash_ids must be a list of whole numbers >= 0`);
    const input = num('input_length');
    // a prompt of n ids holds more than (n - 1) x 512 tokens and at most n x 512; some traces round, so only the gross
    // mismatch (more ids than the tokens can fill) is refused
    if (Math.ceil(input / TRACE_BLOCK_TOKENS) < ids.length - 1)
      throw new Error(`trace line ${i + 1}: ${ids.length} hash_ids for ${input} input tokens`);
    rows.push({ timestamp: num('timestamp'), input_length: input, output_length: num('output_length'), hash_ids: ids as number[] });
  }
  return rows
    .map((r, i) => ({ r, i }))
    .sort((a, b) => a.r.timestamp - b.r.timestamp || a.i - b.i)
    .map((x) => x.r);
}

export function formatTrace(rows: readonly TraceRow[]): string {
  return rows.map((r) => JSON.stringify(r)).join('\n') + (rows.length ? '\n' : '');
}

// ---- generator ----

export interface GeneratorOptions {
  readonly requests: number;
  readonly seed: number;
  /** applications, each with its own system prompt, by Zipf popularity (default 10) */
  readonly systemPrompts?: number;
  /** documents that conversations discuss, by Zipf popularity (default 40) */
  readonly documents?: number;
  /** conversations starting per second on average (Poisson; default 2) */
  readonly conversationsPerSecond?: number;
}

/**
 * A trace of multi-turn conversations: each opens with its application's system prompt (2 to 12 blocks; ten
 * applications by Zipf popularity), half of them then quote one of 40 documents (4 to 24 blocks, Zipf), and every turn
 * sends the whole history again plus the answer and a new question (1 to 4 blocks), so prompts grow turn by turn.
 * Ids are given as a prefix tree gives them: a block's id stands for the block and everything before it, as in the
 * Mooncake traces (the same document after two system prompts has two sets of ids). Deterministic from the seed.
 */
export function generateTrace(opts: GeneratorOptions): TraceRow[] {
  const rnd = mulberry32(opts.seed);
  const nSystems = opts.systemPrompts ?? 10;
  const nDocs = opts.documents ?? 40;
  const rate = opts.conversationsPerSecond ?? 2;
  const zipfPicker = (n: number): (() => number) => {
    const w = Array.from({ length: n }, (_, i) => 1 / (i + 1));
    const total = w.reduce((a, b) => a + b, 0);
    return () => {
      let r = rnd() * total;
      for (let i = 0; i < n; i++) {
        r -= w[i] as number;
        if (r <= 0) return i;
      }
      return n - 1;
    };
  };
  const pickSystem = zipfPicker(nSystems);
  const pickDoc = zipfPicker(nDocs);
  const systemBlocks = Array.from({ length: nSystems }, () => 2 + Math.floor(rnd() * 11));
  const docBlocks = Array.from({ length: nDocs }, () => 4 + Math.floor(rnd() * 21));
  const exp = (mean: number): number => -Math.log(1 - rnd()) * mean;
  // the prefix tree: (parent id, what the block holds) -> id
  const tree = new Map<string, number>();
  let nextId = 0;
  const child = (parent: number, content: string): number => {
    const k = `${parent}/${content}`;
    let id = tree.get(k);
    if (id === undefined) {
      id = nextId++;
      tree.set(k, id);
    }
    return id;
  };
  const rows: TraceRow[] = [];
  let start = 0;
  for (let conv = 0; rows.length < opts.requests; conv++) {
    start += exp(1000 / rate);
    const sys = pickSystem();
    const doc = rnd() < 0.5 ? pickDoc() : -1;
    // the full blocks every later turn repeats
    const history: number[] = [];
    let parent = -1;
    const push = (content: string): void => {
      parent = child(parent, content);
      history.push(parent);
    };
    for (let b = 0; b < (systemBlocks[sys] as number); b++) push(`s${sys}.${b}`);
    if (doc >= 0) for (let b = 0; b < (docBlocks[doc] as number); b++) push(`d${doc}.${b}`);
    const turns = 1 + Math.floor(rnd() * 8);
    let at = start;
    for (let t = 0; t < turns && rows.length < opts.requests; t++) {
      // the new question; its last block is partial and unique to this request (the next turn fills it differently)
      const fresh = 1 + Math.floor(rnd() * 4);
      const ids = [...history];
      let p = parent;
      for (let b = 0; b < fresh; b++) {
        p = child(p, `c${conv}.${t}.${b}`);
        ids.push(p);
      }
      const partial = 1 + Math.floor(rnd() * TRACE_BLOCK_TOKENS);
      const output = 20 + Math.floor(rnd() * 400);
      rows.push({
        timestamp: Math.round(at),
        input_length: (ids.length - 1) * TRACE_BLOCK_TOKENS + partial,
        output_length: output,
        hash_ids: ids,
      });
      // the next turn repeats this prompt's full blocks, then the rest of it and the answer as new blocks
      for (let b = 0; b < fresh - 1; b++) {
        parent = ids[history.length] as number;
        history.push(parent);
      }
      const carried = Math.ceil((partial + output) / TRACE_BLOCK_TOKENS);
      for (let b = 0; b < carried; b++) push(`a${conv}.${t}.${b}`);
      at += 5_000 + exp(20_000);
    }
  }
  return rows.sort((a, b) => a.timestamp - b.timestamp);
}

// ---- prompts at a smaller scale ----

export interface Scale {
  /** tokens a 512-token trace block becomes (`--block-scale`) */
  readonly blockTokens: number;
  /** the engines' KV-cache block size; must divide blockTokens so that trace blocks end on engine blocks */
  readonly kvBlockSize: number;
}

/** Tokens of each of the row's blocks at this scale (the last, partial block proportionally, at least 1). */
export function scaledBlockTokens(row: TraceRow, blockTokens: number): number[] {
  const n = row.hash_ids.length;
  const out = new Array<number>(n).fill(blockTokens);
  if (n > 0) {
    const last = Math.min(TRACE_BLOCK_TOKENS, Math.max(1, row.input_length - (n - 1) * TRACE_BLOCK_TOKENS));
    out[n - 1] = Math.max(1, Math.round((last * blockTokens) / TRACE_BLOCK_TOKENS));
  }
  return out;
}

/** One word per token position of a block: letters and digits only, so every tokenizer of the simulator sees one token. */
export function blockWord(hashId: number, position: number): string {
  return `h${hashId}t${position}`;
}

/**
 * The prompt of a row: for block i with id h, the words h<h>t0 ... h<h>t<k-1>, space separated. Equal ids give
 * identical token runs, so the engine's block hashes (chained from the first token) are equal exactly as far as the
 * rows' leading ids are.
 */
export function promptText(row: TraceRow, blockTokens: number, vocabulary?: readonly string[]): string {
  const sizes = scaledBlockTokens(row, blockTokens);
  const words: string[] = [];
  row.hash_ids.forEach((h, i) => {
    for (let j = 0; j < (sizes[i] as number); j++) words.push(vocabulary ? vocabularyWord(vocabulary, h, j) : blockWord(h, j));
  });
  // a vocabulary's words are tokens with their leading space: " w1 w2 ..." is one token a word
  return vocabulary ? ` ${words.join(' ')}` : words.join(' ');
}

/** The word at a block position from a real tokenizer's single-token words (equal ids, equal words). */
function vocabularyWord(vocabulary: readonly string[], hashId: number, position: number): string {
  const h = (Math.imul(hashId + 1, 0x9e3779b1) ^ Math.imul(position + 1, 0x85ebca6b)) >>> 0;
  return vocabulary[h % vocabulary.length] as string;
}

/**
 * Words a byte-level BPE tokenizer (tokenizer.json; Qwen, Llama 3, GPT-2 style) holds as one token with a leading space
 * (`Ġword`), lower-case letters only: a prompt of them is exactly one token a word, as the word-level tokenizer's.
 */
export function singleTokenWords(tokenizerJson: string): string[] {
  const vocab = (JSON.parse(tokenizerJson) as { model?: { vocab?: Record<string, number> } }).model?.vocab ?? {};
  return Object.keys(vocab)
    .filter((k) => /^\u0120[a-z]{4,9}$/.test(k))
    .map((k) => k.slice(1))
    .sort();
}

export interface RowBlocks {
  /** prompt tokens at this scale */
  readonly tokens: number;
  /** a key per full engine block, chained: equal keys = equal prompt up to that block's end */
  readonly keys: number[];
}

/** The engine blocks of a row's prompt as chained 53-bit keys, computed from the ids (the text need not be built). */
export function rowBlocks(row: TraceRow, scale: Scale): RowBlocks {
  const { blockTokens, kvBlockSize } = scale;
  if (blockTokens % kvBlockSize !== 0)
    throw new Error(`--block-scale ${blockTokens} is not a multiple of the KV block size ${kvBlockSize}`);
  const sizes = scaledBlockTokens(row, blockTokens);
  const tokens = sizes.reduce((a, b) => a + b, 0);
  const keys: number[] = [];
  let a = 0x811c9dc5 | 0;
  let b = 0x01234567 | 0;
  const mix = (x: number): void => {
    a = Math.imul(a ^ x, 0x01000193);
    b = Math.imul(b ^ x, 0x5bd1e995);
    a ^= a >>> 15;
    b ^= b >>> 13;
  };
  let done = 0;
  for (const [i, h] of row.hash_ids.entries()) {
    const size = sizes[i] as number;
    for (let sub = 0; (sub + 1) * kvBlockSize <= size; sub++) {
      mix(h % 0x100000000);
      mix(Math.floor(h / 0x100000000));
      mix(sub);
      keys.push((a >>> 0) * 0x200000 + (b >>> 11));
      done++;
    }
    // a partial trace block ends the prompt (only the last can be)
    if (size % kvBlockSize !== 0) break;
  }
  if (done !== Math.floor(tokens / kvBlockSize)) throw new Error('rowBlocks: a partial block before the last');
  return { tokens, keys };
}

// ---- one cache with everyone's capacity ----

/**
 * An LRU of block keys that reuses a request's leading blocks up to the first missing one, as the simulator's prefix
 * cache does (and vLLM's): the deepest blocks are marked used first, so eviction takes a prefix's tail before its head.
 */
export class BlockLru {
  private readonly lru = new Map<number, true>();

  constructor(readonly capacity: number) {}

  get size(): number {
    return this.lru.size;
  }

  /** Leading blocks found; then all of them cached as just used. */
  admit(keys: readonly number[]): number {
    let hits = 0;
    while (hits < keys.length && this.lru.has(keys[hits] as number)) hits++;
    if (this.capacity <= 0) return 0;
    for (let i = keys.length - 1; i >= 0; i--) {
      const k = keys[i] as number;
      this.lru.delete(k);
      this.lru.set(k, true);
    }
    while (this.lru.size > this.capacity) this.lru.delete(this.lru.keys().next().value as number);
    return hits;
  }
}

export interface CacheFigures {
  /** distinct engine blocks over the rows */
  readonly distinctBlocks: number;
  /** engine blocks over the rows, repeats counted */
  readonly totalBlocks: number;
  /** prompt tokens at this scale */
  readonly tokens: number;
}

export function cacheFigures(rows: readonly TraceRow[], scale: Scale): CacheFigures {
  const seen = new Set<number>();
  let total = 0;
  let tokens = 0;
  for (const r of rows) {
    const b = rowBlocks(r, scale);
    tokens += b.tokens;
    total += b.keys.length;
    for (const k of b.keys) seen.add(k);
  }
  return { distinctBlocks: seen.size, totalBlocks: total, tokens };
}

/**
 * Token-weighted hit rate of one LRU of `capacity` blocks serving the rows in order, counted as the simulator counts
 * (hit tokens = leading cached blocks x block size, never the prompt's last token; over prompt tokens).
 */
export function lruHitRate(rows: readonly TraceRow[], scale: Scale, capacity: number): number {
  const cache = new BlockLru(capacity);
  let queries = 0;
  let hits = 0;
  for (const r of rows) {
    const b = rowBlocks(r, scale);
    queries += b.tokens;
    hits += Math.min(cache.admit(b.keys) * scale.kvBlockSize, Math.max(0, b.tokens - 1));
  }
  return queries > 0 ? hits / queries : 0;
}
