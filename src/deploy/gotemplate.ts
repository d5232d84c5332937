// The subset of Go's text/template that Helm charts use, with Helm's semantics where they matter:
// `{{-`/`-}}` trimming, pipelines, variables and `$`, if/else if/range/with/define/template, and a
// missing map key that is nil (printing nothing, failing on a field access) as under Helm's missingkey=zero.
// Numbers are one JavaScript kind (Go has int and float64): charts meant for real Helm wrap values in `int`.

export class TemplateError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TemplateError';
  }
}

export type Func = (...args: unknown[]) => unknown;

type Arg =
  | { readonly t: 'dot' }
  | { readonly t: 'field'; readonly base: Arg | undefined; readonly chain: readonly string[] }
  | { readonly t: 'var'; readonly name: string }
  | { readonly t: 'lit'; readonly value: unknown }
  | { readonly t: 'ident'; readonly name: string }
  | { readonly t: 'pipe'; readonly pipe: Pipe };

interface Pipe {
  readonly decl: readonly string[];
  /** true for `$x = ...` (assign), false for `$x := ...` (declare) */
  readonly assign: boolean;
  readonly cmds: readonly (readonly Arg[])[];
}

type Node =
  | { readonly t: 'text'; readonly text: string }
  | { readonly t: 'action'; readonly pipe: Pipe; readonly where: string }
  | { readonly t: 'if'; readonly branches: readonly { readonly pipe: Pipe; readonly body: readonly Node[] }[]; readonly otherwise: readonly Node[] | undefined; readonly where: string }
  | BlockNode
  | { readonly t: 'template'; readonly name: string; readonly pipe: Pipe | undefined; readonly where: string };

interface BlockNode {
  readonly t: 'range' | 'with';
  readonly pipe: Pipe;
  readonly body: readonly Node[];
  readonly otherwise: readonly Node[] | undefined;
  readonly where: string;
}

// ---------------------------------------------------------------- lexing

interface TextItem { readonly k: 'text'; readonly text: string }
interface ActionItem { readonly k: 'action'; readonly tokens: readonly Token[]; readonly where: string }
type Item = TextItem | ActionItem;

interface Token {
  readonly k: 'str' | 'num' | 'ident' | 'field' | 'var' | 'punct';
  readonly v: string;
  /** the token follows the previous one with no space: `(pipe).Field` */
  glued?: boolean;
}


function unquote(raw: string, where: string): string {
  try {
    return JSON.parse(raw.replace(/\\'/g, "'")) as string;
  } catch {
    throw new TemplateError(`${where}: bad string literal ${raw}`);
  }
}

function tokenize(body: string, where: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  const isIdent = (c: string): boolean => /[A-Za-z0-9_]/.test(c);
  let lastEnd = -1;
  while (i < body.length) {
    const c = body[i] as string;
    const count = tokens.length;
    const start = i;
    if (/\s/.test(c)) {
      i++;
      continue;
    } else if (c === '"') {
      let j = i + 1;
      while (j < body.length && body[j] !== '"') j += body[j] === '\\' ? 2 : 1;
      if (j >= body.length) throw new TemplateError(`${where}: unterminated string`);
      tokens.push({ k: 'str', v: unquote(body.slice(i, j + 1), where) });
      i = j + 1;
    } else if (c === '`') {
      const j = body.indexOf('`', i + 1);
      if (j < 0) throw new TemplateError(`${where}: unterminated raw string`);
      tokens.push({ k: 'str', v: body.slice(i + 1, j) });
      i = j + 1;
    } else if (c === ':' && body[i + 1] === '=') {
      tokens.push({ k: 'punct', v: ':=' });
      i += 2;
    } else if ('|()=,'.includes(c)) {
      tokens.push({ k: 'punct', v: c });
      i++;
    } else if (/[0-9]/.test(c) || (c === '-' && /[0-9]/.test(body[i + 1] ?? ''))) {
      let j = i + 1;
      while (j < body.length && /[0-9.eExXa-fA-F_+-]/.test(body[j] as string) && !(body[j] === '-' && !/[eE]/.test(body[j - 1] as string))) j++;
      tokens.push({ k: 'num', v: body.slice(i, j) });
      i = j;
    } else if (c === '.' || c === '$') {
      let j = i + 1;
      while (j < body.length && (isIdent(body[j] as string) || body[j] === '.')) j++;
      tokens.push({ k: c === '.' ? 'field' : 'var', v: body.slice(i, j) });
      i = j;
    } else if (isIdent(c)) {
      let j = i + 1;
      while (j < body.length && isIdent(body[j] as string)) j++;
      tokens.push({ k: 'ident', v: body.slice(i, j) });
      i = j;
    } else {
      throw new TemplateError(`${where}: unexpected ${JSON.stringify(c)} in action`);
    }
    if (tokens.length > count && start === lastEnd) (tokens[tokens.length - 1] as Token).glued = true;
    lastEnd = i;
  }
  return tokens;
}

/** Splits a template into text and actions, applying the trim markers. */
function lex(src: string, name: string): Item[] {
  const items: Item[] = [];
  let pos = 0;
  let trimNext = false;
  let line = 1;
  let counted = 0;
  const lineAt = (offset: number): number => {
    for (; counted < offset; counted++) if (src.charCodeAt(counted) === 10) line++;
    return line;
  };
  while (pos <= src.length) {
    const open = src.indexOf('{{', pos);
    let text = open < 0 ? src.slice(pos) : src.slice(pos, open);
    if (trimNext) text = text.replace(/^\s+/, '');
    if (open < 0) {
      if (text) items.push({ k: 'text', text });
      break;
    }
    const trimLeft = src[open + 2] === '-' && /\s/.test(src[open + 3] ?? '');
    if (trimLeft) text = text.replace(/\s+$/, '');
    if (text) items.push({ k: 'text', text });
    const where = `${name}:${lineAt(open)}`;
    const start = open + (trimLeft ? 3 : 2);
    // find the closing braces outside string literals
    let close = -1;
    let inStr: string | undefined;
    for (let j = start; j < src.length; j++) {
      const c = src[j];
      if (inStr) {
        if (c === '\\' && inStr === '"') j++;
        else if (c === inStr) inStr = undefined;
      } else if (c === '"' || c === '`') inStr = c;
      else if (c === '}' && src[j + 1] === '}') {
        close = j;
        break;
      }
    }
    if (close < 0) throw new TemplateError(`${where}: unclosed action`);
    let body = src.slice(start, close);
    trimNext = /\s-$/.test(body);
    if (trimNext) body = body.slice(0, -1);
    pos = close + 2;
    const trimmed = body.trim();
    if (trimmed.startsWith('/*')) {
      if (!trimmed.endsWith('*/')) throw new TemplateError(`${where}: unclosed comment`);
      continue;
    }
    items.push({ k: 'action', tokens: tokenize(body, where), where });
  }
  return items;
}

// ---------------------------------------------------------------- parsing

class Parser {
  private i = 0;
  readonly defines = new Map<string, readonly Node[]>();

  constructor(private readonly items: readonly Item[]) {}

  parseTop(): Node[] {
    const { nodes, end } = this.list();
    if (end) throw new TemplateError(`${end.where}: unexpected {{${end.tokens.map((t) => t.v).join(' ')}}}`);
    return nodes;
  }

  /** Nodes up to an `end` or `else` action (returned, not consumed past). */
  private list(): { nodes: Node[]; end: ActionItem | undefined } {
    const nodes: Node[] = [];
    while (this.i < this.items.length) {
      const item = this.items[this.i++] as Item;
      if (item.k === 'text') {
        nodes.push({ t: 'text', text: item.text });
        continue;
      }
      const [first] = item.tokens;
      const kw = first?.k === 'ident' ? first.v : undefined;
      if (kw === 'end' || kw === 'else') return { nodes, end: item };
      if (kw === 'if') nodes.push(this.ifNode(item, item.tokens.slice(1)));
      else if (kw === 'range' || kw === 'with') nodes.push(this.block(kw, item));
      else if (kw === 'define') this.define(item);
      else if (kw === 'template' || kw === 'block') nodes.push(this.template(item, kw === 'block'));
      else nodes.push({ t: 'action', pipe: parsePipe(item.tokens, item.where), where: item.where });
    }
    return { nodes, end: undefined };
  }

  private expectEnd(end: ActionItem | undefined, what: string, where: string): void {
    if (!end || end.tokens[0]?.v !== 'end' || end.tokens.length !== 1) throw new TemplateError(`${where}: {{${what}}} without {{end}}`);
  }

  private ifNode(item: ActionItem, cond: readonly Token[]): Node {
    const branches: { pipe: Pipe; body: readonly Node[] }[] = [];
    let pipe = parsePipe(cond, item.where);
    for (;;) {
      const { nodes, end } = this.list();
      branches.push({ pipe, body: nodes });
      if (end?.tokens[0]?.v === 'else') {
        if (end.tokens[1]?.v === 'if') {
          pipe = parsePipe(end.tokens.slice(2), end.where);
          continue;
        }
        const rest = this.list();
        this.expectEnd(rest.end, 'if', item.where);
        return { t: 'if', branches, otherwise: rest.nodes, where: item.where };
      }
      this.expectEnd(end, 'if', item.where);
      return { t: 'if', branches, otherwise: undefined, where: item.where };
    }
  }

  private block(kw: 'range' | 'with', item: ActionItem): Node {
    const pipe = parsePipe(item.tokens.slice(1), item.where);
    const { nodes, end } = this.list();
    let otherwise: Node[] | undefined;
    if (end?.tokens[0]?.v === 'else' && end.tokens.length === 1) {
      const rest = this.list();
      this.expectEnd(rest.end, kw, item.where);
      otherwise = rest.nodes;
    } else this.expectEnd(end, kw, item.where);
    return { t: kw, pipe, body: nodes, otherwise, where: item.where };
  }

  private define(item: ActionItem): void {
    const name = item.tokens[1];
    if (name?.k !== 'str' || item.tokens.length !== 2) throw new TemplateError(`${item.where}: define needs one quoted name`);
    const { nodes, end } = this.list();
    this.expectEnd(end, 'define', item.where);
    this.defines.set(name.v, nodes);
  }

  private template(item: ActionItem, isBlock: boolean): Node {
    const name = item.tokens[1];
    if (name?.k !== 'str') throw new TemplateError(`${item.where}: template needs a quoted name`);
    const rest = item.tokens.slice(2);
    const pipe = rest.length > 0 ? parsePipe(rest, item.where) : undefined;
    if (isBlock) {
      const { nodes, end } = this.list();
      this.expectEnd(end, 'block', item.where);
      if (!this.defines.has(name.v)) this.defines.set(name.v, nodes);
    }
    return { t: 'template', name: name.v, pipe, where: item.where };
  }
}

function parsePipe(tokens: readonly Token[], where: string): Pipe {
  let rest = tokens;
  let decl: string[] = [];
  let assign = false;
  // `$a := ...`, `$a = ...`, `$i, $v := ...`
  const declEnd = rest.findIndex((t) => t.k === 'punct' && (t.v === ':=' || t.v === '='));
  if (declEnd > 0 && rest.slice(0, declEnd).every((t) => t.k === 'var' || (t.k === 'punct' && t.v === ','))) {
    decl = rest.slice(0, declEnd).filter((t) => t.k === 'var').map((t) => t.v);
    assign = rest[declEnd]?.v === '=';
    rest = rest.slice(declEnd + 1);
  }
  const cmds: Arg[][] = [];
  let pos = 0;
  const operand = (): Arg => {
    const t = rest[pos++];
    if (!t) throw new TemplateError(`${where}: missing operand`);
    switch (t.k) {
      case 'str':
        return { t: 'lit', value: t.v };
      case 'num': {
        const n = Number(t.v.replace(/_/g, ''));
        if (!Number.isFinite(n)) throw new TemplateError(`${where}: bad number ${t.v}`);
        return { t: 'lit', value: n };
      }
      case 'field':
        return t.v === '.' ? { t: 'dot' } : { t: 'field', base: undefined, chain: t.v.slice(1).split('.') };
      case 'var': {
        const [name, ...chain] = t.v.split('.');
        const base: Arg = { t: 'var', name: name as string };
        return chain.length > 0 ? { t: 'field', base, chain } : base;
      }
      case 'ident':
        if (t.v === 'true' || t.v === 'false') return { t: 'lit', value: t.v === 'true' };
        if (t.v === 'nil') return { t: 'lit', value: null };
        return { t: 'ident', name: t.v };
      case 'punct':
        if (t.v === '(') {
          let depth = 1;
          const start = pos;
          while (pos < rest.length && depth > 0) {
            const p = rest[pos++] as Token;
            if (p.k === 'punct' && p.v === '(') depth++;
            if (p.k === 'punct' && p.v === ')') depth--;
          }
          if (depth !== 0) throw new TemplateError(`${where}: unclosed (`);
          const inner: Arg = { t: 'pipe', pipe: parsePipe(rest.slice(start, pos - 1), where) };
          const next = rest[pos];
          if (next?.k === 'field' && next.v !== '.' && next.glued) {
            pos++;
            return { t: 'field', base: inner, chain: next.v.slice(1).split('.') };
          }
          return inner;
        }
        throw new TemplateError(`${where}: unexpected ${t.v}`);
    }
  };
  let cmd: Arg[] = [];
  while (pos < rest.length) {
    const t = rest[pos] as Token;
    if (t.k === 'punct' && t.v === '|') {
      if (cmd.length === 0) throw new TemplateError(`${where}: empty command in pipeline`);
      cmds.push(cmd);
      cmd = [];
      pos++;
      continue;
    }
    cmd.push(operand());
  }
  if (cmd.length === 0) throw new TemplateError(`${where}: missing value`);
  cmds.push(cmd);
  return { decl, assign, cmds };
}

// ---------------------------------------------------------------- values

export function isTrue(v: unknown): boolean {
  if (v === undefined || v === null || v === false || v === 0 || v === '') return false;
  if (Array.isArray(v)) return v.length > 0;
  if (v instanceof Map) return v.size > 0;
  if (typeof v === 'object') return Object.keys(v).length > 0;
  return true;
}

/** fmt's %v, as text/template prints values; nil prints nothing, as Helm does. */
export function goString(v: unknown): string {
  if (v === undefined || v === null) return '';
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (Array.isArray(v)) return `[${v.map((x) => (x === null || x === undefined ? '<nil>' : goString(x))).join(' ')}]`;
  if (typeof v === 'object') {
    const o = v as Record<string, unknown>;
    return `map[${Object.keys(o).sort().map((k) => `${k}:${o[k] === null || o[k] === undefined ? '<nil>' : goString(o[k])}`).join(' ')}]`;
  }
  return String(v);
}

function isMap(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function typeName(v: unknown): string {
  if (v === null || v === undefined) return 'nil';
  if (Array.isArray(v)) return '[]interface {}';
  if (isMap(v)) return 'map[string]interface {}';
  if (typeof v === 'number') return Number.isInteger(v) ? 'int' : 'float64';
  return typeof v;
}

// ---------------------------------------------------------------- execution

interface Scope {
  readonly vars: { name: string; value: unknown }[];
}

export interface TemplateSet {
  /** renders a named template (a file or a define) with the given dot */
  execute(name: string, dot: unknown): string;
  has(name: string): boolean;
}

const MAX_DEPTH = 100;

export class Templates implements TemplateSet {
  private readonly trees = new Map<string, readonly Node[]>();
  private depth = 0;

  constructor(private readonly funcs: Readonly<Record<string, Func>>) {}

  /** Parses a file; its defines join the shared set (a later file's define wins, as in Helm). */
  add(name: string, src: string): void {
    const parser = new Parser(lex(src, name));
    const nodes = parser.parseTop();
    for (const [d, body] of parser.defines) this.trees.set(d, body);
    this.trees.set(name, nodes);
  }

  has(name: string): boolean {
    return this.trees.has(name);
  }

  execute(name: string, dot: unknown): string {
    const tree = this.trees.get(name);
    if (!tree) throw new TemplateError(`no template ${JSON.stringify(name)}`);
    if (++this.depth > MAX_DEPTH) {
      this.depth = 0;
      throw new TemplateError(`template ${JSON.stringify(name)}: calls nest deeper than ${MAX_DEPTH}`);
    }
    try {
      const out: string[] = [];
      this.walk(tree, dot, [{ vars: [{ name: '$', value: dot }] }], out);
      return out.join('');
    } finally {
      this.depth--;
    }
  }

  private walk(nodes: readonly Node[], dot: unknown, scopes: Scope[], out: string[]): void {
    for (const node of nodes) {
      switch (node.t) {
        case 'text':
          out.push(node.text);
          break;
        case 'action': {
          const v = this.pipe(node.pipe, dot, scopes, node.where);
          if (node.pipe.decl.length === 0) out.push(goString(v));
          break;
        }
        case 'if': {
          const branch = node.branches.find((b) => isTrue(this.pipe(b.pipe, dot, scopes, node.where)));
          const body = branch ? branch.body : node.otherwise;
          if (body) this.walk(body, dot, [...scopes, { vars: [] }], out);
          break;
        }
        case 'with': {
          const inner: Scope = { vars: [] };
          const v = this.pipe(node.pipe, dot, [...scopes, inner], node.where);
          if (isTrue(v)) this.walk(node.body, v, [...scopes, inner], out);
          else if (node.otherwise) this.walk(node.otherwise, dot, [...scopes, { vars: [] }], out);
          break;
        }
        case 'range':
          this.range(node, dot, scopes, out);
          break;
        case 'template': {
          const arg = node.pipe ? this.pipe(node.pipe, dot, scopes, node.where) : undefined;
          out.push(this.execute(node.name, arg));
          break;
        }
      }
    }
  }

  private range(node: BlockNode, dot: unknown, scopes: Scope[], out: string[]): void {
    const decl = node.pipe.decl;
    const source = this.pipe({ ...node.pipe, decl: [] }, dot, scopes, node.where);
    let entries: [unknown, unknown][];
    if (source === undefined || source === null) entries = [];
    else if (Array.isArray(source)) entries = source.map((v, i) => [i, v]);
    else if (isMap(source)) entries = Object.keys(source).sort().map((k) => [k, source[k]]);
    else if (typeof source === 'number' && Number.isInteger(source)) entries = Array.from({ length: Math.max(0, source) }, (_, i) => [i, i]);
    else throw new TemplateError(`${node.where}: range can't iterate over ${goString(source)}`);
    if (entries.length === 0) {
      if (node.otherwise) this.walk(node.otherwise, dot, [...scopes, { vars: [] }], out);
      return;
    }
    for (const [key, value] of entries) {
      const vars: { name: string; value: unknown }[] = [];
      if (decl.length === 1) vars.push({ name: decl[0] as string, value });
      if (decl.length === 2) vars.push({ name: decl[0] as string, value: key }, { name: decl[1] as string, value });
      this.walk(node.body, value, [...scopes, { vars }], out);
    }
  }

  private pipe(pipe: Pipe, dot: unknown, scopes: Scope[], where: string): unknown {
    let value: unknown;
    let first = true;
    for (const cmd of pipe.cmds) {
      value = this.command(cmd, dot, scopes, where, first ? [] : [value]);
      first = false;
    }
    if (pipe.decl.length > 0) {
      const name = pipe.decl[pipe.decl.length - 1] as string;
      if (pipe.assign) {
        const found = this.findVar(name, scopes, where);
        found.value = value;
      } else {
        (scopes[scopes.length - 1] as Scope).vars.push({ name, value });
      }
    }
    return value;
  }

  private findVar(name: string, scopes: Scope[], where: string): { name: string; value: unknown } {
    for (let s = scopes.length - 1; s >= 0; s--) {
      const vars = (scopes[s] as Scope).vars;
      for (let v = vars.length - 1; v >= 0; v--) if ((vars[v] as { name: string }).name === name) return vars[v] as { name: string; value: unknown };
    }
    throw new TemplateError(`${where}: undefined variable ${name}`);
  }

  private command(cmd: readonly Arg[], dot: unknown, scopes: Scope[], where: string, piped: unknown[]): unknown {
    const [head, ...rest] = cmd;
    if (!head) throw new TemplateError(`${where}: empty command`);
    const evalArg = (a: Arg): unknown => this.arg(a, dot, scopes, where);
    if (head.t === 'ident') {
      const name = head.name;
      // and/or stop at the first value that decides (Go 1.18+), so `and .a .a.b` is safe when .a is nil
      if (name === 'and' || name === 'or') {
        const args = [...rest.map((a) => () => evalArg(a)), ...piped.map((p) => () => p)];
        if (args.length === 0) throw new TemplateError(`${where}: ${name} needs arguments`);
        let v: unknown;
        for (const get of args) {
          v = get();
          if (name === 'and' ? !isTrue(v) : isTrue(v)) return v;
        }
        return v;
      }
      const fn = this.funcs[name];
      if (!fn) throw new TemplateError(`${where}: function ${JSON.stringify(name)} not defined`);
      try {
        return fn(...rest.map(evalArg), ...piped);
      } catch (err) {
        if (err instanceof TemplateError) throw err;
        throw new TemplateError(`${where}: error calling ${name}: ${(err as Error).message}`);
      }
    }
    // a method value (e.g. .Capabilities.APIVersions.Has "x") takes the remaining words as arguments
    if (head.t === 'field') {
      const v = this.arg(head, dot, scopes, where);
      if (typeof v === 'function') return (v as Func)(...rest.map(evalArg), ...piped);
      if (rest.length > 0 || piped.length > 0) throw new TemplateError(`${where}: can't give arguments to non-function ${head.chain.join('.')}`);
      return v;
    }
    if (rest.length > 0 || piped.length > 0) throw new TemplateError(`${where}: can't give arguments to a non-function value`);
    return evalArg(head);
  }

  private arg(a: Arg, dot: unknown, scopes: Scope[], where: string): unknown {
    switch (a.t) {
      case 'dot':
        return dot;
      case 'lit':
        return a.value;
      case 'var':
        return this.findVar(a.name, scopes, where).value;
      case 'pipe':
        return this.pipe(a.pipe, dot, [...scopes, { vars: [] }], where);
      case 'ident': {
        const fn = this.funcs[a.name];
        if (!fn) throw new TemplateError(`${where}: function ${JSON.stringify(a.name)} not defined`);
        return fn();
      }
      case 'field': {
        let v = a.base ? this.arg(a.base, dot, scopes, where) : dot;
        for (const key of a.chain) {
          if (v === undefined || v === null) throw new TemplateError(`${where}: nil pointer evaluating interface {}.${key}`);
          if (!isMap(v)) throw new TemplateError(`${where}: can't evaluate field ${key} in type ${typeName(v)}`);
          v = Object.prototype.hasOwnProperty.call(v, key) ? v[key] : null;
        }
        return v;
      }
    }
  }
}
