// The "did you mean" of a 404 (model_not_found) among many declared models: the router's work per 404, as the request
// pipeline does it (the catalog's model list, its cached name index, the bounded search), against comparing every
// declared name (what a 404 cost before the index). Names are alike on purpose (org/model-00042-instruct): thousands
// of them lie within three edits of a near miss, the case that made every comparison run to its end.
import { ModelCatalog } from '../src/router/catalog/catalog.js';
import { editDistance, nameIndexFor, similar } from '../src/router/util/suggest.js';

export interface SuggestResult {
  readonly names: number;
  /** µs per 404, median of the rounds: a one-edit typo of a declared name */
  readonly typoUs: number;
  /** µs per 404: a name two or three edits from thousands of declared ones */
  readonly nearUs: number;
  /** µs per 404: a name like none declared */
  readonly farUs: number;
  /** ms to build the index once the names change (the first 404 after) */
  readonly buildMs: number;
  /** µs per 404 comparing every name (before the index), near misses */
  readonly scanNearUs: number;
}

const name = (i: number): string => `org/model-${String(i).padStart(5, '0')}-instruct`;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] as number;
}

/** What a 404 did before: every declared name compared with the banded distance. */
function scanAll(wanted: string, names: readonly string[]): string[] {
  const w = wanted.toLowerCase();
  const limit = Math.min(3, Math.max(1, Math.ceil(w.length / 3)));
  const near: { n: string; d: number }[] = [];
  for (const n of names) {
    const d = editDistance(w, n.toLowerCase(), limit);
    if (d <= limit) near.push({ n, d });
  }
  return near
    .sort((x, y) => x.d - y.d)
    .slice(0, 3)
    .map((x) => x.n);
}

export function measureSuggest(opts: { names: number; questions: number; rounds: number }): SuggestResult {
  const catalog = new ModelCatalog();
  catalog.setDeclarations(
    'static',
    Array.from({ length: opts.names }, (_, i) => name(i)),
  );
  let seed = 7;
  const random = (n: number): number => {
    seed = (seed * 1_103_515_245 + 12_345) & 0x7fffffff;
    return seed % n;
  };
  const typos = Array.from({ length: opts.questions }, () => {
    const n = name(random(opts.names));
    const at = 4 + random(n.length - 6);
    return random(2) ? n.slice(0, at) + n[at + 1] + n[at] + n.slice(at + 2) : n.slice(0, at) + n.slice(at + 1);
  });
  // two digits changed and one dropped: within three edits of thousands of names, one edit of none
  const nears = Array.from({ length: opts.questions }, () => `org/model-${random(10)}${random(10)}x${random(10)}-instruct`);
  const fars = Array.from({ length: opts.questions }, (_, i) => `completely-different-${i}`);
  const ask = (q: string): string[] => {
    const views = catalog.models();
    return similar(
      q,
      nameIndexFor(views, () => views.map((m) => m.id)),
    );
  };
  const build = performance.now();
  ask('warm-up');
  const buildMs = performance.now() - build;
  const per = (questions: readonly string[], f: (q: string) => unknown): number => {
    const rounds: number[] = [];
    for (let r = 0; r < opts.rounds; r++) {
      const t = performance.now();
      for (const q of questions) f(q);
      rounds.push(((performance.now() - t) * 1000) / questions.length);
    }
    return median(rounds);
  };
  const ids = catalog.models().map((m) => m.id);
  return {
    names: opts.names,
    typoUs: per(typos, ask),
    nearUs: per(nears, ask),
    farUs: per(fars, ask),
    buildMs,
    scanNearUs: per(nears.slice(0, Math.max(1, Math.floor(opts.questions / 10))), (q) => scanAll(q, ids)),
  };
}
