// The router's own name for a KV-cache block: a hash chained from the parent block's key and the block's token ids,
// so that a block's key says "these tokens after exactly that prefix". Engines hash with a seed the router cannot know
// (vLLM's NONE_HASH is random per process), so the index keys blocks by this function on both sides: the token ids of
// an engine's BlockStored events and the token ids of a request. Keys are 53-bit integers (exact as JS numbers,
// fast as Map keys); at a million blocks the chance of any collision is about 1e-4, and a collision only costs a
// routing preference, never a wrong answer.
export type BlockKey = number;

/** The key a chain starts from: the base model's blocks and each LoRA adapter's blocks live in separate chains. */
export function rootKey(lora?: string): BlockKey {
  if (lora === undefined || lora === '') return 0;
  let a = 0x811c9dc5 | 0;
  let b = 0x9747b28c | 0;
  for (let i = 0; i < lora.length; i++) {
    const c = lora.charCodeAt(i);
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(b ^ c, 0x5bd1e995);
  }
  return combine(fmix(a), fmix(b ^ lora.length));
}

/** The key of the block holding tokens[start..end) whose parent block has key `parent`. */
export function nextKey(parent: BlockKey, tokens: ArrayLike<number>, start: number, end: number): BlockKey {
  let a = (parent % 0x100000000) ^ 0x2545f491;
  let b = Math.floor(parent / 0x100000000) ^ 0x6c078965;
  for (let i = start; i < end; i++) {
    const t = tokens[i] as number;
    a = Math.imul(a ^ t, 0x01000193);
    a ^= a >>> 15;
    b = Math.imul(b ^ t, 0x5bd1e995);
    b ^= b >>> 13;
  }
  return combine(fmix(a ^ (end - start)), fmix(b + (end - start)));
}

/** Keys of every full block of `tokens` (a trailing partial block is never cached by an engine, so it has none). */
export function blockKeys(tokens: ArrayLike<number>, blockSize: number, lora?: string): BlockKey[] {
  const keys: BlockKey[] = [];
  let key = rootKey(lora);
  for (let end = blockSize; end <= tokens.length; end += blockSize) {
    key = nextKey(key, tokens, end - blockSize, end);
    keys.push(key);
  }
  return keys;
}

/** A prompt's tokens as RequestBlocks: its keys at each block size asked for, computed once per size. */
export function requestBlocks(
  tokens: ArrayLike<number>,
  lora?: string,
): { readonly tokens: number; keysAt(blockSize: number): readonly BlockKey[] } {
  let size = 0;
  let keys: BlockKey[] = [];
  let others: Map<number, BlockKey[]> | undefined;
  return {
    tokens: tokens.length,
    keysAt(blockSize: number): readonly BlockKey[] {
      if (size === blockSize) return keys;
      if (size === 0) {
        size = blockSize;
        keys = blockKeys(tokens, blockSize, lora);
        return keys;
      }
      others ??= new Map();
      let k = others.get(blockSize);
      if (k === undefined) {
        k = blockKeys(tokens, blockSize, lora);
        others.set(blockSize, k);
      }
      return k;
    },
  };
}

function fmix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h;
}

function combine(lo: number, hi: number): BlockKey {
  return (hi & 0x1fffff) * 0x100000000 + (lo >>> 0);
}
