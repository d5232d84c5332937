// Kubernetes label selectors in their string form (`a=b,c!=d,e in (f,g),h notin (i),j,!k`), as the router's
// --k8s-label-selector takes them, so the linter can tell which workloads the router would see.

export type Requirement =
  | { readonly op: 'eq' | 'ne'; readonly key: string; readonly value: string }
  | { readonly op: 'in' | 'notin'; readonly key: string; readonly values: readonly string[] }
  | { readonly op: 'exists' | 'absent'; readonly key: string };

export class SelectorError extends Error {}

/** Splits on commas that are not inside parentheses. */
function terms(selector: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let current = '';
  for (const c of selector) {
    if (c === '(') depth++;
    if (c === ')') depth--;
    if (c === ',' && depth === 0) {
      out.push(current);
      current = '';
    } else current += c;
  }
  out.push(current);
  return out.map((t) => t.trim()).filter(Boolean);
}

export function parseSelector(selector: string): Requirement[] {
  return terms(selector).map((term) => {
    let m = /^([\w./-]+)\s+(in|notin)\s+\(([^)]*)\)$/.exec(term);
    if (m)
      return {
        op: m[2] as 'in' | 'notin',
        key: m[1] as string,
        values: (m[3] as string)
          .split(',')
          .map((v) => v.trim())
          .filter(Boolean),
      };
    m = /^([\w./-]+)\s*(!=|==|=)\s*([\w.-]*)$/.exec(term);
    if (m) return { op: m[2] === '!=' ? 'ne' : 'eq', key: m[1] as string, value: m[3] as string };
    m = /^(!?)\s*([\w./-]+)$/.exec(term);
    if (m) return { op: m[1] ? 'absent' : 'exists', key: m[2] as string };
    throw new SelectorError(`cannot parse label selector term ${JSON.stringify(term)}`);
  });
}

export function matches(requirements: readonly Requirement[], labels: Readonly<Record<string, string>> | undefined): boolean {
  const l = labels ?? {};
  return requirements.every((r) => {
    const has = Object.hasOwn(l, r.key);
    const v = l[r.key];
    switch (r.op) {
      case 'eq':
        return has && v === r.value;
      case 'ne':
        return !has || v !== r.value;
      case 'in':
        return has && r.values.includes(v as string);
      case 'notin':
        return !has || !r.values.includes(v as string);
      case 'exists':
        return has;
      case 'absent':
        return !has;
      default:
        return false;
    }
  });
}
