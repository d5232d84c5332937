// "Did you mean ...": the names closest to a mistyped one, by a small edit distance that ignores case. The work is
// bounded whatever the name (a model name a client sent may be long): only cells near the diagonal are computed; and
// whatever the number of names (a 404 among thousands of declared models): NameIndex finds one-edit typos by key and
// compares at most MAX_COMPARED names in full.

/** Names longer than this get no suggestion: nothing declared is that long. */
const MAX_NAME_CHARS = 256;

/**
 * Damerau-Levenshtein distance (optimal string alignment: a swap of two neighbours counts as one edit) when it is at
 * most `limit`, else limit + 1. Only the band of cells within `limit` of the diagonal is computed.
 */
export function editDistance(a: string, b: string, limit = Math.max(a.length, b.length)): number {
  if (Math.abs(a.length - b.length) > limit) return limit + 1;
  const width = b.length + 1;
  const over = limit + 1;
  if (rows.width < width) rows = scratch(width);
  // three rows reused from call to call: a 404 may compare thousands of names
  let before = rows.a;
  let previous = rows.b;
  let current = rows.c;
  before.fill(over, 0, width);
  previous.fill(over, 0, width);
  for (let j = 0; j <= Math.min(b.length, limit); j++) previous[j] = j;
  for (let i = 1; i <= a.length; i++) {
    current.fill(over, 0, width);
    if (i <= limit) current[0] = i;
    let best = current[0] as number;
    const ai = a.charCodeAt(i - 1);
    const aPrev = i > 1 ? a.charCodeAt(i - 2) : -1;
    for (let j = Math.max(1, i - limit); j <= Math.min(b.length, i + limit); j++) {
      const bj = b.charCodeAt(j - 1);
      const cost = ai === bj ? 0 : 1;
      let d = Math.min((previous[j] as number) + 1, (current[j - 1] as number) + 1, (previous[j - 1] as number) + cost);
      if (j > 1 && ai === b.charCodeAt(j - 2) && aPrev === bj) d = Math.min(d, (before[j - 2] as number) + 1);
      current[j] = Math.min(d, over);
      if (d < best) best = d;
    }
    // every later row is at least this far: nothing within the limit is left
    if (best > limit) return over;
    const spare = before;
    before = previous;
    previous = current;
    current = spare;
  }
  return Math.min(previous[b.length] as number, over);
}

function scratch(width: number): { width: number; a: Int32Array; b: Int32Array; c: Int32Array } {
  return { width, a: new Int32Array(width), b: new Int32Array(width), c: new Int32Array(width) };
}
let rows = scratch(MAX_NAME_CHARS + 2);

/** Edits that still look like a typo: a third of the name rounded up, 1 to 3. */
function typoLimit(length: number): number {
  return Math.min(3, Math.max(1, Math.ceil(length / 3)));
}

/** The candidates within a typo of `name` (case-insensitive), closest first (ties in the candidates' order), at most `most`. */
export function similar(name: string, candidates: Iterable<string> | NameIndex, most = 3): string[] {
  return (candidates instanceof NameIndex ? candidates : new NameIndex(candidates)).similar(name, most);
}

/** Names longer than this are found by the scan alone: their deletion keys would cost more than they save. */
const MAX_INDEXED_CHARS = 64;
/** names compared in full after the one-edit lookup, at most, per question: the bound on a question's work */
const MAX_COMPARED = 500;

/**
 * Many names, asked many times (a 404's "did you mean" over every declared model): the work of one question is
 * bounded whatever the names. Names one edit away are found through one-deletion keys (a name, and the name with any
 * one character deleted, on both sides: the keys meet for every insertion, deletion, substitution or swap of
 * neighbours; kept as 32-bit hashes, a collision only costs a comparison), so a typo is always found; names two or
 * three edits away by a scan over the names of a near length whose characters could match (a character class of one
 * absent from the other costs an edit), compared without their common prefix and suffix, for at most MAX_COMPARED of
 * them in the names' order.
 */
export class NameIndex {
  private readonly names: string[] = [];
  private readonly lower: string[] = [];
  private readonly lengths: Int32Array;
  /** a bit per character class present (maskOf) */
  private readonly masks: Int32Array;
  /** lower-cased name -> indexes of the names, ascending */
  private readonly exact = new Map<string, number[]>();
  /** hash of a name or of a one-deletion of it -> the index of the one name with it, or of those names, ascending */
  private readonly keys = new Map<number, number | number[]>();
  /** the names without their organisation prefix, in the same order: when some name has one */
  private readonly bare: NameIndex | undefined;

  constructor(names: Iterable<string>, withBare = true) {
    for (const name of names) {
      this.names.push(name);
      this.lower.push(name.toLowerCase());
    }
    this.bare = withBare && this.names.some((n) => withoutOrg(n) !== n) ? new NameIndex(this.names.map(withoutOrg), false) : undefined;
    const n = this.names.length;
    this.lengths = new Int32Array(n);
    this.masks = new Int32Array(n);
    for (let i = 0; i < n; i++) {
      const lower = this.lower[i] as string;
      this.lengths[i] = lower.length;
      this.masks[i] = maskOf(lower);
      push(this.exact, lower, i);
      if (lower.length > MAX_INDEXED_CHARS) continue;
      for (const h of deletionHashes(lower)) {
        const had = this.keys.get(h);
        if (had === undefined) this.keys.set(h, i);
        else if (typeof had === 'number') {
          if (had !== i) this.keys.set(h, [had, i]);
        } else if (had[had.length - 1] !== i) had.push(i);
      }
    }
  }

  /** the names, in the order given */
  get all(): readonly string[] {
    return this.names;
  }

  /**
   * The names within a typo of `name`, closest first (ties in the names' order), at most `most`. Names are compared
   * whole and without their organisation prefix too (`Qwen3-8B` finds `Qwen/Qwen3-8B`, and `Org/m` finds `m`); a match
   * without the prefixes comes after a whole-name match as close.
   */
  similar(name: string, most = 3): string[] {
    if (name.length === 0 || name.length > MAX_NAME_CHARS || most <= 0) return [];
    const found = new Map(this.nearest(name, most));
    const wanted = withoutOrg(name);
    const bare = this.bare ?? (wanted !== name ? this : undefined);
    for (const [i, d] of bare?.nearest(wanted, most) ?? []) {
      const had = found.get(i);
      if (had === undefined || d + 0.5 < had) found.set(i, d + 0.5);
    }
    return [...found]
      .sort((x, y) => x[1] - y[1] || x[0] - y[0])
      .slice(0, most)
      .map(([i]) => this.names[i] as string);
  }

  /** The indexes of the names within a typo of `name` and their distances, closest first, at most `most`. */
  private nearest(name: string, most: number): Array<[number, number]> {
    if (name.length === 0 || name.length > MAX_NAME_CHARS) return [];
    const wanted = name.toLowerCase();
    const limit = typoLimit(wanted.length);
    const found = new Map<number, number>();
    let compared = 0;
    const compare = (i: number, within: number): void => {
      if (found.has(i)) return;
      compared++;
      const distance = strippedDistance(wanted, this.lower[i] as string, within);
      if (distance <= within) found.set(i, distance);
    };
    // the same name, whatever its case
    for (const i of (this.exact.get(wanted) ?? []).slice(0, most)) found.set(i, 0);
    // one edit: through the keys (each list in the names' order; `most` hits per list are enough, as later ones of
    // the same list could only tie and lose on order)
    if (wanted.length <= MAX_INDEXED_CHARS + 1) {
      for (const h of deletionHashes(wanted)) {
        const entry = this.keys.get(h);
        if (entry === undefined) continue;
        const list = typeof entry === 'number' ? [entry] : entry;
        let hits = 0;
        for (const i of list) {
          if (hits >= most || compared >= MAX_COMPARED) break;
          compare(i, 1);
          if (found.has(i)) hits++;
        }
      }
    }
    const best = (): Array<[number, number]> => [...found].sort((x, y) => x[1] - y[1] || x[0] - y[0]).slice(0, most);
    let near = best();
    // two or three edits: a scan in the names' order, bounded
    if (limit >= 2 && (near.length < most || (near.at(-1) as [number, number])[1] > 1)) {
      const mask = maskOf(wanted);
      const length = wanted.length;
      let within = limit;
      const tighten = (): void => {
        near = best();
        // once `most` names are this close, a later name must be closer to count
        if (near.length >= most) within = Math.min(within, (near.at(-1) as [number, number])[1] - 1);
      };
      tighten();
      const { lengths, masks } = this;
      for (let i = 0; i < lengths.length; i++) {
        if (within < 2 || compared >= MAX_COMPARED) break;
        const l = lengths[i] as number;
        if (l < length - within || l > length + within) continue;
        const m = masks[i] as number;
        if (popcount(mask & ~m) > within || popcount(m & ~mask) > within || found.has(i)) continue;
        const had = found.size;
        compare(i, within);
        if (found.size > had) tighten();
      }
      near = best();
    }
    return near;
  }
}

/** A name without its organisation prefix (`Qwen/Qwen3-8B` -> `Qwen3-8B`); a name with none as it is. */
function withoutOrg(name: string): string {
  const bare = name.slice(name.lastIndexOf('/') + 1);
  return bare === '' ? name : bare;
}

/** The distance of two names without the prefix and suffix they share (the part of the table that costs nothing). */
function strippedDistance(a: string, b: string, limit: number): number {
  let start = 0;
  const shorter = Math.min(a.length, b.length);
  while (start < shorter && a.charCodeAt(start) === b.charCodeAt(start)) start++;
  let end = 0;
  while (end < shorter - start && a.charCodeAt(a.length - 1 - end) === b.charCodeAt(b.length - 1 - end)) end++;
  if (start === 0 && end === 0) return editDistance(a, b, limit);
  return editDistance(a.slice(start, a.length - end), b.slice(start, b.length - end), limit);
}

const HASH_BASE = 0x01000193;

/** 32-bit polynomial hashes of `text` and of `text` with each one character deleted (duplicates possible). */
function deletionHashes(text: string): number[] {
  const n = text.length;
  // prefix[d]: hash of text[0..d); suffix[d]: hash of text[d..n); power[k]: base^k (rows reused: n <= MAX_NAME_CHARS)
  const { prefix, suffix, power } = hashRows;
  power[0] = 1;
  for (let i = 0; i < n; i++) {
    prefix[i + 1] = (Math.imul(prefix[i] as number, HASH_BASE) + text.charCodeAt(i)) | 0;
    power[i + 1] = Math.imul(power[i] as number, HASH_BASE);
  }
  suffix[n] = 0;
  for (let i = n - 1; i >= 0; i--) suffix[i] = (Math.imul(text.charCodeAt(i), power[n - 1 - i] as number) + (suffix[i + 1] as number)) | 0;
  const out = [prefix[n] as number];
  for (let d = 0; d < n; d++) out.push((Math.imul(prefix[d] as number, power[n - 1 - d] as number) + (suffix[d + 1] as number)) | 0);
  return out;
}

const hashRows = {
  prefix: new Int32Array(MAX_NAME_CHARS + 2),
  suffix: new Int32Array(MAX_NAME_CHARS + 2),
  power: new Int32Array(MAX_NAME_CHARS + 2),
};

function push<K>(map: Map<K, number[]>, key: K, i: number): void {
  const list = map.get(key);
  if (!list) map.set(key, [i]);
  else if (list[list.length - 1] !== i) list.push(i);
}

/** A bit per character class: a-z one each, the digits five classes, anything else the last one. */
function maskOf(text: string): number {
  let m = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    m |= 1 << (c >= 97 && c <= 122 ? c - 97 : c >= 48 && c <= 57 ? 26 + ((c - 48) % 5) : 31);
  }
  return m;
}

function popcount(x: number): number {
  let v = x - ((x >>> 1) & 0x55555555);
  v = (v & 0x33333333) + ((v >>> 2) & 0x33333333);
  return (((v + (v >>> 4)) & 0x0f0f0f0f) * 0x01010101) >>> 24;
}

/**
 * The index of the names `key` stands for (the catalog's model list: a new array whenever the catalog changes). An
 * index is built when those names change, not when only their states do: a changed key with the same names reuses it.
 */
export function nameIndexFor(key: object, names: () => readonly string[]): NameIndex {
  const known = byKey.get(key);
  if (known) return known;
  const list = names();
  const last = lastIndex;
  const index = last && last.all.length === list.length && last.all.every((n, i) => n === list[i]) ? last : new NameIndex(list);
  lastIndex = index;
  byKey.set(key, index);
  return index;
}
const byKey = new WeakMap<object, NameIndex>();
let lastIndex: NameIndex | undefined;

/** The closest candidate within a typo, if any. */
export function closest(name: string, candidates: Iterable<string>): string | undefined {
  return similar(name, candidates, 1)[0];
}

/** " (did you mean X?)" or "". */
export function didYouMean(name: string, candidates: Iterable<string>, format: (c: string) => string = (c) => c): string {
  const c = closest(name, candidates);
  return c === undefined ? '' : ` (did you mean ${format(c)}?)`;
}
