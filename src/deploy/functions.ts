// The Sprig and Helm functions the chart uses, with Helm's behaviour (toYaml sorts keys and drops the final newline,
// quote uses Go's %q, default treats every empty value as unset). Anything else is "not defined": a chart that needs
// more must add it here, so the renderer never guesses.
import { createHash } from 'node:crypto';
import { stringify } from 'yaml';
import { goString, isTrue, TemplateError, type Func, type TemplateSet } from './gotemplate.js';

function toInt(v: unknown): number {
  if (typeof v === 'number') return Math.trunc(v);
  if (typeof v === 'boolean') return v ? 1 : 0;
  if (typeof v === 'string') {
    const n = Number(v.trim());
    return Number.isFinite(n) ? Math.trunc(n) : 0;
  }
  return 0;
}

function toFloat(v: unknown): number {
  if (typeof v === 'number') return v;
  const n = Number(String(v ?? '').trim());
  return Number.isFinite(n) ? n : 0;
}

function sortKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (typeof v === 'object' && v !== null) {
    const o = v as Record<string, unknown>;
    return Object.fromEntries(Object.keys(o).sort().map((k) => [k, sortKeys(o[k])]));
  }
  return v;
}

/** Helm's toYaml: keys sorted (it goes through JSON), block style, sequences not indented, no final newline. */
export function toYaml(v: unknown): string {
  if (v === undefined) return 'null';
  return stringify(sortKeys(v), { indentSeq: false, lineWidth: 0, aliasDuplicateObjects: false }).replace(/\n$/, '');
}

/** Go's %q for a string. */
export function goQuote(s: string): string {
  return JSON.stringify(s).replace(/[\u007f-\u009f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

function indent(n: unknown, s: unknown): string {
  const pad = ' '.repeat(toInt(n));
  return pad + goString(s).replace(/\n/g, '\n' + pad);
}

function printf(format: unknown, ...args: unknown[]): string {
  let i = 0;
  return String(format).replace(/%([-+ 0#]*)(\d*)(?:\.(\d+))?([svdqftxXT%])/g, (_m, _flags: string, _width: string, prec: string | undefined, verb: string) => {
    if (verb === '%') return '%';
    const a = args[i++];
    switch (verb) {
      case 's':
      case 'v':
        return goString(a);
      case 'd':
        return String(toInt(a));
      case 'q':
        return goQuote(goString(a));
      case 'f':
        return toFloat(a).toFixed(prec === undefined ? 6 : Number(prec));
      case 'x':
        return toInt(a).toString(16);
      case 'X':
        return toInt(a).toString(16).toUpperCase();
      case 't':
        return String(isTrue(a));
      default:
        return typeof a;
    }
  });
}

/** fmt.Sprint: spaces between operands when neither side is a string. */
function sprint(...args: unknown[]): string {
  let out = '';
  args.forEach((a, i) => {
    if (i > 0 && typeof a !== 'string' && typeof args[i - 1] !== 'string') out += ' ';
    out += a === null || a === undefined ? '<nil>' : goString(a);
  });
  return out;
}

function compare(name: string, a: unknown, b: unknown): number {
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  if (typeof a === 'string' && typeof b === 'string') return a < b ? -1 : a > b ? 1 : 0;
  throw new TemplateError(`${name}: incompatible types for comparison: ${goString(a)} and ${goString(b)}`);
}

function basicEqual(a: unknown, b: unknown): boolean {
  const nil = (x: unknown): boolean => x === null || x === undefined;
  if (nil(a) || nil(b)) return nil(a) && nil(b);
  if (typeof a === 'object' || typeof b === 'object') throw new TemplateError('eq: non-comparable type');
  if (typeof a !== typeof b) throw new TemplateError(`eq: incompatible types for comparison: ${goString(a)} and ${goString(b)}`);
  return a === b;
}

export interface HelmFunctionsContext {
  readonly templates: () => TemplateSet;
}

/** Go template builtins plus the Sprig/Helm functions this chart uses. */
export function helmFunctions(ctx: HelmFunctionsContext): Record<string, Func> {
  const funcs: Record<string, Func> = {
    // text/template builtins (and/or are evaluated lazily by the engine)
    not: (v) => !isTrue(v),
    eq: (a, ...rest) => rest.some((b) => basicEqual(a, b)),
    ne: (a, b) => !basicEqual(a, b),
    lt: (a, b) => compare('lt', a, b) < 0,
    le: (a, b) => compare('le', a, b) <= 0,
    gt: (a, b) => compare('gt', a, b) > 0,
    ge: (a, b) => compare('ge', a, b) >= 0,
    len: (v) => {
      if (typeof v === 'string' || Array.isArray(v)) return v.length;
      if (typeof v === 'object' && v !== null) return Object.keys(v).length;
      throw new TemplateError(`len of ${goString(v)}`);
    },
    index: (v, ...keys) => {
      let cur = v;
      for (const k of keys) {
        if (Array.isArray(cur)) {
          const i = toInt(k);
          if (i < 0 || i >= cur.length) throw new TemplateError(`index out of range: ${i}`);
          cur = cur[i];
        } else if (typeof cur === 'object' && cur !== null) cur = (cur as Record<string, unknown>)[String(k)] ?? null;
        else if (cur === null || cur === undefined) return null;
        else throw new TemplateError(`can't index item of type ${typeof cur}`);
      }
      return cur;
    },
    print: sprint,
    printf: (f, ...args) => printf(f, ...args),
    // Sprig
    default: (def, ...given) => (given.length > 0 && isTrue(given[0]) ? given[0] : def),
    empty: (v) => !isTrue(v),
    coalesce: (...vs) => vs.find(isTrue) ?? null,
    ternary: (a, b, cond) => (isTrue(cond) ? a : b),
    quote: (...vs) => vs.filter((v) => v !== null && v !== undefined).map((v) => goQuote(goString(v))).join(' '),
    squote: (...vs) => vs.filter((v) => v !== null && v !== undefined).map((v) => `'${goString(v)}'`).join(' '),
    toString: (v: unknown) => goString(v),
    toYaml: (v) => toYaml(v),
    toJson: (v) => JSON.stringify(sortKeys(v ?? null)),
    indent: (n, s) => indent(n, s),
    nindent: (n, s) => '\n' + indent(n, s),
    trim: (s) => goString(s).trim(),
    trimSuffix: (suffix, s) => {
      const str = goString(s);
      const suf = goString(suffix);
      return suf && str.endsWith(suf) ? str.slice(0, -suf.length) : str;
    },
    trimPrefix: (prefix, s) => {
      const str = goString(s);
      const pre = goString(prefix);
      return pre && str.startsWith(pre) ? str.slice(pre.length) : str;
    },
    trunc: (n, s) => {
      const str = goString(s);
      const c = toInt(n);
      return c >= 0 ? str.slice(0, c) : str.slice(Math.max(0, str.length + c));
    },
    upper: (s) => goString(s).toUpperCase(),
    lower: (s) => goString(s).toLowerCase(),
    replace: (from, to, s) => goString(s).split(goString(from)).join(goString(to)),
    contains: (sub, s) => goString(s).includes(goString(sub)),
    hasPrefix: (pre, s) => goString(s).startsWith(goString(pre)),
    hasSuffix: (suf, s) => goString(s).endsWith(goString(suf)),
    join: (sep, list) => (Array.isArray(list) ? list.map(goString).join(goString(sep)) : goString(list)),
    int: (v) => toInt(v),
    int64: (v) => toInt(v),
    float64: (v) => toFloat(v),
    add: (...vs) => vs.reduce<number>((s, v) => s + toInt(v), 0),
    add1: (v) => toInt(v) + 1,
    sub: (a, b) => toInt(a) - toInt(b),
    mul: (...vs) => vs.reduce<number>((s, v) => s * toInt(v), 1),
    div: (a, b) => {
      if (toInt(b) === 0) throw new TemplateError('integer divide by zero');
      return Math.trunc(toInt(a) / toInt(b));
    },
    max: (...vs) => Math.max(...vs.map(toInt)),
    min: (...vs) => Math.min(...vs.map(toInt)),
    list: (...vs) => vs,
    append: (list, v) => [...(Array.isArray(list) ? list : []), v],
    concat: (...lists) => lists.flatMap((l) => (Array.isArray(l) ? l : [])),
    has: (needle, list) => Array.isArray(list) && list.some((v) => v === needle),
    splitList: (sep, s) => goString(s).split(goString(sep)),
    base: (s) => {
      const parts = goString(s).replace(/\/+$/, '').split('/');
      return parts[parts.length - 1] || '/';
    },
    dict: (...kv) => {
      const o: Record<string, unknown> = {};
      for (let i = 0; i + 1 < kv.length; i += 2) o[goString(kv[i])] = kv[i + 1];
      return o;
    },
    hasKey: (m, k) => typeof m === 'object' && m !== null && Object.prototype.hasOwnProperty.call(m, goString(k)),
    kindIs: (kind, v) => {
      const k = v === null || v === undefined ? 'invalid' : Array.isArray(v) ? 'slice' : typeof v === 'object' ? 'map' : typeof v === 'number' ? (Number.isInteger(v) ? 'int' : 'float64') : typeof v === 'boolean' ? 'bool' : 'string';
      return k === kind || (kind === 'float64' && typeof v === 'number');
    },
    sha256sum: (s) => createHash('sha256').update(goString(s)).digest('hex'),
    b64enc: (s) => Buffer.from(goString(s)).toString('base64'),
    // Helm
    required: (message, v) => {
      if (v === null || v === undefined || v === '') throw new TemplateError(goString(message));
      return v;
    },
    fail: (message) => {
      throw new TemplateError(goString(message));
    },
    include: (name, dot) => ctx.templates().execute(goString(name), dot),
  };
  return funcs;
}
