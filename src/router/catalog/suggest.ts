// "Did you mean ...": the declared names closest to a model name the catalog does not know, by a small edit distance
// that ignores case. It runs on 404s only, and its work is bounded whatever a client sends.

/** Names longer than this get no suggestion: nothing declared is that long, and the work stays small. */
const MAX_NAME_CHARS = 256;
const MAX_SUGGESTIONS = 3;

/** Edits allowed for a name of this length: one for short names, up to three for long ones. */
function allowedEdits(length: number): number {
  return length <= 4 ? 1 : length <= 12 ? 2 : 3;
}

/**
 * Optimal string alignment distance (insertions, deletions, substitutions and swaps of neighbours) when it is at most
 * `limit`, else limit + 1. Only the band of cells within `limit` of the diagonal is computed.
 */
export function editDistance(a: string, b: string, limit: number): number {
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
    const from = Math.max(1, i - limit);
    const to = Math.min(b.length, i + limit);
    let best = current[0] as number;
    for (let j = from; j <= to; j++) {
      const cost = a.charCodeAt(i - 1) === b.charCodeAt(j - 1) ? 0 : 1;
      let d = Math.min((previous[j] as number) + 1, (current[j - 1] as number) + 1, (previous[j - 1] as number) + cost);
      if (i > 1 && j > 1 && a.charCodeAt(i - 1) === b.charCodeAt(j - 2) && a.charCodeAt(i - 2) === b.charCodeAt(j - 1))
        d = Math.min(d, (before[j - 2] as number) + 1);
      current[j] = Math.min(d, over);
      if (d < best) best = d;
    }
    if (best > limit) return over;
    [before, previous, current] = [previous, current, before];
  }
  return Math.min(previous[b.length] as number, over);
}

/** The known names nearest to `requested` (case-insensitive), closest first; empty when none is close. */
export function similarNames(requested: string, known: Iterable<string>): string[] {
  if (requested.length === 0 || requested.length > MAX_NAME_CHARS) return [];
  const wanted = requested.toLowerCase();
  const limit = allowedEdits(wanted.length);
  const near: { name: string; distance: number }[] = [];
  for (const name of known) {
    if (name === requested) continue;
    const distance = editDistance(wanted, name.toLowerCase(), limit);
    if (distance <= limit) near.push({ name, distance });
  }
  near.sort((x, y) => x.distance - y.distance || (x.name < y.name ? -1 : x.name > y.name ? 1 : 0));
  return near.slice(0, MAX_SUGGESTIONS).map((n) => n.name);
}
