// "Did you mean ...": the closest of a set of names to a mistyped one, by edit distance, case-insensitive.

/** Damerau-Levenshtein distance (optimal string alignment): a swap of two neighbours counts as one edit. */
export function editDistance(a: string, b: string): number {
  const rows = a.length + 1;
  const cols = b.length + 1;
  const d: number[] = new Array(rows * cols).fill(0);
  for (let i = 0; i < rows; i++) d[i * cols] = i;
  for (let j = 0; j < cols; j++) d[j] = j;
  for (let i = 1; i < rows; i++) {
    for (let j = 1; j < cols; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min(
        (d[(i - 1) * cols + j] as number) + 1,
        (d[i * cols + j - 1] as number) + 1,
        (d[(i - 1) * cols + j - 1] as number) + cost,
      );
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) v = Math.min(v, (d[(i - 2) * cols + j - 2] as number) + 1);
      d[i * cols + j] = v;
    }
  }
  return d[rows * cols - 1] as number;
}

/** The closest candidate within a distance that still looks like a typo (a third of the name rounded up, 1 to 3 edits). */
export function closest(name: string, candidates: Iterable<string>): string | undefined {
  const n = name.toLowerCase();
  const limit = Math.min(3, Math.max(1, Math.ceil(n.length / 3)));
  let best: string | undefined;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const c of candidates) {
    const d = editDistance(n, c.toLowerCase());
    if (d < bestDistance && d <= limit) {
      best = c;
      bestDistance = d;
    }
  }
  return best;
}

/** " (did you mean X?)" or "". */
export function didYouMean(name: string, candidates: Iterable<string>, format: (c: string) => string = (c) => c): string {
  const c = closest(name, candidates);
  return c === undefined ? '' : ` (did you mean ${format(c)}?)`;
}
