// The operator's view of KV-cache-aware routing: per endpoint its KV-cache event stream as this process follows it
// (connected or not, blocks indexed, last event, gaps, replays, rebuilds, last error: what GET /engines shows), and per
// model the kvaware decisions this process made since it started: by KV match or by fallback (with the reasons), and
// the mean share of the prompt the chosen endpoint held. Decisions are counted here in plain numbers (no labels, no
// histogram), per model the catalog knows; a model that goes loses its count. Per model also its tokenizer (which one
// tokenizes its requests, and why not in process), and what cannot work as meant (the warnings /engines lists).
import type { ModelCatalog } from '../../catalog/catalog.js';
import type { KvEndpointStatus } from '../../kv/subscriber.js';
import type { TokenizerStatus } from '../../kv/tokenizer-source.js';
import type { KvDecisionObserver, KvFallbackReason } from '../../kv/types.js';
import type { KvWarning } from '../../kv/warnings.js';

/** What the view reads of the event streams and the tokenizers (KvRouting). */
export interface KvStatusReader {
  statusOf(endpointId: string): KvEndpointStatus | undefined;
  tokenizerOf(model: string): TokenizerStatus | undefined;
  warnings(): readonly KvWarning[];
}

/** A model's tokenizer on the page. */
export interface KvTokenizerRow extends TokenizerStatus {
  readonly model: string;
}

export interface KvEndpointRow {
  readonly id: string;
  readonly url: string;
  /** every rank's stream is connected */
  readonly connected: boolean;
  readonly ranks: number;
  readonly ranksConnected: number;
  readonly blocks: number;
  /** ms since epoch of the last batch applied, any rank; null before the first */
  readonly lastEventAt: number | null;
  readonly gaps: number;
  readonly replays: number;
  readonly rebuilds: number;
  readonly restarts: number;
  readonly malformed: number;
  readonly lastError: string | null;
}

export interface KvModelRow {
  readonly model: string;
  /** kvaware decisions (each request once; failover picks are not new decisions) */
  readonly decisions: number;
  /** of those, by KV match */
  readonly matched: number;
  /** routed by prefixaware instead, by reason (only reasons seen) */
  readonly fallbacks: Readonly<Partial<Record<KvFallbackReason, number>>>;
  /** mean of matched blocks / the prompt's blocks over the decisions by KV match; null when none */
  readonly meanMatchedRatio: number | null;
}

export interface KvState {
  readonly endpoints: readonly KvEndpointRow[];
  readonly models: readonly KvModelRow[];
  /** every model's tokenizer, in the catalog's order */
  readonly tokenizers: readonly KvTokenizerRow[];
  /** what cannot work as meant now, each in a sentence */
  readonly warnings: readonly string[];
}

interface Tally {
  matched: number;
  ratioSum: number;
  fallbacks: Map<KvFallbackReason, number>;
}

/** Counts each kvaware decision per model (the policy's observer, next to the metrics). */
export class KvDecisionTally implements KvDecisionObserver {
  private readonly tallies = new Map<string, Tally>();

  private of(model: string): Tally {
    let t = this.tallies.get(model);
    if (!t) {
      t = { matched: 0, ratioSum: 0, fallbacks: new Map() };
      this.tallies.set(model, t);
    }
    return t;
  }

  matched(model: string, matched: number, blocks: number): void {
    const t = this.of(model);
    t.matched++;
    t.ratioSum += blocks > 0 ? matched / blocks : 0;
  }

  fallback(model: string, reason: KvFallbackReason): void {
    const f = this.of(model).fallbacks;
    f.set(reason, (f.get(reason) ?? 0) + 1);
  }

  /** Per model the catalog knows (others are forgotten), in the catalog's order. */
  rows(known: readonly string[]): KvModelRow[] {
    const keep = new Set(known);
    for (const model of this.tallies.keys()) if (!keep.has(model)) this.tallies.delete(model);
    const rows: KvModelRow[] = [];
    for (const model of known) {
      const t = this.tallies.get(model);
      if (!t) continue;
      let fallen = 0;
      const fallbacks: Partial<Record<KvFallbackReason, number>> = {};
      for (const [reason, n] of [...t.fallbacks].sort(([a], [b]) => (a < b ? -1 : 1))) {
        fallbacks[reason] = n;
        fallen += n;
      }
      rows.push({
        model,
        decisions: t.matched + fallen,
        matched: t.matched,
        fallbacks,
        meanMatchedRatio: t.matched > 0 ? Math.round((t.ratioSum / t.matched) * 1000) / 1000 : null,
      });
    }
    return rows;
  }
}

/** Several observers as one (the metrics and the page's tally). */
export function observeAll(...observers: readonly KvDecisionObserver[]): KvDecisionObserver {
  return {
    matched: (model, matched, blocks) => {
      for (const o of observers) o.matched(model, matched, blocks);
    },
    fallback: (model, reason) => {
      for (const o of observers) o.fallback(model, reason);
    },
  };
}

/** The KV part of the dashboard's state: every endpoint with an event stream, every model with decisions. */
export function kvState(catalog: ModelCatalog, streams: KvStatusReader, tally: KvDecisionTally): KvState {
  const endpoints: KvEndpointRow[] = [];
  for (const e of catalog.endpoints()) {
    const s = streams.statusOf(e.id);
    if (s === undefined) continue;
    endpoints.push({
      id: e.id,
      url: e.url,
      connected: s.connected,
      ranks: s.ranks.length,
      ranksConnected: s.ranks.filter((r) => r.connected).length,
      blocks: s.blocks,
      lastEventAt: s.lastEventAt ?? null,
      gaps: s.gaps,
      replays: s.replays,
      rebuilds: s.rebuilds,
      restarts: s.restarts,
      malformed: s.malformed,
      lastError: s.lastError ?? null,
    });
  }
  const models = catalog
    .models()
    .filter((m) => !m.aliasOf)
    .map((m) => m.id);
  const tokenizers: KvTokenizerRow[] = [];
  for (const model of models) {
    const t = streams.tokenizerOf(model);
    if (t) tokenizers.push({ model, ...t });
  }
  return { endpoints, models: tally.rows(models), tokenizers, warnings: streams.warnings().map((w) => w.message) };
}
