// A chat rendered from the rendering of its earlier turns, where the template allows it: rendering a whole conversation
// through jinja every turn costs about as much per message as the rest of a next turn's tokenization together. A
// conversation's rendering (without the generation prompt) is remembered under its messages; the next turn finds the
// longest remembered prefix of its messages (k of them) and renders only what follows, behind a short head that keeps
// what templates look at besides the message itself:
//
//   render(M, agp) = R(M[0..k]) + render(H ++ M[k..], agp) minus R(H)
//
// where R is the rendering without the generation prompt and H the system message (if first), the first message after
// it, and one more when needed so that M[k] keeps the parity of its index (templates that check user/assistant
// alternation by loop.index0). The generation prompt is then `render(M, true) - render(M, false)`, the same text
// for every conversation of one template and set of arguments.
//
// That holds for most templates but not all: one renders an earlier message differently once later ones exist (Qwen3
// with reasoning), counts messages, or looks at a message's neighbour (Qwen2.5 opens one user turn for a run of tool
// results and closes it after the last: cut between two tool messages, the earlier turn's rendering closes it too
// early). So each template is checked when first used, on probe conversations (with and without a system message, tool
// calls with one or several results in a row, a conversation ending on tool results, reasoning, a system message
// later on, empty contents, whitespace, special-token text), every split of each against the whole rendering, with and
// without the generation prompt and tools. What is checked is the split's shape: the last remembered message and the
// first new one, each by role and whether it calls tools (`user>assistant`, `tool>tool`). A shape that fails is
// rendered whole for that template; a template with no shape that passes (or whose generation prompt is not one text)
// is always rendered whole. The first uses of each shape, and then one use in `verifyEvery`, are rendered whole as
// well and compared: a mismatch turns the shortcut off for that shape of that template, not for other requests
// (counted in `stats`). A request's own chat_template (trusted: --trust-request-chat-template), and
// continue_final_message requests, are rendered whole. Messages are keyed by their JSON text (exact: no digest).
import type { ChatRenderOptions, HfTokenizer } from './hf-tokenizer.js';
import { ByteLru } from './token-cache.js';

/** What renders a chat: an HfTokenizer, or this cache in front of one. */
export interface ChatRenderer {
  renderChat(messages: readonly unknown[], opts?: ChatRenderOptions): string;
}

export interface ChatPrefixStats {
  /** renders that reused a remembered prefix */
  readonly incremental: number;
  /** renders done whole (no prefix known, template not prefix-stable, continue_final_message, a check) */
  readonly whole: number;
  /** run-time checks whose incremental text differed from the whole rendering (that shape was then turned off) */
  readonly mismatches: number;
  /** messages whose rendering came from the cache, over all renders */
  readonly reusedMessages: number;
}

interface Node<A> {
  readonly id: number;
  /** its key in the cache */
  readonly key: string;
  /** the rendering of the messages up to this one, without the generation prompt (when known) */
  rendered?: string;
  /** what the caller attached to that rendering (RenderedChat.attach), and its bytes */
  attached?: A;
  attachedBytes?: number;
}

/** A rendered chat, with what the caller attached to the remembered rendering it starts with. */
export interface RenderedChat<A> {
  readonly text: string;
  /** the remembered rendering `text` starts with (its length), and what was attached to it; undefined when none */
  readonly prefix: { readonly chars: number; readonly attached: A | undefined } | undefined;
  /** the length of this chat's own rendering without the generation prompt, when it is remembered */
  readonly ownChars: number | undefined;
  /** attaches a value (of about `bytes`) to this chat's remembered rendering, for a later chat that starts with it */
  attach(value: A, bytes: number): void;
}

interface Context {
  readonly id: number;
  /** render(M, true) - render(M, false): undefined when it is not one text for every M (then never incremental) */
  readonly generationPrompt: string | undefined;
}

/** A template, once checked: whether its shortcut is used at all, the shapes it is not used for, and its uses. */
interface TemplateState {
  readonly id: number;
  readonly usable: boolean;
  /** shapes (joinShape) rendered whole: failed by the probes or by a run-time check */
  readonly unstable: Set<string>;
  uses: number;
  /** uses by shape ('=' for a chat whose every message was remembered) */
  readonly shapeUses: Map<string, number>;
}

const MAX_TEMPLATES = 16;

/** Renders chats through `tokenizer`, reusing remembered prefixes where the template allows (see the file's header). */
export class ChatPrefixCache<A = never> implements ChatRenderer {
  private readonly nodes: ByteLru<Node<A>>;
  private readonly contexts = new Map<string, Context>();
  private readonly templates = new Map<string, TemplateState>();
  private nextId = 1;
  private counts = { incremental: 0, whole: 0, mismatches: 0, reusedMessages: 0 };

  constructor(
    private readonly tokenizer: HfTokenizer,
    maxBytes: number,
    /** after a template's first `verifyFirst` uses, one in this many is also rendered whole and compared (0: never) */
    private readonly verifyEvery = 64,
    private readonly verifyFirst = 4,
  ) {
    this.nodes = new ByteLru<Node<A>>(maxBytes, (n) => (n.rendered?.length ?? 0) * 2 + (n.attachedBytes ?? 0));
  }

  get stats(): ChatPrefixStats {
    return { ...this.counts };
  }

  get bytes(): number {
    return this.nodes.bytes;
  }

  /**
   * Checks the tokenizer's own templates (for chats without and with tools) now rather than on the first request that
   * uses them: the probes render a few hundred small chats.
   */
  prepare(): void {
    for (const tools of [null, PROBE_TOOLS]) {
      const source = this.tokenizer.templateSource({ tools });
      if (source === undefined) continue;
      const state = this.templateState(source);
      if (state.usable) this.context(state, { tools });
    }
  }

  /** The same text as tokenizer.renderChat(messages, opts); throws what it throws. */
  renderChat(messages: readonly unknown[], opts: ChatRenderOptions = {}): string {
    return this.render(messages, opts).text;
  }

  /** renderChat, with the remembered rendering the text starts with and a way to attach to this chat's own. */
  render(messages: readonly unknown[], opts: ChatRenderOptions = {}): RenderedChat<A> {
    const source = this.tokenizer.templateSource(opts);
    if (source === undefined || opts.continue_final_message === true || messages.length < 2) return plain(this.whole(messages, opts));
    // a request's own template: no probes (hundreds of renders of a template nobody vetted), one render
    if (typeof opts.chat_template === 'string' && !this.tokenizer.ownsTemplate(opts.chat_template))
      return plain(this.whole(messages, opts));
    const state = this.templateState(source);
    if (!state.usable) return plain(this.whole(messages, opts));
    const context = this.context(state, opts);
    if (context === undefined) return plain(this.whole(messages, opts));
    // the path of nodes for M[0..i], and the longest prefix with a remembered rendering
    const keys = messages.map((m) => JSON.stringify(m));
    const path: (Node<A> | undefined)[] = [];
    let parent = context.id;
    let k = 0;
    let prefix: Node<A> | undefined;
    for (let i = 0; i < keys.length; i++) {
      const node = this.nodes.get(nodeKey(parent, keys[i] as string));
      if (!node) break;
      path.push(node);
      parent = node.id;
      if (node.rendered !== undefined) {
        k = i + 1;
        prefix = node;
      }
    }
    const known = prefix?.rendered;
    const shape = k === messages.length ? '=' : joinShape(messages, k);
    const agp = opts.add_generation_prompt ?? true;
    let text: string | undefined;
    let own: Node<A> | undefined;
    if (known !== undefined && !state.unstable.has(shape)) {
      const withoutPrompt = k === messages.length ? known : this.extend(messages, k, known, opts, path, context);
      if (withoutPrompt !== undefined) {
        text = agp ? withoutPrompt + (context.generationPrompt as string) : withoutPrompt;
        own = this.remember(context, keys, withoutPrompt, path);
      }
    }
    state.uses++;
    let check = false;
    if (text !== undefined) {
      const uses = (state.shapeUses.get(shape) ?? 0) + 1;
      state.shapeUses.set(shape, uses);
      check = uses <= this.verifyFirst || (this.verifyEvery > 0 && state.uses % this.verifyEvery === 0);
    }
    if (text === undefined || check) {
      const whole = this.whole(messages, opts);
      if (text !== undefined && text !== whole) {
        // this shape of this template is rendered whole from now on; what was remembered for M is the whole text
        this.counts.mismatches++;
        if (shape !== '=') state.unstable.add(shape);
        own = this.rememberWhole(context, keys, whole, agp, path);
        return this.rendered(whole, undefined, own);
      }
      if (text === undefined) {
        own = this.rememberWhole(context, keys, whole, agp, path);
        return this.rendered(whole, undefined, own);
      }
    } else {
      this.counts.incremental++;
      this.counts.reusedMessages += k;
    }
    return this.rendered(text, prefix, own);
  }

  private rendered(text: string, prefix: Node<A> | undefined, own: Node<A> | undefined): RenderedChat<A> {
    const nodes = this.nodes;
    return {
      text,
      prefix: prefix?.rendered !== undefined ? { chars: prefix.rendered.length, attached: prefix.attached } : undefined,
      ownChars: own?.rendered?.length,
      attach(value: A, bytes: number): void {
        if (own === undefined || own.rendered === undefined) return;
        own.attached = value;
        own.attachedBytes = bytes;
        // set again, so that the cache counts the bytes
        nodes.set(own.key, own);
      },
    };
  }

  private whole(messages: readonly unknown[], opts: ChatRenderOptions): string {
    this.counts.whole++;
    return this.tokenizer.renderChat(messages, opts);
  }

  /** R(M) from R(M[0..k]) = `known`: the tail rendered behind the head H; undefined when that does not line up. */
  private extend(
    messages: readonly unknown[],
    k: number,
    known: string,
    opts: ChatRenderOptions,
    path: readonly (Node<A> | undefined)[],
    context: Context,
  ): string | undefined {
    const headLength = headFor(messages, k);
    if (headLength === undefined) return undefined;
    const noPrompt: ChatRenderOptions = { ...opts, add_generation_prompt: false };
    // R(H): remembered on H's node when rendered before
    let head = path[headLength - 1]?.rendered;
    try {
      if (head === undefined) {
        head = this.tokenizer.renderChat(messages.slice(0, headLength), noPrompt);
        this.remember(
          context,
          messages.slice(0, headLength).map((m) => JSON.stringify(m)),
          head,
        );
      }
      const tail = this.tokenizer.renderChat([...messages.slice(0, headLength), ...messages.slice(k)], noPrompt);
      if (!tail.startsWith(head)) return undefined;
      return known + tail.slice(head.length);
    } catch {
      return undefined;
    }
  }

  /** Remembers R(M) on M's node, making the nodes of its path as needed (`found`: the first of them, already looked up). */
  private remember(
    context: Context,
    keys: readonly string[],
    rendered: string,
    found: readonly (Node<A> | undefined)[] = [],
  ): Node<A> | undefined {
    let parent = context.id;
    let node: Node<A> | undefined;
    let key = '';
    for (let i = 0; i < keys.length; i++) {
      key = nodeKey(parent, keys[i] as string);
      node = i < found.length - 1 ? found[i] : this.nodes.get(key);
      if (!node) {
        node = { id: this.nextId++, key };
        this.nodes.set(key, node);
      }
      parent = node.id;
    }
    if (!node) return undefined;
    if (node.rendered !== rendered) {
      node.rendered = rendered;
      node.attached = undefined;
      node.attachedBytes = undefined;
    }
    // set again, so that the cache counts the text's bytes
    this.nodes.set(key, node);
    return node;
  }

  /** After a whole rendering: R(M) is that text less the generation prompt, when it ends with it. */
  private rememberWhole(
    context: Context,
    keys: readonly string[],
    whole: string,
    agp: boolean,
    found: readonly (Node<A> | undefined)[],
  ): Node<A> | undefined {
    const gp = context.generationPrompt as string;
    if (!agp) return this.remember(context, keys, whole, found);
    if (whole.endsWith(gp)) return this.remember(context, keys, whole.slice(0, whole.length - gp.length), found);
    return undefined;
  }

  /** The context of a request: its template and every argument but the messages and the generation prompt flag. */
  private context(state: TemplateState, opts: ChatRenderOptions): Context | undefined {
    let key: string;
    try {
      key = JSON.stringify([state.id, opts.tools ?? null, opts.documents ?? null, opts.chat_template_kwargs ?? null]);
    } catch {
      return undefined;
    }
    let c = this.contexts.get(key);
    if (!c) {
      c = { id: this.nextId++, generationPrompt: this.generationPrompt(opts) };
      if (this.contexts.size >= 256) this.contexts.clear();
      this.contexts.set(key, c);
    }
    return c.generationPrompt === undefined ? undefined : c;
  }

  /** render(M, true) - render(M, false), the same for two probe conversations; else undefined. */
  private generationPrompt(opts: ChatRenderOptions): string | undefined {
    let found: string | undefined;
    for (const probe of PROBES.slice(0, 2)) {
      try {
        const on = this.tokenizer.renderChat(probe, { ...opts, add_generation_prompt: true, continue_final_message: false });
        const off = this.tokenizer.renderChat(probe, { ...opts, add_generation_prompt: false, continue_final_message: false });
        if (!on.startsWith(off)) return undefined;
        const gp = on.slice(off.length);
        if (found !== undefined && gp !== found) return undefined;
        found = gp;
      } catch {
        return undefined;
      }
    }
    return found;
  }

  private templateState(source: string): TemplateState {
    let s = this.templates.get(source);
    if (!s) {
      const probed = probeShapes(this.tokenizer, source);
      s = { id: this.nextId++, usable: probed.usable, unstable: new Set(probed.unstable), uses: 0, shapeUses: new Map() };
      if (this.templates.size >= MAX_TEMPLATES) this.templates.delete(this.templates.keys().next().value as string);
      this.templates.set(source, s);
    }
    return s;
  }
}

/** A rendering with nothing remembered about it. */
function plain<A>(text: string): RenderedChat<A> {
  return { text, prefix: undefined, ownChars: undefined, attach: () => undefined };
}

function nodeKey(parent: number, message: string): string {
  return `${parent}\u0001${message}`;
}

/**
 * How many leading messages the head keeps in front of M[k..]: the system message (if first) and the first message
 * after it, then one more if M[k] would otherwise change the parity of its index. Undefined when the head would reach
 * M[k] (nothing to gain, and nothing to subtract).
 */
export function headFor(messages: readonly unknown[], k: number): number | undefined {
  const first = messages[0] as { role?: unknown } | null;
  const system = typeof first === 'object' && first !== null && first.role === 'system' ? 1 : 0;
  let length = system + 1;
  if ((k - length) % 2 !== 0) length++;
  return length < k ? length : undefined;
}

/** Roles a shape names; any other is `other`, so that shapes stay a small set whatever clients send. */
const SHAPE_ROLES = new Set(['system', 'developer', 'user', 'assistant', 'tool', 'ipython', 'function']);

function messageShape(message: unknown): string {
  const m = (typeof message === 'object' && message !== null ? message : {}) as { role?: unknown; tool_calls?: unknown };
  const role = typeof m.role === 'string' && SHAPE_ROLES.has(m.role) ? m.role : 'other';
  return Array.isArray(m.tool_calls) && m.tool_calls.length > 0 ? `${role}+calls` : role;
}

/**
 * The shape of a split of `messages` before M[k]: the last remembered message and the first new one, each by role and
 * whether it calls tools. A template that looks past a message looks at its neighbours (the one before, the one
 * after); the new messages themselves are rendered in one piece.
 */
export function joinShape(messages: readonly unknown[], k: number): string {
  return `${messageShape(messages[k - 1])}>${messageShape(messages[k])}`;
}

/** What the probes found of a template: whether it is used incrementally at all, and for which shapes not. */
export interface ProbedTemplate {
  readonly usable: boolean;
  readonly unstable: ReadonlySet<string>;
}

/**
 * Renders every probe conversation split anywhere as the formula of the file's header says, with and without the
 * generation prompt, with and without tools, and sorts the splits by shape: a shape fails when any split of that shape
 * renders otherwise than the whole (or throws where the whole did not). Probes the template refuses whole
 * (raise_exception) say nothing. Not usable at all: a generation prompt that is not what the rendering with it adds,
 * or no shape that passed.
 */
export function probeShapes(tokenizer: HfTokenizer, source: string): ProbedTemplate {
  const unstable = new Set<string>();
  const passed = new Set<string>();
  for (const tools of [null, PROBE_TOOLS])
    for (const probe of PROBES)
      for (const agp of [true, false]) {
        const opts: ChatRenderOptions = { chat_template: source, tools, add_generation_prompt: agp };
        const noPrompt: ChatRenderOptions = { ...opts, add_generation_prompt: false };
        let whole: string;
        let gp: string;
        try {
          whole = tokenizer.renderChat(probe, opts);
          const off = agp ? tokenizer.renderChat(probe, noPrompt) : whole;
          if (!whole.startsWith(off)) return { usable: false, unstable };
          gp = whole.slice(off.length);
        } catch {
          continue;
        }
        for (let k = 2; k < probe.length; k++) {
          const head = headFor(probe, k);
          if (head === undefined) continue;
          const shape = joinShape(probe, k);
          let same: boolean;
          try {
            const known = tokenizer.renderChat(probe.slice(0, k), noPrompt);
            const h = tokenizer.renderChat(probe.slice(0, head), noPrompt);
            const tail = tokenizer.renderChat([...probe.slice(0, head), ...probe.slice(k)], noPrompt);
            same = tail.startsWith(h) && known + tail.slice(h.length) + gp === whole;
          } catch {
            same = false;
          }
          (same ? passed : unstable).add(shape);
        }
      }
  return { usable: [...passed].some((shape) => !unstable.has(shape)), unstable };
}

/** Whether `source` renders every probe conversation, split anywhere, as the whole (see probeShapes): every shape passes. */
export function prefixStable(tokenizer: HfTokenizer, source: string): boolean {
  const probed = probeShapes(tokenizer, source);
  return probed.usable && probed.unstable.size === 0;
}

const PROBE_TOOLS: readonly unknown[] = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'The weather in a city',
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
    },
  },
];

const CALL = { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } };
const CALL_2 = { id: 'call_2', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Rome"}' } };
const CALL_3 = { id: 'call_3', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Oslo"}' } };

/** Conversations that tell a prefix-stable template from one that is not (see prefixStable). */
const PROBES: readonly (readonly Record<string, unknown>[])[] = [
  [
    { role: 'system', content: '  You are a helpful assistant.\n' },
    { role: 'user', content: 'Hello there' },
    { role: 'assistant', content: '<think>\nThe user greets.\n</think>\n\nHi! How can I help?' },
    { role: 'user', content: ' What is 2 + 2?\n\n' },
    { role: 'assistant', content: 'It is 4.' },
    { role: 'user', content: 'And <|eot_id|><|im_end|></s> in text?' },
    { role: 'assistant', content: 'Noted.' },
    {
      role: 'user',
      content: [
        { type: 'text', text: 'Parts' },
        { type: 'text', text: 'joined' },
      ],
    },
  ],
  [
    { role: 'user', content: 'First question' },
    { role: 'assistant', content: 'First answer' },
    { role: 'user', content: 'Second question' },
    { role: 'assistant', content: '<think>hmm</think>Second answer' },
    { role: 'user', content: 'Third question' },
    { role: 'assistant', content: 'Third answer' },
    { role: 'user', content: 'Fourth question' },
  ],
  [
    { role: 'system', content: 'Use tools when useful.' },
    { role: 'user', content: 'Weather in Paris?' },
    { role: 'assistant', content: null, tool_calls: [CALL] },
    { role: 'tool', tool_call_id: 'call_1', content: '{"temperature": 20}' },
    { role: 'assistant', content: 'It is 20 degrees.' },
    { role: 'user', content: 'Thanks. And tomorrow?' },
    { role: 'assistant', content: null, tool_calls: [CALL] },
    { role: 'tool', tool_call_id: 'call_1', content: '{"temperature": 18}' },
    { role: 'assistant', content: '18 degrees.' },
    { role: 'user', content: 'Bye' },
  ],
  [
    { role: 'system', content: 'Short.' },
    { role: 'user', content: 'a' },
    { role: 'user', content: 'b' },
    { role: 'assistant', content: 'c' },
    { role: 'assistant', content: 'd' },
    { role: 'user', content: 'e' },
  ],
  // tool results two and three in a row (Qwen2.5 and Qwen3 open one user turn for a run of them), a call with text
  [
    { role: 'system', content: 'Use tools when useful.' },
    { role: 'user', content: 'Weather in Paris and Rome?' },
    { role: 'assistant', content: null, tool_calls: [CALL, CALL_2] },
    { role: 'tool', tool_call_id: 'call_1', content: '{"temperature": 20}' },
    { role: 'tool', tool_call_id: 'call_2', content: '{"temperature": 25}' },
    { role: 'assistant', content: 'Paris 20, Rome 25.' },
    { role: 'user', content: 'And all three tomorrow?' },
    { role: 'assistant', content: 'Let me look.', tool_calls: [CALL, CALL_2, CALL_3] },
    { role: 'tool', tool_call_id: 'call_1', content: '{"temperature": 18}' },
    { role: 'tool', tool_call_id: 'call_2', content: '{"temperature": 24}' },
    { role: 'tool', tool_call_id: 'call_3', content: '{"temperature": 3}' },
    { role: 'assistant', content: 'Cooler.' },
    { role: 'user', content: 'Thanks' },
  ],
  // no system message, a conversation that ends on tool results (the request that asks for the answer to them)
  [
    { role: 'user', content: 'Paris and Oslo?' },
    { role: 'assistant', content: null, tool_calls: [CALL, CALL_3] },
    { role: 'tool', tool_call_id: 'call_1', content: '20' },
    { role: 'tool', tool_call_id: 'call_3', content: '3' },
    { role: 'assistant', content: 'Warm and cold.' },
    { role: 'user', content: 'Rome?' },
    { role: 'assistant', content: null, tool_calls: [CALL_2] },
    { role: 'tool', tool_call_id: 'call_2', content: '25' },
  ],
  // Llama 3.1's role for tool results, a system message later on, empty contents
  [
    { role: 'system', content: 'First rules.' },
    { role: 'user', content: 'Run it.' },
    { role: 'assistant', content: null, tool_calls: [CALL] },
    { role: 'ipython', content: '{"temperature": 20}' },
    { role: 'assistant', content: '' },
    { role: 'system', content: 'New rules.' },
    { role: 'user', content: '' },
    { role: 'assistant', content: 'Fine.' },
    { role: 'user', content: 'Done' },
  ],
];
