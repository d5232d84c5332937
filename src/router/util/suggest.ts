// "Did you mean ...": the names closest to a mistyped one, by a small edit distance that ignores case. The work is
// bounded whatever the name (a model name a client sent may be long): only cells near the diagonal are computed.

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
  let before = new Array<number>(width).fill(over);
  let previous = new Array<number>(width).fill(over);
  let current = new Array<number>(width).fill(over);
  for (let j = 0; j <= Math.min(b.length, limit); j++) previous[j] = j;
  for (let i = 1; i <= a.length; i++) {
    current.fill(over);
    if (i <= limit) current[0] = i;
    let best = current[0] as number;
    for (let j = Math.max(1, i - limit); j <= Math.min(b.length, i + limit); j++) {
      const cost = a.charCodeAt(i - 1) === b.charCodeAt(j - 1) ? 0 : 1;
      let d = Math.min((previous[j] as number) + 1, (current[j - 1] as number) + 1, (previous[j - 1] as number) + cost);
      if (i > 1 && j > 1 && a.charCodeAt(i - 1) === b.charCodeAt(j - 2) && a.charCodeAt(i - 2) === b.charCodeAt(j - 1))
        d = Math.min(d, (before[j - 2] as number) + 1);
      current[j] = Math.min(d, over);
      if (d < best) best = d;
    }
    // every later row is at least this far: nothing within the limit is left
    if (best > limit) return over;
    [before, previous, current] = [previous, current, before];
  }
  return Math.min(previous[b.length] as number, over);
}

/** Edits that still look like a typo: a third of the name rounded up, 1 to 3. */
function typoLimit(length: number): number {
  return Math.min(3, Math.max(1, Math.ceil(length / 3)));
}

/** The candidates within a typo of `name` (case-insensitive), closest first (ties in the candidates' order), at most `most`. */
export function similar(name: string, candidates: Iterable<string>, most = 3): string[] {
  if (name.length === 0 || name.length > MAX_NAME_CHARS) return [];
  const wanted = name.toLowerCase();
  const limit = typoLimit(wanted.length);
  const near: { candidate: string; distance: number }[] = [];
  for (const candidate of candidates) {
    const distance = editDistance(wanted, candidate.toLowerCase(), limit);
    if (distance <= limit) near.push({ candidate, distance });
  }
  return near
    .sort((x, y) => x.distance - y.distance)
    .slice(0, most)
    .map((n) => n.candidate);
}

/** The closest candidate within a typo, if any. */
export function closest(name: string, candidates: Iterable<string>): string | undefined {
  return similar(name, candidates, 1)[0];
}

/** " (did you mean X?)" or "". */
export function didYouMean(name: string, candidates: Iterable<string>, format: (c: string) => string = (c) => c): string {
  const c = closest(name, candidates);
  return c === undefined ? '' : ` (did you mean ${format(c)}?)`;
}
