// Where a model's tokenizer comes from, as the operator or a source names it: --tokenizer, --tokenizers MODEL=..., the
// llm-router/tokenizer annotation. Parsed here once for the flags (config), the annotation (discovery) and the KV layer
// that acts on it. Only a value that names a Hub repo (`org/name`, or anything given with `hf:`) is ever looked up on a
// Hub; a directory is read where the router runs.

/** What a value names. `auto` (only --tokenizer): the model the engines say they serve. */
export type TokenizerSpec =
  | { readonly kind: 'auto' }
  | { readonly kind: 'engine' }
  | { readonly kind: 'off' }
  | { readonly kind: 'path'; readonly path: string }
  | { readonly kind: 'hub'; readonly repo: string; readonly revision: string | undefined };

/** A spec a model can be tokenized by (auto resolved). */
export type ResolvedTokenizerSpec = Exclude<TokenizerSpec, { readonly kind: 'auto' }>;

/** The prefix that makes a value a Hub repo whatever it looks like: hf:REPO or hf:REPO@REVISION. */
export const HUB_PREFIX = 'hf:';

/** --tokenizer's default */
export const AUTO_TOKENIZER = 'auto';

/** One part of a Hub repo id: letters, digits, `-`, `_`, `.`, not starting or ending with `-` or `.`, no `--` or `..`. */
function repoPart(s: string): boolean {
  return /^[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?$/.test(s) && !s.includes('--') && !s.includes('..');
}

/** `org/name`: the shape of a Hub repo id that is looked up without `hf:`. */
export function isOrgRepo(s: string): boolean {
  const parts = s.split('/');
  return parts.length === 2 && parts.every(repoPart);
}

/** A Hub repo id: `org/name`, or a bare `name` (only with `hf:`). */
function isRepoId(s: string): boolean {
  return isOrgRepo(s) || repoPart(s);
}

/** A revision: a branch, a tag or a commit; no spaces or control characters, no `..` step, not absolute. */
function isRevision(s: string): boolean {
  const steps = s.split('/');
  return s !== '' && !/[\s\\]/.test(s) && !hasControl(s) && !steps.includes('..') && !steps.includes('');
}

function hasControl(s: string): boolean {
  return [...s].some((c) => c.charCodeAt(0) < 0x20);
}

/** Which value words are taken where: `auto` only by --tokenizer; the annotation needs an absolute path. */
export interface TokenizerValueRules {
  readonly allowAuto?: boolean;
  /** a path must be absolute (the annotation: where the router pod mounts it) */
  readonly absolutePathOnly?: boolean;
  /** whether a bare `org/name` is an existing directory here (then it is one, not a repo); default: never */
  readonly isDirectory?: (path: string) => boolean;
}

export type ParsedTokenizer = { readonly ok: true; readonly spec: TokenizerSpec } | { readonly ok: false; readonly why: string };

/**
 * Parses `engine`, `off`, `auto`, `hf:REPO[@REVISION]`, `org/name[@REVISION]` (a repo, unless such a directory exists
 * here) or a directory path.
 */
export function parseTokenizerValue(raw: string, rules: TokenizerValueRules = {}): ParsedTokenizer {
  const value = raw.trim();
  if (value === '') return { ok: false, why: 'is empty' };
  if (value === 'engine' || value === 'off') return { ok: true, spec: { kind: value } };
  if (value === AUTO_TOKENIZER)
    return rules.allowAuto ? { ok: true, spec: { kind: 'auto' } } : { ok: false, why: 'auto is only a --tokenizer value' };
  if (value.startsWith(HUB_PREFIX)) return hubValue(value.slice(HUB_PREFIX.length), true);
  if (!value.startsWith('/') && !value.startsWith('.') && !(rules.isDirectory?.(value) ?? false)) {
    const hub = hubValue(value, false);
    if (hub.ok) return hub;
  }
  if (hasControl(value)) return { ok: false, why: 'has control characters' };
  if (rules.absolutePathOnly && (!value.startsWith('/') || value.split('/').includes('..')))
    return { ok: false, why: 'is not engine, off, hf:REPO[@REVISION], org/name or an absolute path' };
  return { ok: true, spec: { kind: 'path', path: value } };
}

function hubValue(text: string, prefixed: boolean): ParsedTokenizer {
  const at = text.indexOf('@');
  const repo = at < 0 ? text : text.slice(0, at);
  const revision = at < 0 ? undefined : text.slice(at + 1);
  if (!(prefixed ? isRepoId(repo) : isOrgRepo(repo))) return { ok: false, why: `${JSON.stringify(repo)} is not a Hub repo id (org/name)` };
  if (revision !== undefined && !isRevision(revision)) return { ok: false, why: `${JSON.stringify(revision)} is not a revision` };
  return { ok: true, spec: { kind: 'hub', repo, revision } };
}

/** The value back as text (a stable key, and what /engines shows). */
export function tokenizerValueText(spec: TokenizerSpec): string {
  switch (spec.kind) {
    case 'path':
      return spec.path;
    case 'hub':
      return `${HUB_PREFIX}${spec.repo}${spec.revision !== undefined ? `@${spec.revision}` : ''}`;
    default:
      return spec.kind;
  }
}
