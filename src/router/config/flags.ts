// Each command's flags are one table of specs (name, kind, default, env, choices, help): the command line is parsed by
// commander from it, the environment and the config file are read from it too, and every value, whichever its source,
// is checked by the zod schema built from its spec (flag-values.ts); precedence flag > env > file > default. A name
// that matches no flag, on the command line, in the file or in an LLM_ROUTER_* variable, is refused with the closest
// one suggested.
import { Command, CommanderError, Option } from 'commander';
import { didYouMean } from '../util/suggest.js';
import { readValue, splitList } from './flag-values.js';

export type FlagKind = 'string' | 'int' | 'number' | 'boolean' | 'list' | 'repeat';

export type FlagValue = string | number | boolean | readonly string[];

export interface FlagSpec {
  /** kebab-case name without the leading dashes */
  readonly name: string;
  readonly kind: FlagKind;
  readonly help: string;
  readonly default?: FlagValue;
  readonly choices?: readonly string[];
  /** other spellings accepted on the command line and in files */
  readonly aliases?: readonly string[];
  /** extra environment variable names read after the prefixed one */
  readonly env?: readonly string[];
  /** minimum for numeric kinds */
  readonly min?: number;
  /** vllm_router has this flag (by its name or an alias) with the same meaning, so its users keep their arguments */
  readonly vllmRouter?: true;
  /** a change of it in the config file is applied while the router runs (the others wait for a restart) */
  readonly live?: true;
}

export class UsageError extends Error {
  readonly exitCode = 2;
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

export type FlagSource = 'flag' | 'env' | 'file' | 'default';

type ValueOfKind<S extends FlagSpec> = S['kind'] extends 'boolean'
  ? boolean
  : S['kind'] extends 'int' | 'number'
    ? number
    : S['kind'] extends 'list' | 'repeat'
      ? readonly string[]
      : S extends { readonly choices: readonly (infer C extends string)[] }
        ? C
        : string;

/** A flag with a default, a boolean (false) or a list (empty) always has a value; any other may be absent. */
type ValueOf<S extends FlagSpec> = S extends { readonly default: FlagValue }
  ? ValueOfKind<S>
  : S['kind'] extends 'boolean' | 'list' | 'repeat'
    ? ValueOfKind<S>
    : ValueOfKind<S> | undefined;

/** The typed values of a command's table (declared `as const satisfies readonly FlagSpec[]`), keyed by flag name. */
export type FlagValues<T extends readonly FlagSpec[]> = { readonly [S in T[number] as S['name']]: ValueOf<S> };

export interface ParsedFlags<T extends readonly FlagSpec[]> {
  readonly values: FlagValues<T>;
  /** where each flag's value came from; a flag with neither value nor default has none */
  readonly sources: ReadonlyMap<string, FlagSource>;
  /** each value the config file gave, by flag name (whether or not a flag or env overrides it) */
  readonly fromFile: ReadonlyMap<string, FlagValue>;
  readonly positionals: readonly string[];
}

export interface ParseOptions {
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** e.g. LLM_ROUTER_ — the env name is prefix + UPPER_SNAKE of the flag name */
  readonly envPrefix?: string;
  /** values read from a config file, keyed by flag name (kebab, snake or camel case) */
  readonly file?: Readonly<Record<string, unknown>>;
  readonly fileName?: string;
  readonly allowPositionals?: boolean;
  /** flags that exist elsewhere but are refused here, with the one-line reason */
  readonly refused?: ReadonlyMap<string, string>;
  /** flags the config file may not set, with the one-line reason (the file naming another file) */
  readonly notInFile?: ReadonlyMap<string, string>;
  /** variables with the prefix that are not flags but are read elsewhere (a benchmark switch) */
  readonly envAllowed?: readonly string[];
  /** prefixes of other commands' variables, which start with this command's prefix */
  readonly envOtherPrefixes?: readonly string[];
}

function envName(prefix: string, flag: string): string {
  return prefix + flag.toUpperCase().replace(/-/g, '_');
}

/** A config file's key as a flag name: kebab, snake and camel case are one (static_backends, staticBackends). */
export function normaliseKey(key: string): string {
  return key
    .replace(/([a-z0-9])([A-Z])/g, '$1-$2')
    .replace(/_/g, '-')
    .toLowerCase();
}

/** Turns one raw value (a string from argv/env, or anything from a file) into the spec's kind (flag-values.ts). */
function coerce(spec: FlagSpec, raw: unknown, where: string): FlagValue {
  const r = readValue(spec, raw);
  if (!r.ok) throw new UsageError(`${where}: ${r.reason}`);
  return r.value;
}

/** Every spelling of every flag: its name and its aliases. */
function spellings(specs: readonly FlagSpec[]): string[] {
  return specs.flatMap((s) => [s.name, ...(s.aliases ?? [])]);
}

/**
 * Rewrites a boolean flag's value into commander's form: `--x true`, `--x=true` -> `--x`; `--x false`, `--x=false` ->
 * `--no-x`. Any other value of a boolean is left for coerce() to refuse with the usual message.
 */
function normaliseBooleans(argv: readonly string[], byName: ReadonlyMap<string, FlagSpec>): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === '--') {
      out.push(...argv.slice(i));
      break;
    }
    const m = /^--([^=]+)(?:=(.*))?$/.exec(arg);
    const spec = m ? byName.get(m[1] as string) : undefined;
    if (!m || spec?.kind !== 'boolean') {
      out.push(arg);
      continue;
    }
    let value = m[2];
    if (value === undefined && /^(true|false)$/i.test(argv[i + 1] ?? '')) value = argv[++i];
    if (value === undefined || /^true$/i.test(value)) out.push(`--${m[1]}`);
    else if (/^false$/i.test(value)) out.push(`--no-${m[1]}`);
    else coerce(spec, value, `--${spec.name}`);
  }
  return out;
}

/** The first argument that is neither a flag nor a flag's value (to name it in the error). */
function firstPositional(tokens: readonly string[], byName: ReadonlyMap<string, FlagSpec>): string | undefined {
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i] as string;
    if (t === '--') return tokens[i + 1];
    if (!t.startsWith('--')) return t;
    const spec = byName.get(t.slice(2));
    if (spec !== undefined && spec.kind !== 'boolean') i++;
  }
  return undefined;
}

/** commander's words for a usage mistake, in this CLI's own form ("unknown flag --x (did you mean --y?)"). */
function usageFrom(err: CommanderError, specs: readonly FlagSpec[]): UsageError {
  const unknown = /unknown option '--([^'=]+)/.exec(err.message);
  if (unknown) {
    const name = unknown[1] as string;
    return new UsageError(`unknown flag --${name}${didYouMean(name, spellings(specs), (c) => `--${c}`)}`);
  }
  const missing = /option '--([^ ']+)[^']*' argument missing/.exec(err.message);
  if (missing) return new UsageError(`--${missing[1]} needs a value`);
  if (err.code === 'commander.excessArguments') return new UsageError('unexpected argument: this command takes flags only');
  return new UsageError(err.message.replace(/^error: /, ''));
}

/** Parses the command line with commander, from the same specs; returns each flag given there, coerced. */
function parseArgv(
  argv: readonly string[],
  specs: readonly FlagSpec[],
  byName: ReadonlyMap<string, FlagSpec>,
  opts: ParseOptions,
): {
  values: Map<string, FlagValue>;
  positionals: string[];
} {
  const cmd = new Command()
    .exitOverride()
    .configureOutput({ writeOut: () => undefined, writeErr: () => undefined, outputError: () => undefined })
    .helpOption(false)
    .showSuggestionAfterError(false)
    .allowExcessArguments(opts.allowPositionals === true);
  if (opts.allowPositionals) cmd.argument('[args...]');
  // one commander option per spelling; each keeps the raw text in arrival order, coerced below by the spec
  const raw = new Map<string, string[]>();
  const keep = (spec: FlagSpec) => (value: string) => {
    raw.set(spec.name, [...(raw.get(spec.name) ?? []), value]);
    return value;
  };
  for (const spec of specs) {
    for (const name of [spec.name, ...(spec.aliases ?? [])]) {
      if (spec.kind === 'boolean') {
        cmd.addOption(new Option(`--${name}`));
        cmd.on(`option:${name}`, () => raw.set(spec.name, ['true']));
        cmd.addOption(new Option(`--no-${name}`));
        cmd.on(`option:no-${name}`, () => raw.set(spec.name, ['false']));
      } else cmd.addOption(new Option(`--${name} <value>`).argParser(keep(spec)));
    }
  }
  const tokens = normaliseBooleans(argv, byName);
  try {
    cmd.parse(tokens, { from: 'user' });
  } catch (err) {
    if (!(err instanceof CommanderError)) throw err;
    const stray = err.code === 'commander.excessArguments' ? firstPositional(tokens, byName) : undefined;
    throw stray === undefined ? usageFrom(err, specs) : new UsageError(`unexpected argument ${JSON.stringify(stray)}`);
  }
  const values = new Map<string, FlagValue>();
  for (const [name, texts] of raw) {
    const spec = byName.get(name) as FlagSpec;
    // a repeatable flag gathers every occurrence; any other takes the last, as shells and most CLIs do
    if (spec.kind === 'repeat')
      values.set(
        name,
        texts.flatMap((t) => splitList(t)),
      );
    else values.set(name, coerce(spec, texts.at(-1) as string, `--${name}`));
  }
  return { values, positionals: [...cmd.args] };
}

/** LLM_ROUTER_* variables that name no flag: a typo there must not be ignored silently. */
function unknownEnv(specs: readonly FlagSpec[], opts: ParseOptions): void {
  const prefix = opts.envPrefix;
  if (!prefix || !opts.env) return;
  const known = new Set<string>(opts.envAllowed ?? []);
  for (const spec of specs) {
    for (const n of [spec.name, ...(spec.aliases ?? [])]) known.add(envName(prefix, n));
    for (const e of spec.env ?? []) known.add(e);
  }
  for (const key of Object.keys(opts.env)) {
    if (!key.startsWith(prefix) || known.has(key)) continue;
    // the variables of the other commands share the prefix (LLM_ROUTER_SIM_PORT is sim's, not serve's)
    if ((opts.envOtherPrefixes ?? []).some((p) => key.startsWith(p))) continue;
    throw new UsageError(`environment variable ${key} matches no flag${didYouMean(key, known)}; unset it or fix its name`);
  }
}

export function parseFlags<const T extends readonly FlagSpec[]>(
  argv: readonly string[],
  specs: T,
  opts: ParseOptions = {},
): ParsedFlags<T> {
  const byName = new Map<string, FlagSpec>();
  for (const spec of specs) {
    byName.set(spec.name, spec);
    for (const alias of spec.aliases ?? []) byName.set(alias, spec);
  }
  const refuse = (name: string): void => {
    const why = opts.refused?.get(name);
    if (why !== undefined) throw new UsageError(`--${name} is not supported by llm-router: ${why}`);
  };
  for (const arg of argv) {
    if (arg === '--') break;
    const m = /^--([^=]+)/.exec(arg);
    if (m) refuse(m[1] as string);
  }
  const { values: fromArgv, positionals } = parseArgv(argv, specs, byName, opts);
  unknownEnv(specs, opts);

  const fileValues = new Map<string, FlagValue>();
  if (opts.file) {
    for (const [key, raw] of Object.entries(opts.file)) {
      const name = normaliseKey(key);
      refuse(name);
      const spec = byName.get(name);
      if (!spec)
        throw new UsageError(
          `${opts.fileName ?? 'config file'}: unknown setting ${JSON.stringify(key)}${didYouMean(name, spellings(specs))}`,
        );
      const notHere = opts.notInFile?.get(spec.name);
      if (notHere !== undefined) throw new UsageError(`${opts.fileName ?? 'config file'}: ${key} cannot be set in the file: ${notHere}`);
      if (raw === null || raw === undefined) continue;
      fileValues.set(spec.name, coerce(spec, raw, `${opts.fileName ?? 'config file'}: ${key}`));
    }
  }

  const values = new Map<string, FlagValue>();
  const sources = new Map<string, FlagSource>();
  const env = opts.env ?? {};
  for (const spec of specs) {
    const argvValue = fromArgv.get(spec.name);
    if (argvValue !== undefined) {
      values.set(spec.name, argvValue);
      sources.set(spec.name, 'flag');
      continue;
    }
    const envKeys = [
      ...(opts.envPrefix ? [envName(opts.envPrefix, spec.name)] : []),
      ...(opts.envPrefix ? (spec.aliases ?? []).map((a) => envName(opts.envPrefix as string, a)) : []),
      ...(spec.env ?? []),
    ];
    const envKey = envKeys.find((k) => env[k] !== undefined && env[k] !== '');
    if (envKey !== undefined) {
      values.set(spec.name, coerce(spec, env[envKey], envKey));
      sources.set(spec.name, 'env');
      continue;
    }
    const fileValue = fileValues.get(spec.name);
    if (fileValue !== undefined) {
      values.set(spec.name, fileValue);
      sources.set(spec.name, 'file');
      continue;
    }
    if (spec.default !== undefined) {
      values.set(spec.name, spec.default);
      sources.set(spec.name, 'default');
    }
  }
  return { values: typed(specs, values), sources, fromFile: fileValues, positionals };
}

/** The one place the table's types meet its runtime values: coerce() gave each flag its spec's kind. */
function typed<T extends readonly FlagSpec[]>(specs: T, values: ReadonlyMap<string, FlagValue>): FlagValues<T> {
  const out: Record<string, FlagValue | undefined> = {};
  for (const spec of specs) {
    const empty = spec.kind === 'boolean' ? false : spec.kind === 'list' || spec.kind === 'repeat' ? [] : undefined;
    out[spec.name] = values.get(spec.name) ?? empty;
  }
  return out as FlagValues<T>;
}

export function usage(
  command: string,
  summary: string,
  specs: readonly FlagSpec[],
  refused: ReadonlyMap<string, string> = new Map(),
): string {
  const marked = specs.some((s) => s.vllmRouter);
  const live = specs.some((s) => s.live);
  const legend = [
    ...(marked ? ['* also a vllm_router flag'] : []),
    ...(live ? ['(live): a change in the settings file applies while the router runs'] : []),
  ];
  const lines = [`usage: llm-router ${command} [flags]`, '', summary, '', legend.length > 0 ? `flags (${legend.join('; ')}):` : 'flags:'];
  for (const spec of specs) {
    const arg = spec.kind === 'boolean' ? '' : spec.choices ? ` ${spec.choices.join('|')}` : ` ${spec.kind.toUpperCase()}`;
    const def =
      spec.default !== undefined && spec.default !== '' && !(Array.isArray(spec.default) && spec.default.length === 0)
        ? ` (default ${Array.isArray(spec.default) ? spec.default.join(',') : String(spec.default)})`
        : '';
    const also = spec.aliases?.length ? ` (also --${spec.aliases.join(', --')})` : '';
    lines.push(`${spec.vllmRouter ? '* ' : '  '}--${spec.name}${arg}${also}`);
    lines.push(`      ${spec.help}${def}${spec.live ? ' (live)' : ''}`);
  }
  if (refused.size > 0) lines.push('', 'vllm_router flags refused here, and why:');
  for (const [name, why] of refused) lines.push(`  --${name}: ${why}`);
  return lines.join('\n');
}
