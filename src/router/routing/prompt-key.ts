// The prefix key of a request: a hash of the leading blocks of its prompt, read straight from the parsed body
// (chat messages rendered in order, `prompt` for completions) without building the rendered string.
//
// The prompt is cut into blocks of `blockChars`; the key is the hash of the longest prefix that ends on one of a few
// block boundaries (1, 2, 4, 8 blocks); a prompt shorter than one block is one block. Only whole blocks count, so
// a prompt that grows (the next turn of a conversation) keeps its key until it crosses the next boundary, and two
// prompts that share their first 8 blocks share their key. At most 8 blocks are ever read: the cost is bounded.
// The first block is hashed whole; after it, a sample of the characters (see SAMPLE_STRIDE).
import { FNV_OFFSET, mix32 } from './hash.js';

// local, not imported: it is read once per character, and some loaders turn imports into property getters
const FNV_PRIME = 0x01000193;
/**
 * After the first block, every 4th character (by position in the rendered prompt) is hashed. Prompts that share a
 * prefix still share the key; prompts that differ in a run of 4 or more characters, or by an inserted or deleted one,
 * practically never do (one changed letter may go unseen: such prompts then share an engine, which costs nothing);
 * and reading 8 blocks costs about a third as much (hashing is most of a decision's cost at 256-char blocks).
 */
const SAMPLE_STRIDE = 4;

/** Block counts at which a prefix can end. */
export const PREFIX_BOUNDARIES: readonly number[] = [1, 2, 4, 8];

// Hashing state of the one key being computed: pick() is synchronous, so module state avoids any allocation.
let hash = 0;
let pos = 0;
let level = 0;
let nextBoundary = 0;
let boundaryHash = 0;
let reachedBoundary = false;
let block = 0;

/** Feeds the code units of `s`; true once the last boundary is reached (nothing more is needed). */
function feed(s: string): boolean {
  const n = s.length;
  let i = 0;
  while (i < n) {
    // a chunk never crosses a boundary, and the first boundary is the end of the first block
    const end = i + Math.min(nextBoundary - pos, n - i);
    let h = hash;
    if (pos < block) {
      for (let j = i; j < end; j++) h = Math.imul(h ^ s.charCodeAt(j), FNV_PRIME);
    } else {
      for (let j = i + ((SAMPLE_STRIDE - (pos % SAMPLE_STRIDE)) % SAMPLE_STRIDE); j < end; j += SAMPLE_STRIDE)
        h = Math.imul(h ^ s.charCodeAt(j), FNV_PRIME);
    }
    hash = h;
    pos += end - i;
    i = end;
    if (pos === nextBoundary && boundary()) return true;
  }
  return false;
}

/** Feeds one code unit (a separator or a token id). */
function feedCode(code: number): boolean {
  hash = Math.imul(hash ^ code, FNV_PRIME);
  pos++;
  return pos === nextBoundary && boundary();
}

function boundary(): boolean {
  boundaryHash = hash;
  reachedBoundary = true;
  level++;
  if (level === PREFIX_BOUNDARIES.length) return true;
  nextBoundary = block * (PREFIX_BOUNDARIES[level] as number);
  return false;
}

const SEPARATOR = 0x1e;

/** A content value: a string, or a list of parts ({text}, {type, image_url: {url}}) or strings. */
function feedContent(content: unknown): boolean {
  if (typeof content === 'string') return feed(content);
  if (!Array.isArray(content)) return false;
  for (let i = 0; i < content.length; i++) {
    const part: unknown = content[i];
    if (typeof part === 'string') {
      if (feed(part)) return true;
      continue;
    }
    if (typeof part !== 'object' || part === null) continue;
    const p = part as { text?: unknown; type?: unknown; image_url?: { url?: unknown } };
    // text parts read as one text, as a chat template joins them
    if (typeof p.text === 'string') {
      if (feed(p.text)) return true;
      continue;
    }
    if (typeof p.type === 'string' && feed(p.type)) return true;
    const url = p.image_url?.url;
    if (typeof url === 'string' && feed(url)) return true;
    if (feedCode(SEPARATOR)) return true;
  }
  return false;
}

/** Chat messages (or Responses API items) in order: role, content, tool calls, each followed by a separator. */
function feedMessages(messages: readonly unknown[]): boolean {
  for (let i = 0; i < messages.length; i++) {
    const m: unknown = messages[i];
    if (typeof m === 'string') {
      if (feed(m) || feedCode(SEPARATOR)) return true;
      continue;
    }
    if (typeof m !== 'object' || m === null) continue;
    const msg = m as { role?: unknown; content?: unknown; tool_calls?: unknown };
    if (typeof msg.role === 'string' && (feed(msg.role) || feedCode(SEPARATOR))) return true;
    if (feedContent(msg.content)) return true;
    if (Array.isArray(msg.tool_calls)) {
      for (const call of msg.tool_calls as unknown[]) {
        const fn = (call as { function?: { name?: unknown; arguments?: unknown } } | null)?.function;
        if (typeof fn?.name === 'string' && feed(fn.name)) return true;
        if (typeof fn?.arguments === 'string' && feed(fn.arguments)) return true;
      }
    }
    if (feedCode(SEPARATOR)) return true;
  }
  return false;
}

/** A completions `prompt`: a string, token ids, or a batch (keyed by its first prompt). */
function feedPrompt(prompt: unknown): boolean {
  if (typeof prompt === 'string') return feed(prompt);
  if (!Array.isArray(prompt) || prompt.length === 0) return false;
  const first: unknown = prompt[0];
  if (typeof first === 'string' || Array.isArray(first)) return feedPrompt(first);
  for (let i = 0; i < prompt.length; i++) {
    const id: unknown = prompt[i];
    if (typeof id === 'number' && feedCode(id & 0xffff)) return true;
  }
  return false;
}

function feedBody(body: Readonly<Record<string, unknown>>): void {
  const messages = body.messages;
  if (Array.isArray(messages)) {
    // Anthropic /v1/messages puts the system prompt beside the messages
    if (body.system !== undefined && (feedContent(body.system) || feedCode(SEPARATOR))) return;
    feedMessages(messages);
    return;
  }
  if (body.prompt !== undefined) {
    feedPrompt(body.prompt);
    return;
  }
  const input = body.input;
  if (input === undefined) return;
  if (typeof body.instructions === 'string' && (feed(body.instructions) || feedCode(SEPARATOR))) return;
  if (typeof input === 'string') feed(input);
  else if (Array.isArray(input)) feedMessages(input);
}

/**
 * The prefix key of a request's prompt (an unsigned 32-bit hash), or undefined when the body carries no prompt.
 * Two prompts share a key when they reach the same boundary and agree up to it (short ones: when they are equal).
 */
export function promptPrefixKey(body: Readonly<Record<string, unknown>>, blockChars: number): number | undefined {
  block = blockChars;
  hash = FNV_OFFSET;
  pos = 0;
  level = 0;
  nextBoundary = blockChars * (PREFIX_BOUNDARIES[0] as number);
  reachedBoundary = false;
  feedBody(body);
  if (pos === 0) return undefined;
  return mix32(reachedBoundary ? boundaryHash : hash);
}
