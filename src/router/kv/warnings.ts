// What is said out loud about a KV-aware set-up that cannot work as meant: kvaware as the routing logic with no
// KV-cache event source for a model (none of its endpoints names one), --tokenizers for a model nothing declares or
// serves, a tokenizer that does not load. Each is a WARN line once, and stays listed in GET /engines and the
// operator's page while it holds.
import type { Endpoint } from '../core/endpoint.js';

export interface KvWarning {
  readonly kind: 'no-kv-events' | 'tokenizers-unknown-model' | 'tokenizer-unavailable';
  readonly model: string;
  readonly message: string;
}

export interface KvWarningFacts {
  /** every model (not an alias or adapter) with its endpoints, any state */
  readonly models: ReadonlyMap<string, readonly Endpoint[]>;
  /** kvaware is the routing logic (not only a per-request choice) */
  readonly kvawarePolicy: boolean;
  /** every discovery source has listed once: before, a model may only not have been listed yet */
  readonly synced: boolean;
  /** the models --tokenizers names */
  readonly tokenizerModels: Iterable<string>;
  /** whether the catalog knows a name (a model, an alias or an adapter) */
  readonly known: (name: string) => boolean;
  /** the models whose tokenizer cannot be had */
  readonly unavailable: readonly { readonly model: string; readonly name: string; readonly reason: string }[];
}

export function kvWarnings(f: KvWarningFacts): KvWarning[] {
  const out: KvWarning[] = [];
  if (f.synced && f.kvawarePolicy) {
    for (const [model, endpoints] of f.models) {
      const live = endpoints.filter((e) => !e.draining);
      if (live.length === 0 || live.some((e) => e.kvEvents !== undefined)) continue;
      out.push({
        kind: 'no-kv-events',
        model,
        message: `no endpoint of ${model} names a KV-cache event source: kvaware cannot see what its engines cache, and its requests go by prefixaware (reason no-match)`,
      });
    }
  }
  if (f.synced)
    for (const model of f.tokenizerModels)
      if (!f.known(model))
        out.push({
          kind: 'tokenizers-unknown-model',
          model,
          message: `--tokenizers names ${model}, which no source declares and no engine serves`,
        });
  for (const u of f.unavailable)
    out.push({
      kind: 'tokenizer-unavailable',
      model: u.model,
      message: `the tokenizer ${u.name} of ${u.model} cannot be had (${u.reason}): the engine's /tokenize serves instead`,
    });
  return out;
}
