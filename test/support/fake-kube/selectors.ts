// Label and field selectors with the grammar of the real API server (k8s.io/apimachinery labels.Parse):
// `k=v`, `k==v`, `k!=v`, `k`, `!k`, `k in (a,b)`, `k notin (a,b)`, requirements joined by commas (AND).

export type Requirement =
  | { readonly key: string; readonly op: 'exists' | 'notexists' }
  | { readonly key: string; readonly op: 'in' | 'notin'; readonly values: readonly string[] };

export class SelectorError extends Error {}

export type Selector = (labels: Readonly<Record<string, string>>) => boolean;

const KEY = /^([a-z0-9A-Z]([-a-z0-9A-Z_.]*[a-z0-9A-Z])?\/)?[a-z0-9A-Z]([-a-z0-9A-Z_.]*[a-z0-9A-Z])?$/;
const VALUE = /^([a-z0-9A-Z]([-a-z0-9A-Z_.]*[a-z0-9A-Z])?)?$/;

/** Splits on commas that are not inside parentheses. */
function splitTopLevel(text: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '(') depth++;
    else if (c === ')') depth--;
    else if (c === ',' && depth === 0) {
      parts.push(text.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(text.slice(start));
  return parts;
}

function checkKey(key: string, source: string): string {
  if (!KEY.test(key)) throw new SelectorError(`unable to parse requirement: invalid label key "${key}" in "${source}"`);
  return key;
}

function checkValue(value: string, source: string): string {
  if (!VALUE.test(value)) throw new SelectorError(`unable to parse requirement: invalid label value "${value}" in "${source}"`);
  return value;
}

export function parseLabelSelector(text: string): Requirement[] {
  const trimmed = text.trim();
  if (trimmed === '') return [];
  return splitTopLevel(trimmed).map((raw) => {
    const part = raw.trim();
    let m = /^(\S+?)\s+(in|notin)\s*\((.*)\)$/.exec(part);
    if (m) {
      const values = m[3]!.split(',').map((v) => checkValue(v.trim(), part));
      return { key: checkKey(m[1]!, part), op: m[2] as 'in' | 'notin', values };
    }
    m = /^([^!=\s]+)\s*(==|=|!=)\s*(\S*)$/.exec(part);
    if (m) {
      const value = checkValue(m[3]!, part);
      return { key: checkKey(m[1]!, part), op: m[2] === '!=' ? 'notin' : 'in', values: [value] };
    }
    m = /^!\s*(\S+)$/.exec(part);
    if (m) return { key: checkKey(m[1]!, part), op: 'notexists' };
    if (part !== '' && !/[\s=!()]/.test(part)) return { key: checkKey(part, part), op: 'exists' };
    throw new SelectorError(`unable to parse requirement: "${part}"`);
  });
}

export function matchesRequirements(requirements: readonly Requirement[], labels: Readonly<Record<string, string>>): boolean {
  return requirements.every((r) => {
    const has = Object.hasOwn(labels, r.key);
    switch (r.op) {
      case 'exists':
        return has;
      case 'notexists':
        return !has;
      case 'in':
        return has && r.values.includes(labels[r.key]!);
      case 'notin':
        return !has || !r.values.includes(labels[r.key]!);
      default:
        return false;
    }
  });
}

export function labelSelector(text: string | undefined): Selector {
  const requirements = parseLabelSelector(text ?? '');
  return (labels) => matchesRequirements(requirements, labels);
}

export type ObjectSelector = (obj: unknown) => boolean;

/** Field selectors: `path=v`, `path==v`, `path!=v` on any dotted path of the object (metadata.name, status.phase, ...). */
export function fieldSelector(text: string | undefined): ObjectSelector {
  const trimmed = (text ?? '').trim();
  if (trimmed === '') return () => true;
  const tests = trimmed.split(',').map((part) => {
    const m = /^([A-Za-z0-9_.]+)\s*(==|=|!=)\s*(.*)$/.exec(part.trim());
    if (!m) throw new SelectorError(`invalid selector: '${part}'; can't understand '${part}'`);
    const path = m[1]!.split('.');
    const negate = m[2] === '!=';
    const want = m[3]!;
    return (obj: unknown): boolean => {
      let v: unknown = obj;
      for (const p of path) v = v !== null && typeof v === 'object' ? (v as Record<string, unknown>)[p] : undefined;
      const actual = v === undefined || v === null ? '' : String(v);
      return (actual === want) !== negate;
    };
  });
  return (obj) => tests.every((t) => t(obj));
}
