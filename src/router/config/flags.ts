// A small, strict command-line parser driven by a table of flag specs.
// Flag values can also come from the environment and a config file; precedence: flag > env > file > default.

export type FlagKind = 'string' | 'int' | 'number' | 'boolean' | 'list' | 'repeat';

export type FlagValue = string | number | boolean | string[];

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
}

export class UsageError extends Error {
  readonly exitCode = 2;
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

export type FlagSource = 'flag' | 'env' | 'file' | 'default';

export interface ParsedFlags {
  readonly values: ReadonlyMap<string, FlagValue>;
  readonly sources: ReadonlyMap<string, FlagSource>;
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
}

function envName(prefix: string, flag: string): string {
  return prefix + flag.toUpperCase().replace(/-/g, '_');
}

function normaliseKey(key: string): string {
  return key
    .replace(/([a-z0-9])([A-Z])/g, '$1-$2')
    .replace(/_/g, '-')
    .toLowerCase();
}

function splitList(raw: string): string[] {
  return raw
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
}

/** Turns one raw value (a string from argv/env, or anything from a file) into the spec's kind. */
function coerce(spec: FlagSpec, raw: unknown, where: string): FlagValue {
  const fail = (what: string): never => {
    throw new UsageError(`${where}: ${what}`);
  };
  switch (spec.kind) {
    case 'boolean': {
      if (typeof raw === 'boolean') return raw;
      const s = String(raw).trim().toLowerCase();
      if (['1', 'true', 'yes', 'on', ''].includes(s)) return true;
      if (['0', 'false', 'no', 'off'].includes(s)) return false;
      return fail(`expected true or false, got ${JSON.stringify(raw)}`);
    }
    case 'int':
    case 'number': {
      const n = typeof raw === 'number' ? raw : Number(String(raw).trim());
      if (typeof raw === 'string' && raw.trim() === '') fail('expected a number, got an empty value');
      if (!Number.isFinite(n)) fail(`expected a number, got ${JSON.stringify(raw)}`);
      if (spec.kind === 'int' && !Number.isInteger(n)) fail(`expected a whole number, got ${JSON.stringify(raw)}`);
      if (spec.min !== undefined && n < spec.min) fail(`must be at least ${spec.min}, got ${n}`);
      return n;
    }
    case 'list':
    case 'repeat': {
      if (Array.isArray(raw)) return raw.flatMap((v) => splitList(String(v)));
      return splitList(String(raw));
    }
    case 'string': {
      if (raw === null || typeof raw === 'object') fail(`expected a text value, got ${JSON.stringify(raw)}`);
      const s = String(raw);
      if (spec.choices && !spec.choices.includes(s)) {
        fail(`must be one of ${spec.choices.join(', ')}; got ${JSON.stringify(s)}`);
      }
      return s;
    }
  }
}

function suggest(name: string, specs: readonly FlagSpec[]): string {
  const close = specs.find((s) => s.name.includes(name) || name.includes(s.name));
  return close ? ` (did you mean --${close.name}?)` : '';
}

export function parseFlags(argv: readonly string[], specs: readonly FlagSpec[], opts: ParseOptions = {}): ParsedFlags {
  const byName = new Map<string, FlagSpec>();
  for (const spec of specs) {
    byName.set(spec.name, spec);
    for (const alias of spec.aliases ?? []) byName.set(alias, spec);
  }
  const fromArgv = new Map<string, FlagValue>();
  const positionals: string[] = [];

  const refuse = (name: string): void => {
    const why = opts.refused?.get(name);
    if (why !== undefined) throw new UsageError(`--${name} is not supported by llm-router: ${why}`);
  };

  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === '--') {
      positionals.push(...argv.slice(i + 1));
      break;
    }
    if (!arg.startsWith('--')) {
      if (!opts.allowPositionals) throw new UsageError(`unexpected argument ${JSON.stringify(arg)}`);
      positionals.push(arg);
      continue;
    }
    const eq = arg.indexOf('=');
    let name = eq >= 0 ? arg.slice(2, eq) : arg.slice(2);
    let inline: string | undefined = eq >= 0 ? arg.slice(eq + 1) : undefined;
    refuse(name);
    let spec = byName.get(name);
    if (!spec && name.startsWith('no-')) {
      const positive = byName.get(name.slice(3));
      if (positive?.kind === 'boolean' && inline === undefined) {
        spec = positive;
        inline = 'false';
        name = positive.name;
      }
    }
    if (!spec) throw new UsageError(`unknown flag --${name}${suggest(name, specs)}`);
    let raw: string;
    if (inline !== undefined) raw = inline;
    else if (spec.kind === 'boolean') {
      const next = argv[i + 1];
      if (next !== undefined && /^(true|false)$/i.test(next)) {
        raw = next;
        i++;
      } else raw = 'true';
    } else {
      const next = argv[i + 1];
      if (next === undefined) throw new UsageError(`--${spec.name} needs a value`);
      raw = next;
      i++;
    }
    const value = coerce(spec, raw, `--${spec.name}`);
    const previous = fromArgv.get(spec.name);
    if (spec.kind === 'repeat' && Array.isArray(previous) && Array.isArray(value)) fromArgv.set(spec.name, [...previous, ...value]);
    else fromArgv.set(spec.name, value);
  }

  const fileValues = new Map<string, FlagValue>();
  if (opts.file) {
    for (const [key, raw] of Object.entries(opts.file)) {
      const name = normaliseKey(key);
      refuse(name);
      const spec = byName.get(name);
      if (!spec) throw new UsageError(`${opts.fileName ?? 'config file'}: unknown setting ${JSON.stringify(key)}${suggest(name, specs)}`);
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
  return { values, sources, positionals };
}

export function usage(command: string, summary: string, specs: readonly FlagSpec[]): string {
  const lines = [`usage: llm-router ${command} [flags]`, '', summary, '', 'flags:'];
  for (const spec of specs) {
    const arg = spec.kind === 'boolean' ? '' : spec.choices ? ` ${spec.choices.join('|')}` : ` ${spec.kind.toUpperCase()}`;
    const def =
      spec.default !== undefined && spec.default !== '' && !(Array.isArray(spec.default) && spec.default.length === 0)
        ? ` (default ${Array.isArray(spec.default) ? spec.default.join(',') : String(spec.default)})`
        : '';
    lines.push(`  --${spec.name}${arg}`);
    lines.push(`      ${spec.help}${def}`);
  }
  return lines.join('\n');
}

/** Typed accessors over parsed values; they throw if the table and the caller disagree. */
export class FlagReader {
  constructor(private readonly parsed: ParsedFlags) {}
  has(name: string): boolean {
    return this.parsed.values.has(name);
  }
  source(name: string): FlagSource | undefined {
    return this.parsed.sources.get(name);
  }
  string(name: string): string | undefined {
    const v = this.parsed.values.get(name);
    if (v === undefined) return undefined;
    if (typeof v !== 'string') throw new Error(`flag ${name} is not a string`);
    return v;
  }
  number(name: string): number | undefined {
    const v = this.parsed.values.get(name);
    if (v === undefined) return undefined;
    if (typeof v !== 'number') throw new Error(`flag ${name} is not a number`);
    return v;
  }
  boolean(name: string): boolean {
    const v = this.parsed.values.get(name);
    if (v === undefined) return false;
    if (typeof v !== 'boolean') throw new Error(`flag ${name} is not a boolean`);
    return v;
  }
  list(name: string): string[] {
    const v = this.parsed.values.get(name);
    if (v === undefined) return [];
    if (!Array.isArray(v)) throw new Error(`flag ${name} is not a list`);
    return v;
  }
}
