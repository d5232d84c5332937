// The engine's prefix cache, modelled on vLLM's automatic prefix caching: the prompt's token ids in blocks of
// `blockTokens`, each full block named by a hash chained from its parent block's and its own tokens, held in an LRU of
// `capacity` blocks. A request reuses its leading blocks up to the first one missing; that decides how much prefill
// it skips. The names here are the cache's own; the hashes an engine publishes (kv-cache.ts) are seeded per process.
import { LRUCache } from 'lru-cache';
import { contentText, WordTokenizer } from './tokenizer.js';

/** The prompt text the engine would tokenise: chat messages (role, then content) in order, or the prompt / input. */
export function renderPrompt(body: Record<string, unknown>): string {
  let text = '';
  if (body.system !== undefined) text += contentText(body.system) + '\n';
  if (Array.isArray(body.messages)) {
    for (const m of body.messages as unknown[]) {
      if (typeof m !== 'object' || m === null) continue;
      const msg = m as { role?: unknown; content?: unknown };
      text += `${typeof msg.role === 'string' ? msg.role : ''}\n${contentText(msg.content)}\n`;
    }
    return text;
  }
  const prompt = body.prompt ?? body.input;
  if (typeof prompt === 'string') return text + prompt;
  if (Array.isArray(prompt) && prompt.length > 0) {
    const first: unknown = prompt[0];
    if (typeof first === 'string') return text + first;
    if (typeof first === 'number') return text + prompt.join(' ');
  }
  return text;
}

export interface PromptBlocks {
  /** tokens in the prompt (words and punctuation marks, as the simulator counts them) */
  readonly tokens: number;
  /** one id per full block, each covering every token before its end */
  readonly blocks: number[];
}

const WORDS = new WordTokenizer();

/** Tokens of a text (the word-level tokenizer) and the chained ids of its full blocks. */
export function promptBlocks(text: string, blockTokens: number): PromptBlocks {
  const ids = WORDS.encode(text);
  return { tokens: ids.length, blocks: blockIds(ids, blockTokens) };
}

/**
 * Chained ids of the full blocks of `tokens`: each from its parent's id and its own token ids, so equal ids mean equal
 * prefixes. Two 32-bit FNV-1a variants make a 53-bit id, so distinct prefixes practically never collide. A LoRA
 * adapter's blocks start from a root of their own: the same tokens under another adapter are other blocks.
 */
export function blockIds(tokens: readonly number[], blockTokens: number, lora?: string): number[] {
  const blocks: number[] = [];
  let a = 0x811c9dc5 | 0;
  let b = 0x01234567 | 0;
  if (lora !== undefined) {
    for (let i = 0; i < lora.length; i++) {
      a = Math.imul(a ^ lora.charCodeAt(i), 0x01000193);
      b = Math.imul(b ^ lora.charCodeAt(i), 0x5bd1e995);
    }
    a = Math.imul(a ^ 0x2f, 0x01000193);
    b = Math.imul(b ^ 0x2f, 0x5bd1e995);
  }
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i] as number;
    a = Math.imul(a ^ (t & 0xffff), 0x01000193);
    a = Math.imul(a ^ (t >>> 16), 0x01000193);
    b = Math.imul(b ^ t, 0x5bd1e995);
    b ^= b >>> 15;
    if ((i + 1) % blockTokens === 0) blocks.push((a >>> 0) * 0x200000 + (b >>> 11));
  }
  return blocks;
}

/** What admitting one request's blocks did to the cache. */
export interface Admission<V> {
  /** leading blocks found in the cache */
  readonly hits: number;
  /** values of the blocks cached for this request, in prompt order (those after the hits) */
  readonly stored: V[];
  /** values of the blocks evicted to make room, least recently used first */
  readonly evicted: V[];
}

/**
 * An LRU of block ids, each with a value (the engine's published hash, or `true`). Capacity 0 caches nothing.
 */
export class PrefixCache<V extends {} = true> {
  // lru-cache: O(1) eviction of the least recently used (a Map used as the queue walks every deleted key to find its
  // first one, which made each admit past the capacity slower the longer the simulator ran)
  private readonly lru: LRUCache<number, V>;

  constructor(readonly capacity: number) {
    this.lru = new LRUCache({ max: Math.max(1, capacity) });
  }

  get size(): number {
    return this.lru.size;
  }

  /** Blocks of `blocks` found in the cache up to the first one missing; then they are all cached (admit). */
  lookup(blocks: readonly number[]): number {
    return this.admit(blocks, () => true as V).hits;
  }

  /**
   * Counts the leading blocks found, then caches the request's blocks: the missing ones (as many as fit) get a value
   * from `value(index, parent)` (parent: the value of the block before, undefined for the first), least recently
   * used blocks are evicted to make room first, and every block is marked as just used. Deeper blocks are marked used
   * first, so eviction takes a prefix's tail before its head (as vLLM frees blocks) and a cached block's parents are
   * cached too.
   */
  admit(blocks: readonly number[], value: (index: number, parent: V | undefined) => V): Admission<V> {
    let hits = 0;
    while (hits < blocks.length && this.lru.has(blocks[hits] as number)) hits++;
    if (this.capacity === 0) return { hits: 0, stored: [], evicted: [] };
    const kept = Math.min(blocks.length, this.capacity);
    const evicted: V[] = [];
    // the hits are touched first, so that making room never evicts them
    for (let i = hits - 1; i >= 0; i--) this.touch(blocks[i] as number, this.lru.peek(blocks[i] as number) as V);
    while (this.lru.size + (kept - Math.min(hits, kept)) > this.capacity) {
      const v = this.lru.pop();
      if (v === undefined) break;
      evicted.push(v);
    }
    const stored: V[] = [];
    let parent = hits > 0 ? this.lru.peek(blocks[hits - 1] as number) : undefined;
    for (let i = hits; i < kept; i++) {
      parent = value(i, parent);
      stored.push(parent);
    }
    for (let i = kept - 1; i >= 0; i--) {
      const id = blocks[i] as number;
      this.touch(id, i >= hits ? (stored[i - hits] as V) : (this.lru.peek(id) as V));
    }
    return { hits, stored, evicted };
  }

  /** The value of a cached block, without marking it used. */
  peek(id: number): V | undefined {
    return this.lru.peek(id);
  }

  /** Drops every block. */
  clear(): void {
    this.lru.clear();
  }

  /** marks the block the most recently used */
  private touch(id: number, v: V): void {
    this.lru.set(id, v);
  }
}
