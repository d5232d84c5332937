// A Hugging Face tokenizer directory, in process: tokenizer.json through @huggingface/tokenizers and the chat template
// of tokenizer_config.json (or chat_template.jinja / chat_template.json) through @huggingface/jinja, the two libraries
// transformers.js uses. It answers what vLLM's /tokenize answers: a prompt's ids with the special tokens the
// tokenizer's post-processor adds (vLLM's default for `prompt`), and a chat rendered as vLLM's apply_chat_template
// renders it (messages parsed the way vLLM parses them, the special-token strings and the request's template arguments
// as variables), then tokenized without added special tokens (vLLM's default for chat: the template writes them).
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { Template } from '@huggingface/jinja';
import type { Tokenizer } from '@huggingface/tokenizers';
import { lazyModule } from '../util/lazy-module.js';

const jinja = lazyModule<typeof import('@huggingface/jinja')>('@huggingface/jinja');
const tokenizers = lazyModule<typeof import('@huggingface/tokenizers')>('@huggingface/tokenizers');

/** The template arguments a chat request may carry (vLLM's names). */
export interface ChatRenderOptions {
  /** vLLM chat default: true */
  readonly add_generation_prompt?: boolean;
  readonly continue_final_message?: boolean;
  readonly tools?: readonly unknown[] | null;
  readonly documents?: readonly unknown[] | null;
  /** a template of the request's own, in place of the tokenizer's */
  readonly chat_template?: string | null;
  readonly chat_template_kwargs?: Readonly<Record<string, unknown>> | null;
}

/** Thrown for a chat the template cannot render (its raise_exception, a message shape it refuses, no template). */
export class ChatTemplateError extends Error {}

/** The ids `add_special_tokens` puts around a text, when the post-processor only adds fixed ids before and after. */
export interface SpecialWrap {
  readonly before: readonly number[];
  readonly after: readonly number[];
}

interface NamedTemplate {
  readonly name: string;
  readonly template: string;
}

/** Variables every render gets: the special-token strings (transformers' special_tokens_map). */
const SPECIAL_TOKEN_KEYS = ['bos_token', 'eos_token', 'unk_token', 'pad_token', 'sep_token', 'cls_token', 'mask_token'];

export class HfTokenizer {
  private readonly tokenizer: Tokenizer;
  private readonly templates: readonly NamedTemplate[];
  private readonly compiled = new Map<string, Template>();
  private readonly specialVars: Record<string, string> = {};
  /** special added tokens that split text on their own and strip nothing around them */
  readonly boundaryTokens: ReadonlyMap<string, number>;
  /** undefined when add_special_tokens does more than add fixed ids around a text (then nothing is reused) */
  readonly wrap: SpecialWrap | undefined;
  /** true when tokenizing at a boundary token and joining equals tokenizing the whole (checked at load) */
  readonly segmentable: boolean;

  private constructor(
    tokenizerJson: Record<string, unknown>,
    config: Record<string, unknown>,
    templates: readonly NamedTemplate[],
    readonly source: string,
  ) {
    this.tokenizer = new (tokenizers().Tokenizer)(tokenizerJson, config);
    fasterByteLevel(this.tokenizer.pre_tokenizer);
    fasterSplitThenBytes(this.tokenizer.pre_tokenizer);
    fasterWordCache(this.tokenizer.model);
    const lib = this.tokenizer as unknown as { splitter_unnormalized?: unknown; splitter_normalized?: unknown };
    fasterSplitter(lib.splitter_unnormalized);
    fasterSplitter(lib.splitter_normalized);
    this.templates = templates;
    for (const key of SPECIAL_TOKEN_KEYS) {
      const s = tokenString(config[key]);
      if (s !== undefined) this.specialVars[key] = s;
    }
    const boundaries = new Map<string, number>();
    const added = Array.isArray(tokenizerJson.added_tokens) ? (tokenizerJson.added_tokens as Record<string, unknown>[]) : [];
    for (const t of added) {
      if (t.special === true && !t.lstrip && !t.rstrip && !t.single_word && !t.normalized && typeof t.content === 'string' && t.content)
        boundaries.set(t.content, t.id as number);
    }
    // a token inside another added token (`<|a|>` in `<|a|>b`) is found or not depending on the text after it: a piece
    // cut after it could be tokenized differently in a longer text, so it does not cut pieces
    const contents = added.map((t) => t.content).filter((c): c is string => typeof c === 'string');
    for (const b of [...boundaries.keys()]) if (contents.some((c) => c !== b && c.includes(b))) boundaries.delete(b);
    this.boundaryTokens = boundaries;
    this.wrap = this.findWrap();
    this.segmentable = this.wrap !== undefined && boundaries.size > 0 && this.checkSegments();
  }

  /** Loads tokenizer.json and tokenizer_config.json (and chat_template.jinja / chat_template.json when present). */
  static async load(dir: string): Promise<HfTokenizer> {
    const tokenizerJson = JSON.parse(await readFile(path.join(dir, 'tokenizer.json'), 'utf8')) as Record<string, unknown>;
    const config = (await readJson(path.join(dir, 'tokenizer_config.json'))) ?? {};
    // special_tokens_map.json fills what the config leaves out
    const specialMap = await readJson(path.join(dir, 'special_tokens_map.json'));
    if (specialMap)
      for (const key of SPECIAL_TOKEN_KEYS) if (config[key] === undefined && specialMap[key] !== undefined) config[key] = specialMap[key];
    let template: unknown = config.chat_template;
    const jinjaFile = await readFile(path.join(dir, 'chat_template.jinja'), 'utf8').catch(() => undefined);
    if (jinjaFile !== undefined) template = jinjaFile;
    else if (template === undefined) template = (await readJson(path.join(dir, 'chat_template.json')))?.chat_template;
    return HfTokenizer.fromObjects(tokenizerJson, config, template, dir);
  }

  /** From the parsed files; `chatTemplate` as tokenizer_config.json holds it (a string or a list of named templates). */
  static fromObjects(
    tokenizerJson: Record<string, unknown>,
    config: Record<string, unknown>,
    chatTemplate: unknown = config.chat_template,
    source = '(memory)',
  ): HfTokenizer {
    const templates: NamedTemplate[] = [];
    if (typeof chatTemplate === 'string') templates.push({ name: 'default', template: chatTemplate });
    else if (Array.isArray(chatTemplate))
      for (const t of chatTemplate as { name?: unknown; template?: unknown }[])
        if (typeof t?.name === 'string' && typeof t.template === 'string') templates.push({ name: t.name, template: t.template });
    return new HfTokenizer(tokenizerJson, config, templates, source);
  }

  /** Token ids of `text`; `addSpecialTokens` (default true, vLLM's default for a prompt) runs the post-processor. */
  encode(text: string, addSpecialTokens = true): number[] {
    return this.tokenizer.encode(text, { add_special_tokens: addSpecialTokens }).ids;
  }

  decode(ids: readonly number[]): string {
    return this.tokenizer.decode(ids as number[], { skip_special_tokens: false });
  }

  get hasChatTemplate(): boolean {
    return this.templates.length > 0;
  }

  /**
   * The chat as vLLM renders it before tokenizing (transformers' apply_chat_template with tokenize=False): the messages
   * parsed as vLLM parses them (`chatMessages`), `tools` in vLLM's shape, the special-token strings, `documents`,
   * add_generation_prompt (default true), and chat_template_kwargs as variables; continue_final_message cuts the text
   * after the last message's content. Throws ChatTemplateError when it cannot.
   */
  renderChat(messages: readonly unknown[], opts: ChatRenderOptions = {}): string {
    const addGenerationPrompt = opts.add_generation_prompt ?? true;
    const continueFinal = opts.continue_final_message ?? false;
    if (addGenerationPrompt && continueFinal)
      throw new ChatTemplateError('Cannot set both `continue_final_message` and `add_generation_prompt` to true.');
    const tools = opts.tools ? opts.tools.map(vllmTool) : null;
    const source = opts.chat_template ?? this.pickTemplate(tools !== null);
    if (source === undefined) throw new ChatTemplateError('the tokenizer has no chat template and the request names none');
    let template = this.compiled.get(source);
    if (!template) {
      try {
        template = new (jinja().Template)(source);
      } catch (err) {
        throw new ChatTemplateError(`chat template does not parse: ${(err as Error).message}`);
      }
      if (this.compiled.size >= 16) this.compiled.delete(this.compiled.keys().next().value as string);
      this.compiled.set(source, template);
    }
    const conversation = chatMessages(messages, contentFormat(source));
    let rendered: string;
    try {
      rendered = template.render({
        ...this.specialVars,
        ...(opts.chat_template_kwargs ?? {}),
        messages: conversation,
        tools,
        documents: opts.documents ?? null,
        add_generation_prompt: addGenerationPrompt,
      });
    } catch (err) {
      throw new ChatTemplateError(`chat template failed: ${(err as Error).message}`);
    }
    return continueFinal ? cutAfterFinal(rendered, conversation) : rendered;
  }

  /** The template a chat with these options is rendered with (as renderChat picks it); undefined when none. */
  templateSource(opts: ChatRenderOptions = {}): string | undefined {
    return opts.chat_template ?? this.pickTemplate(Boolean(opts.tools));
  }

  /** Whether `source` is one of the tokenizer's own templates (a request may send the same text). */
  ownsTemplate(source: string): boolean {
    return this.templates.some((t) => t.template === source);
  }

  /** transformers: a list of named templates gives 'tool_use' when tools are passed and it exists, else 'default'. */
  private pickTemplate(withTools: boolean): string | undefined {
    if (this.templates.length === 0) return undefined;
    if (this.templates.length === 1) return this.templates[0]?.template;
    const byName = (n: string) => this.templates.find((t) => t.name === n)?.template;
    return (withTools ? byName('tool_use') : undefined) ?? byName('default') ?? this.templates[0]?.template;
  }

  /** The fixed ids add_special_tokens adds before and after, if that is all it does. */
  private findWrap(): SpecialWrap | undefined {
    const samples = ['a', 'Hello world', ' x\n'];
    let wrap: SpecialWrap | undefined;
    for (const s of samples) {
      const plain = this.encode(s, false);
      const full = this.encode(s, true);
      const at = indexOfRun(full, plain);
      if (at < 0) return undefined;
      const w = { before: full.slice(0, at), after: full.slice(at + plain.length) };
      if (wrap && (!sameIds(wrap.before, w.before) || !sameIds(wrap.after, w.after))) return undefined;
      wrap = w;
    }
    return wrap;
  }

  /** Whether the text after a boundary token tokenizes alone as it does in place (no normalizer or prefix rule reaches across). */
  private checkSegments(): boolean {
    const [token] = this.boundaryTokens.keys();
    if (token === undefined) return false;
    const heads = ['Hello', 'user', 'x y'];
    const tails = ['Hello world', ' world', '\n\nHi there', '  two spaces', 'é ü 🙂', '\t1234'];
    for (const head of heads)
      for (const tail of tails) {
        const whole = this.encode(head + token + tail, false);
        const parts = [...this.encode(head + token, false), ...this.encode(tail, false)];
        if (!sameIds(whole, parts)) return false;
      }
    return true;
  }
}

type ByteLevelLike = {
  byte_encoder: Record<number, string>;
  add_prefix_space: boolean;
  use_regex: boolean;
  pattern: RegExp;
  pre_tokenize_text(text: string, options?: unknown): string[];
  pre_tokenize?: (text: string | string[], options?: unknown) => string[];
};

/**
 * Speeds up the library's ByteLevel pre-tokenizer, where most of a long text's time went: each piece was turned into
 * its byte characters through a TextEncoder and an array; an ASCII piece (most of them) now takes one table lookup a
 * character, others the library's way. Installed only when it gives the same pieces as the library's own on samples.
 */
function fasterByteLevel(node: unknown): void {
  // the library's components are callable objects (functions)
  if ((typeof node !== 'object' && typeof node !== 'function') || node === null) return;
  const children = (node as { tokenizers?: unknown }).tokenizers;
  if (Array.isArray(children)) for (const c of children) fasterByteLevel(c);
  const bl = node as ByteLevelLike;
  if (!bl.byte_encoder || typeof bl.pre_tokenize_text !== 'function' || !(bl.pattern instanceof RegExp || !bl.use_regex)) return;
  const original = bl.pre_tokenize_text.bind(bl);
  const table: string[] = [];
  for (let b = 0; b < 128; b++) table.push(bl.byte_encoder[b] as string);
  const utf8 = new TextEncoder();
  // ASCII characters the byte-level alphabet keeps as they are (letters, digits, punctuation)
  const same: boolean[] = table.map((t, c) => t === String.fromCharCode(c));
  const piece = (p: string): string => {
    // the common shapes first: a word, or one mapped character (a space: Ġ) and a word; no new string but the result
    const n = p.length;
    const c0 = n > 0 ? p.charCodeAt(0) : 0;
    const from = n > 0 && c0 < 128 && !same[c0] ? 1 : 0;
    let i = from;
    while (i < n) {
      const c = p.charCodeAt(i);
      if (c >= 128 || !same[c]) break;
      i++;
    }
    if (i === n) return from === 0 ? p : (table[c0] as string) + p.slice(1);
    let out = '';
    for (let i = 0; i < p.length; i++) {
      const c = p.charCodeAt(i);
      if (c >= 128) {
        out = '';
        for (const byte of utf8.encode(p)) out += bl.byte_encoder[byte];
        return out;
      }
      out += table[c];
    }
    return out;
  };
  const faster = (text: string): string[] => {
    const t = bl.add_prefix_space && !text.startsWith(' ') ? ` ${text}` : text;
    const pieces = bl.use_regex ? (t.match(bl.pattern) ?? []) : [t];
    return pieces.map(piece);
  };
  const samples = ['Hello world', ' a  b\n\n\tc', "it's 1234 naïve 東京 🙂", '', ' x', '\nHello', 'Ġ', '~!', ' \x7f'];
  for (const s of samples) if (JSON.stringify(faster(s)) !== JSON.stringify(original(s))) return;
  const originalMany = bl.pre_tokenize?.bind(bl);
  if (!originalMany) return;
  bl.pre_tokenize_text = faster;
  if (!bl.use_regex && !bl.add_prefix_space) bytePieces.set(bl, piece);
  // the library maps every piece to an array and flattens them all; one piece in, one (or, with the regex, some) out
  const many = (text: string | string[]): string[] => {
    if (!Array.isArray(text)) return faster(text);
    if (!bl.use_regex && !bl.add_prefix_space) return text.map(piece);
    const out: string[] = [];
    for (const t of text) for (const p of faster(t)) out.push(p);
    return out;
  };
  const pieces = [['Hello', ' world', '\n\n'], ['東京', ' 🙂'], []];
  for (const p of pieces) if (JSON.stringify(many(p)) !== JSON.stringify(originalMany(p))) return;
  bl.pre_tokenize = many;
}

/** Byte-level pre-tokenizers sped up by fasterByteLevel that map each piece alone (no regex, no prefix space): their mapping. */
const bytePieces = new WeakMap<object, (piece: string) => string>();

type SplitLike = { pattern?: unknown; config?: { invert?: unknown; behavior?: unknown } };

/**
 * Llama-3-style pre-tokenization is a sequence of a Split (a regex, matches and the text between them kept as pieces)
 * and a ByteLevel mapping each piece; the library runs it as arrays of arrays flattened at each step. One pass over the
 * regex's matches, each mapped as it is found, gives the same pieces. Installed only on exactly that shape, and only
 * when it gives the library's pieces on samples; a text where the regex matches empty goes the library's way.
 */
function fasterSplitThenBytes(node: unknown): void {
  if ((typeof node !== 'object' && typeof node !== 'function') || node === null) return;
  const seq = node as { tokenizers?: unknown; pre_tokenize?: unknown };
  if (!Array.isArray(seq.tokenizers) || seq.tokenizers.length !== 2 || typeof seq.pre_tokenize !== 'function') return;
  const [split, bytes] = seq.tokenizers as [SplitLike, object];
  const piece = bytePieces.get(bytes);
  const re = split?.pattern;
  if (!piece || !(re instanceof RegExp) || !re.global || split.config?.invert !== false) return;
  if (typeof split.config.behavior !== 'string' || split.config.behavior.toLowerCase() !== 'isolated') return;
  const original = (seq.pre_tokenize as (text: string | string[], options?: unknown) => string[]).bind(seq);
  const one = (text: string, options?: unknown): string[] => {
    const out: string[] = [];
    let prev = 0;
    re.lastIndex = 0;
    for (let m = re.exec(text); m !== null; m = re.exec(text)) {
      const s = m[0];
      if (s.length === 0) return original(text, options);
      if (prev < m.index) out.push(piece(text.slice(prev, m.index)));
      out.push(piece(s));
      prev = m.index + s.length;
    }
    if (prev < text.length) out.push(piece(text.slice(prev)));
    return out;
  };
  const faster = (text: string | string[], options?: unknown): string[] => {
    if (!Array.isArray(text)) return one(text, options);
    const out: string[] = [];
    for (const t of text) for (const p of one(t, options)) out.push(p);
    return out;
  };
  const samples = ['Hello world', ' a  b\n\n\tc', "it's 1234 naïve 東京 🙂", '', '   ', 'x\r\n\r\ny', "I'M 12345678 don't"];
  for (const t of samples) if (JSON.stringify(faster(t)) !== JSON.stringify(original(t))) return;
  if (JSON.stringify(faster(samples)) !== JSON.stringify(original(samples))) return;
  seq.pre_tokenize = faster;
}

/**
 * The library finds added tokens in a text by walking a trie of them character by character (a property lookup per
 * character of the whole text); one regular expression of the same tokens, longest first, finds the same ones (the
 * longest at the leftmost place) natively. Installed only on the shape this was written for, and only when it splits
 * samples (the tokens themselves, run together, cut short, inside text) exactly as the trie does.
 */
function fasterSplitter(splitter: unknown): void {
  if (typeof splitter !== 'object' || splitter === null) return;
  const sp = splitter as { trie?: unknown; split?: unknown };
  if (typeof sp.trie !== 'object' || sp.trie === null || typeof sp.split !== 'function') return;
  const original = (sp.split as (text: string) => string[]).bind(splitter);
  const words: string[] = [];
  const stack: unknown[] = [sp.trie];
  while (stack.length > 0) {
    const node = stack.pop() as Record<string, unknown>;
    for (const key of Object.keys(node)) {
      const v = node[key];
      if (key === 'end') {
        if (typeof v !== 'string') return;
        words.push(v);
      } else if (key.length === 1 && typeof v === 'object' && v !== null) stack.push(v);
      else return;
    }
  }
  const nonEmpty = words.filter((w) => w.length > 0).sort((a, b) => b.length - a.length);
  // no tokens to find (the normalized ones, usually): the text is one section, or none when empty
  const re = nonEmpty.length > 0 ? new RegExp(nonEmpty.map(escapeRegExp).join('|'), 'g') : undefined;
  const split = (text: string): string[] => {
    if (re === undefined) return text.length > 0 ? [text] : [];
    const out: string[] = [];
    let start = 0;
    re.lastIndex = 0;
    for (let m = re.exec(text); m !== null; m = re.exec(text)) {
      if (m.index > start) out.push(text.slice(start, m.index));
      out.push(m[0]);
      start = m.index + m[0].length;
    }
    if (start < text.length) out.push(text.slice(start));
    return out;
  };
  const samples = [
    '',
    'plain text',
    ' ',
    '<|x|>',
    nonEmpty.join(''),
    nonEmpty.join(' x '),
    `a${nonEmpty.map((w) => w.slice(0, -1)).join('b')}c`,
  ];
  for (const w of nonEmpty.slice(0, 64)) samples.push(`${w}${w}`, `x${w.slice(1)}${w}y`, ` ${w.slice(0, Math.ceil(w.length / 2))}`);
  for (const t of samples) if (JSON.stringify(split(t)) !== JSON.stringify(original(t))) return;
  sp.split = split;
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/**
 * The BPE model keeps each word's merges in a least-recently-used map that deletes and re-inserts the word on every
 * hit; two generations of plain maps (the younger one, and the older one its words are promoted from) keep the same
 * words for most texts at a fraction of the cost. Installed only on the shape this was written for.
 */
function fasterWordCache(model: unknown): void {
  if ((typeof model !== 'object' && typeof model !== 'function') || model === null) return;
  const m = model as { cache?: { capacity?: unknown; get?: unknown; put?: unknown; clear?: unknown } };
  const c = m.cache;
  if (!c || typeof c.capacity !== 'number' || typeof c.get !== 'function' || typeof c.put !== 'function' || typeof c.clear !== 'function')
    return;
  const capacity = Math.max(1, c.capacity);
  let young = new Map<string, unknown>();
  let old = new Map<string, unknown>();
  const put = (key: string, value: unknown): void => {
    young.set(key, value);
    if (young.size >= capacity) {
      old = young;
      young = new Map();
    }
  };
  const get = (key: string): unknown => {
    const v = young.get(key);
    if (v !== undefined) return v;
    const o = old.get(key);
    if (o !== undefined) put(key, o);
    return o;
  };
  const clear = (): void => {
    young = new Map();
    old = new Map();
  };
  m.cache = { capacity, get, put, clear };
}

/** vLLM parses each message to {role, content, tool_calls?, tool_call_id?, name?} before rendering. */
export function chatMessages(messages: readonly unknown[], format: 'string' | 'openai'): Record<string, unknown>[] {
  return messages.map((raw) => {
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new ChatTemplateError('a message is not an object');
    const m = raw as Record<string, unknown>;
    const texts = textParts(m.content);
    const out: Record<string, unknown> = {
      role: m.role,
      content: format === 'string' ? texts.join('\n') : texts.map((text) => ({ type: 'text', text })),
    };
    if (m.role === 'assistant' && Array.isArray(m.tool_calls)) out.tool_calls = m.tool_calls.map(parsedToolCall);
    if (m.role === 'tool' && m.tool_call_id !== undefined) out.tool_call_id = m.tool_call_id;
    if (typeof m.name === 'string') out.name = m.name;
    return out;
  });
}

/** Text of a message's content: a string, null (none), or a list of text parts; anything else is not supported here. */
function textParts(content: unknown): string[] {
  if (content === undefined || content === null) return [];
  if (typeof content === 'string') return [content];
  if (!Array.isArray(content)) throw new ChatTemplateError('message content is neither a string nor a list of parts');
  return content.map((part) => {
    if (typeof part === 'string') return part;
    const p = part as Record<string, unknown> | null;
    if (p && (p.type === 'text' || p.type === undefined) && typeof p.text === 'string') return p.text;
    // an image, audio or file part expands to placeholder tokens only the engine knows
    throw new ChatTemplateError(`message part of type ${String(p?.type)} is not text`);
  });
}

/** vLLM (after transformers' advice) hands a tool call's arguments to the template as an object, not a JSON string. */
function parsedToolCall(call: unknown): unknown {
  const c = call as { function?: { arguments?: unknown } } | null;
  if (!c?.function || typeof c.function.arguments !== 'string') return call;
  let args: unknown;
  try {
    args = JSON.parse(c.function.arguments);
  } catch {
    return call;
  }
  return { ...c, function: { ...c.function, arguments: args } };
}

/** A tool as vLLM's pydantic model dumps it: type, then function {name, description, parameters}, absent ones null. */
function vllmTool(tool: unknown): unknown {
  const t = tool as { type?: unknown; function?: Record<string, unknown> } | null;
  if (!t || typeof t.function !== 'object' || t.function === null) return tool;
  const { name, description = null, parameters = null, ...rest } = t.function;
  return { type: t.type ?? 'function', function: { name, description, parameters, ...rest } };
}

/**
 * vLLM's content format: 'openai' (a list of parts) when the template loops over a message's content, else 'string'
 * (text parts joined by newlines). vLLM walks the template's syntax tree; a loop over `<name>['content']` or
 * `<name>.content` is what it looks for, and what this matches.
 */
export function contentFormat(template: string): 'string' | 'openai' {
  return /\{%-?\s*for\s+\w+\s+in\s+\w+\s*(?:\[\s*['"]content['"]\s*\]|\.content)\s*-?%\}/.test(template) ? 'openai' : 'string';
}

/** transformers' continue_final_message: the text ends right after the final message's content. */
function cutAfterFinal(rendered: string, conversation: readonly Record<string, unknown>[]): string {
  const last = conversation[conversation.length - 1];
  let final = last?.content;
  if (Array.isArray(final)) final = [...(final as { text?: string }[])].reverse().find((p) => typeof p.text === 'string')?.text ?? '';
  if (typeof final !== 'string') throw new ChatTemplateError('continue_final_message: the final message has no text');
  const at = rendered.lastIndexOf(final.trim());
  if (final.trim() === '' || at < 0) throw new ChatTemplateError('continue_final_message: the final message is not in the rendered chat');
  if (rendered.slice(at, at + final.trimStart().length) === final) return rendered.slice(0, at + final.length);
  return rendered.slice(0, at + final.trim().length);
}

function tokenString(v: unknown): string | undefined {
  if (typeof v === 'string') return v;
  if (typeof v === 'object' && v !== null && typeof (v as { content?: unknown }).content === 'string')
    return (v as { content: string }).content;
  return undefined;
}

async function readJson(file: string): Promise<Record<string, unknown> | undefined> {
  const text = await readFile(file, 'utf8').catch(() => undefined);
  return text === undefined ? undefined : (JSON.parse(text) as Record<string, unknown>);
}

function indexOfRun(hay: readonly number[], needle: readonly number[]): number {
  outer: for (let i = 0; i + needle.length <= hay.length; i++) {
    for (let j = 0; j < needle.length; j++) if (hay[i + j] !== needle[j]) continue outer;
    return i;
  }
  return -1;
}

function sameIds(a: readonly number[], b: readonly number[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
