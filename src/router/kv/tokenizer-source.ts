// Which tokenizer each model's requests are tokenized by, found by itself, and loading it. Per model, the first that
// applies of
//  1. --tokenizers MODEL=engine|off|PATH|hf:REPO[@REVISION];
//  2. the llm-router/tokenizer annotation of the model's endpoints (same values);
//  3. --tokenizer PATH|hf:REPO[@REVISION]|engine|off;
//  4. --tokenizer auto (the default): what the engines say they serve the model from (Endpoint.modelRoots: vLLM's
//     /v1/models `root`, SGLang's tokenizer_path / model_path). An `org/name` there is fetched from the Hub (hub.ts);
//     an absolute path is read as a tokenizer directory (the router may mount the engines' model volume); anything
//     else (a served name such as `qwen3`) has no tokenizer to find, and the engine's /tokenize serves.
// Endpoints that disagree (mid-rollout) give the smallest value, so that every replica makes the same choice from the
// same engines. A tokenizer in process is used once it has loaded; while it loads, and when it cannot be had (offline
// and not cached, gated, missing, no network, files that do not load), the engine's /tokenize serves its models and
// the reason is said once in a WARN line and kept for /engines, /v1/models and the dashboard. Nothing here waits on
// the Hub on a request's path: a request reads one map entry.
import type { HubConfig } from '../config/kv-config.js';
import type { Endpoint } from '../core/endpoint.js';
import { isOrgRepo, parseTokenizerValue, tokenizerValueText, type ResolvedTokenizerSpec, type TokenizerSpec } from '../core/tokenizer.js';
import type { Logger } from '../util/log.js';
import { HubError, hubTokenizer, type HubFetchOptions, type HubTokenizer } from './hub.js';

/** What tokenizes a model's requests: a tokenizer fetched from the Hub, a directory, the engine's /tokenize, nothing. */
export type TokenizerSource = 'hub' | 'path' | 'engine' | 'off';

/** Who named the model's tokenizer: the flags, the annotation, or the engines' own account of their model (auto). */
export type TokenizerNamedBy = '--tokenizers' | 'llm-router/tokenizer' | '--tokenizer' | 'engines';

/** A model's tokenizer as /engines, /v1/models and the dashboard show it. */
export interface TokenizerStatus {
  /** what tokenizes its requests now */
  readonly source: TokenizerSource;
  /** the Hub repo or the directory named (in use, or wanted while the engine serves instead) */
  readonly name?: string;
  /** hub: the commit in use, else the revision asked */
  readonly revision?: string;
  readonly namedBy: TokenizerNamedBy;
  /** why not in process (loading, or why it cannot be had); absent when a tokenizer in process serves */
  readonly reason?: string;
}

/** How a request of the model is tokenized now: RequestTokenizer's mode (engine, off or a directory). */
export interface TokenizerUse {
  readonly mode: string;
  /** the directory came from the Hub (the metric's source is `hub`) */
  readonly hub: boolean;
}

export interface TokenizerChoice {
  readonly spec: ResolvedTokenizerSpec;
  readonly namedBy: TokenizerNamedBy;
  /** auto found no tokenizer to load: why (the engine's /tokenize serves) */
  readonly why?: string;
}

export interface TokenizerSettings {
  /** --tokenizer */
  readonly tokenizer: TokenizerSpec;
  /** --tokenizers */
  readonly tokenizers: ReadonlyMap<string, TokenizerSpec>;
}

const ENGINE: ResolvedTokenizerSpec = { kind: 'engine' };

/** The smallest of the values the endpoints give (undefined when none gives one). */
function smallest(values: Iterable<string | undefined>): string | undefined {
  let min: string | undefined;
  for (const v of values) if (v !== undefined && (min === undefined || v < min)) min = v;
  return min;
}

/** What an engine's account of its model names: a Hub repo, a directory, or nothing to load (why). */
export function rootSpec(root: string): { spec: ResolvedTokenizerSpec; why?: string } {
  if (root.startsWith('/')) return { spec: { kind: 'path', path: root } };
  if (isOrgRepo(root)) return { spec: { kind: 'hub', repo: root, revision: undefined } };
  return { spec: ENGINE, why: `the engines serve it as ${JSON.stringify(root)}, which names no Hub repo (org/name) or directory` };
}

/** The model's tokenizer by the order in this file's header; `endpoints` are the model's (any state). */
export function chooseTokenizer(model: string, endpoints: readonly Endpoint[], s: TokenizerSettings): TokenizerChoice {
  const flagged = s.tokenizers.get(model);
  if (flagged !== undefined && flagged.kind !== 'auto') return { spec: flagged, namedBy: '--tokenizers' };
  const live = endpoints.filter((e) => !e.draining);
  const mine = live.length > 0 ? live : endpoints;
  const annotated = smallest(mine.map((e) => e.tokenizer));
  if (annotated !== undefined) {
    const parsed = parseTokenizerValue(annotated, { absolutePathOnly: true });
    if (parsed.ok && parsed.spec.kind !== 'auto') return { spec: parsed.spec, namedBy: 'llm-router/tokenizer' };
  }
  if (s.tokenizer.kind !== 'auto') return { spec: s.tokenizer, namedBy: '--tokenizer' };
  const root = smallest(mine.map((e) => e.modelRoots.get(model)));
  if (root === undefined)
    return { spec: ENGINE, namedBy: 'engines', why: 'no engine of it has said which model it serves yet (its /v1/models root)' };
  return { ...rootSpec(root), namedBy: 'engines' };
}

type LoadState =
  | { readonly state: 'loading' }
  | { readonly state: 'ready'; readonly dir: string; readonly commit: string | undefined }
  | { readonly state: 'failed'; readonly reason: string };

interface Load {
  readonly spec: Extract<ResolvedTokenizerSpec, { kind: 'path' | 'hub' }>;
  readonly namedBy: TokenizerNamedBy;
  current: LoadState;
  attempts: number;
  retry: NodeJS.Timeout | undefined;
  done: Promise<void>;
}

export interface ModelTokenizersOptions {
  readonly settings: TokenizerSettings;
  readonly hub: HubConfig;
  /** loads a tokenizer directory in process (RequestTokenizer.preload); false when it does not load */
  readonly load: (dir: string) => Promise<boolean>;
  readonly log: Logger;
  /** how a tokenizer is fetched from the Hub (default hub.ts's hubTokenizer) */
  readonly fetchTokenizer?: (repo: string, revision: string | undefined, hub: HubConfig, opts?: HubFetchOptions) => Promise<HubTokenizer>;
  /** a Hub that could not be reached is asked again after this long, doubling up to 16 times as long (default 30 s) */
  readonly retryMs?: number;
}

const DEFAULT_RETRY_MS = 30_000;
const MAX_RETRY_FACTOR = 16;

/** Every model's tokenizer choice and the loads behind them; see the file's header. */
export class ModelTokenizers {
  private readonly choices = new Map<string, TokenizerChoice>();
  private readonly loads = new Map<string, Load>();
  /** per model, how its requests are tokenized now: recomputed when a choice or a load changes */
  private readonly uses = new Map<string, TokenizerUse>();
  /** models whose auto choice found nothing to load, said once each */
  private readonly told = new Set<string>();
  private closed = false;

  constructor(private readonly opts: ModelTokenizersOptions) {}

  /** Starts loading what the flags name, so that a tokenizer that does not load is said at start. */
  start(): void {
    const { tokenizer, tokenizers } = this.opts.settings;
    const named: [TokenizerSpec, TokenizerNamedBy][] = [
      [tokenizer, '--tokenizer'],
      ...[...tokenizers.values()].map((s): [TokenizerSpec, TokenizerNamedBy] => [s, '--tokenizers']),
    ];
    for (const [spec, by] of named) if (spec.kind === 'path' || spec.kind === 'hub') this.ensure(spec, by);
  }

  /** The models and their endpoints now (level-triggered: models not given are forgotten). */
  update(models: ReadonlyMap<string, readonly Endpoint[]>): void {
    for (const model of [...this.choices.keys()]) if (!models.has(model)) this.choices.delete(model);
    for (const [model, endpoints] of models) {
      const choice = chooseTokenizer(model, endpoints, this.opts.settings);
      this.choices.set(model, choice);
      const spec = choice.spec;
      if (spec.kind === 'path' || spec.kind === 'hub') this.ensure(spec, choice.namedBy);
      else if (choice.why !== undefined && endpoints.some((e) => e.modelRoots.has(model)) && !this.told.has(model)) {
        this.told.add(model);
        this.opts.log.info(
          { model, tokenizer: 'engine', reason: choice.why },
          `kvaware: ${model} is tokenized by the engine's /tokenize: ${choice.why}`,
        );
      }
    }
    this.refreshUses();
  }

  /** The request path's question: one map lookup. A model not known yet goes by the flags alone. */
  use(model: string): TokenizerUse {
    return this.uses.get(model) ?? this.useOf(chooseTokenizer(model, [], this.opts.settings));
  }

  private useOf({ spec }: TokenizerChoice): TokenizerUse {
    if (spec.kind === 'engine' || spec.kind === 'off') return spec.kind === 'off' ? OFF : BY_ENGINE;
    const current = this.loads.get(tokenizerValueText(spec))?.current;
    return current?.state === 'ready' ? { mode: current.dir, hub: spec.kind === 'hub' } : BY_ENGINE;
  }

  private refreshUses(): void {
    this.uses.clear();
    for (const [model, choice] of this.choices) this.uses.set(model, this.useOf(choice));
  }

  /** The model's tokenizer as the operator sees it; undefined for a model this knows nothing of. */
  status(model: string): TokenizerStatus | undefined {
    const choice = this.choices.get(model);
    if (!choice) return undefined;
    const { spec, namedBy } = choice;
    if (spec.kind === 'engine') return { source: 'engine', namedBy, ...(choice.why !== undefined ? { reason: choice.why } : {}) };
    if (spec.kind === 'off') return { source: 'off', namedBy, reason: `tokenization is off (${namedBy})` };
    const name = spec.kind === 'hub' ? spec.repo : spec.path;
    const current = this.loads.get(tokenizerValueText(spec))?.current ?? { state: 'loading' };
    const asked = spec.kind === 'hub' && spec.revision !== undefined ? { revision: spec.revision } : {};
    if (current.state === 'ready')
      return { source: spec.kind, name, namedBy, ...(current.commit !== undefined ? { revision: current.commit } : asked) };
    const reason = current.state === 'loading' ? 'loading; the engine tokenizes meanwhile' : current.reason;
    return { source: 'engine', name, namedBy, ...asked, reason };
  }

  /** The models whose named tokenizer cannot be had (it failed to load), with why. */
  failures(): { readonly model: string; readonly name: string; readonly reason: string }[] {
    const out: { model: string; name: string; reason: string }[] = [];
    for (const [model, { spec }] of this.choices) {
      if (spec.kind !== 'path' && spec.kind !== 'hub') continue;
      const current = this.loads.get(tokenizerValueText(spec))?.current;
      if (current?.state === 'failed') out.push({ model, name: spec.kind === 'hub' ? spec.repo : spec.path, reason: current.reason });
    }
    return out;
  }

  /** Resolves once every load started so far has ended (loaded or failed; a retry later is a new load). */
  async settled(): Promise<void> {
    await Promise.all([...this.loads.values()].map((l) => l.done));
  }

  close(): void {
    this.closed = true;
    for (const l of this.loads.values()) clearTimeout(l.retry);
  }

  private ensure(spec: Load['spec'], namedBy: TokenizerNamedBy): void {
    const key = tokenizerValueText(spec);
    if (this.loads.has(key) || this.closed) return;
    const load: Load = { spec, namedBy, current: { state: 'loading' }, attempts: 0, retry: undefined, done: Promise.resolve() };
    this.loads.set(key, load);
    load.done = this.run(load);
  }

  private async run(load: Load): Promise<void> {
    load.attempts++;
    const { spec } = load;
    if (spec.kind === 'path') {
      const ok = await this.opts.load(spec.path);
      this.settle(
        load,
        ok
          ? { state: 'ready', dir: spec.path, commit: undefined }
          : { state: 'failed', reason: `${spec.path} does not load here (no readable tokenizer.json?)` },
      );
      return;
    }
    const fetchTokenizer = this.opts.fetchTokenizer ?? hubTokenizer;
    let got: HubTokenizer;
    try {
      got = await fetchTokenizer(spec.repo, spec.revision, this.opts.hub);
    } catch (err) {
      const failure = err instanceof HubError ? err : new HubError('bad-answer', (err as Error).message);
      this.settle(load, { state: 'failed', reason: failure.message });
      if (failure.retry) this.retryLater(load);
      return;
    }
    if (got.staleBecause !== undefined)
      this.opts.log.warn(
        { tokenizer: spec.repo, revision: got.commit, reason: got.staleBecause },
        `kvaware: the Hub cannot be reached; the cached ${spec.repo}@${got.commit.slice(0, 12)} is used`,
      );
    const ok = await this.opts.load(got.dir);
    this.settle(
      load,
      ok
        ? { state: 'ready', dir: got.dir, commit: got.commit }
        : { state: 'failed', reason: `the files of ${spec.repo}@${got.commit.slice(0, 12)} (${got.dir}) do not load as a tokenizer` },
    );
  }

  private settle(load: Load, next: LoadState): void {
    const was = load.current;
    load.current = next;
    if (this.closed) return;
    this.refreshUses();
    const name = load.spec.kind === 'hub' ? load.spec.repo : load.spec.path;
    const models = [...this.choices].filter(([, c]) => tokenizerValueText(c.spec) === tokenizerValueText(load.spec)).map(([m]) => m);
    if (next.state === 'ready') {
      this.opts.log.info(
        {
          tokenizer: name,
          source: load.spec.kind,
          ...(next.commit !== undefined ? { revision: next.commit } : {}),
          models,
          namedBy: load.namedBy,
        },
        `kvaware: tokenizer ${name} loaded; its models are tokenized in process`,
      );
    } else if (next.state === 'failed' && was.state === 'loading' && load.attempts === 1) {
      // said once: a retry that fails again is not said again
      this.opts.log.warn(
        { tokenizer: name, source: load.spec.kind, models, namedBy: load.namedBy, reason: next.reason },
        `kvaware: tokenizer ${name} cannot be had (${next.reason}); the engine's /tokenize serves its models instead`,
      );
    }
  }

  private retryLater(load: Load): void {
    if (this.closed) return;
    const base = this.opts.retryMs ?? DEFAULT_RETRY_MS;
    const delay = base * Math.min(MAX_RETRY_FACTOR, 2 ** (load.attempts - 1));
    load.retry = setTimeout(() => {
      load.retry = undefined;
      load.done = this.run(load);
    }, delay);
    load.retry.unref();
  }
}

const BY_ENGINE: TokenizerUse = { mode: 'engine', hub: false };
const OFF: TokenizerUse = { mode: 'off', hub: false };
