// The engine's prefix cache, modelled on vLLM's automatic prefix caching: the prompt's tokens in blocks of
// `blockTokens`, each full block named by a hash of every token up to its end, held in an LRU of `capacity` blocks.
// A request reuses its leading blocks up to the first one missing; that decides how much prefill it skips.

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

function contentText(content: unknown): string {
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

export interface PromptBlocks {
  /** tokens in the prompt (words and punctuation marks, as the simulator counts them) */
  readonly tokens: number;
  /** one id per full block, each covering every token before its end */
  readonly blocks: number[];
}

function isWordChar(c: number): boolean {
  return (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122);
}

function isSpace(c: number): boolean {
  return c === 32 || (c >= 9 && c <= 13) || c === 0xa0 || c === 0x2028 || c === 0x2029 || c === 0xfeff;
}

/**
 * Tokens (a run of letters and digits, or one other non-space character, like countTokens) and the chained ids
 * of the full blocks. Two 32-bit FNV-1a variants make a 53-bit id, so distinct prefixes practically never collide.
 */
export function promptBlocks(text: string, blockTokens: number): PromptBlocks {
  const blocks: number[] = [];
  let a = 0x811c9dc5 | 0;
  let b = 0x01234567 | 0;
  let tokens = 0;
  let i = 0;
  const n = text.length;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (isSpace(c)) {
      i++;
      continue;
    }
    let end = i + 1;
    if (isWordChar(c)) while (end < n && isWordChar(text.charCodeAt(end))) end++;
    for (let j = i; j < end; j++) {
      const x = text.charCodeAt(j);
      a = Math.imul(a ^ x, 0x01000193);
      b = Math.imul(b ^ x, 0x5bd1e995);
    }
    // the token boundary is part of the identity: "ab c" and "a bc" differ
    a = Math.imul(a ^ 0x1f, 0x01000193);
    b = Math.imul(b ^ 0x1f, 0x5bd1e995);
    tokens++;
    if (tokens % blockTokens === 0) blocks.push((a >>> 0) * 0x200000 + (b >>> 11));
    i = end;
  }
  return { tokens, blocks };
}

/** An LRU of block ids. Capacity 0 caches nothing. */
export class PrefixCache {
  // Map iteration order is insertion order: the first key is the least recently used
  private readonly lru = new Map<number, true>();

  constructor(readonly capacity: number) {}

  get size(): number {
    return this.lru.size;
  }

  /**
   * Blocks of `blocks` found in the cache, counted from the first up to the first one missing; then every block
   * is cached as just used. Deeper blocks are marked used first, so eviction takes a prefix's tail before its head
   * (as vLLM frees blocks) and a cached block's parents are cached too.
   */
  lookup(blocks: readonly number[]): number {
    let hits = 0;
    while (hits < blocks.length && this.lru.has(blocks[hits] as number)) hits++;
    if (this.capacity === 0) return 0;
    for (let i = blocks.length - 1; i >= 0; i--) {
      const id = blocks[i] as number;
      this.lru.delete(id);
      this.lru.set(id, true);
    }
    while (this.lru.size > this.capacity) this.lru.delete(this.lru.keys().next().value as number);
    return hits;
  }
}
