// The settings file: which one (--config, or vllm_router's --dynamic-config-yaml / --dynamic-config-json), its text, and
// that text as a mapping of flag names to values. --config is ours: YAML whose keys are flag names. vllm_router's two
// files carry its DynamicRouterConfig fields (service_discovery, routing_logic, static_backends as a comma-separated
// string, ...), which are its flag names in snake case, so they read as ours; its YAML form may also give static_models
// as a mapping of model to backends and static_aliases as a mapping of alias to model, which are turned into the flags'
// lists here. Its fields that llm-router refuses (callbacks, static_model_labels, ...) are refused with the same
// one-line reason as the flags.
import { readFileSync } from 'node:fs';
import { lazyModule } from '../util/lazy-module.js';
import { UsageError } from './flags.js';

const yaml = lazyModule<typeof import('yaml')>('yaml');

export type ConfigFileFormat = 'yaml' | 'vllm-router-yaml' | 'vllm-router-json';

export interface ConfigFileRef {
  readonly path: string;
  readonly format: ConfigFileFormat;
  /** the flag that named it, for messages (--config, --dynamic-config-yaml, --dynamic-config-json) */
  readonly flag: string;
}

const FILE_FLAGS: readonly { readonly flag: string; readonly env: string; readonly format: ConfigFileFormat }[] = [
  { flag: 'config', env: 'LLM_ROUTER_CONFIG', format: 'yaml' },
  { flag: 'dynamic-config-yaml', env: 'LLM_ROUTER_DYNAMIC_CONFIG_YAML', format: 'vllm-router-yaml' },
  { flag: 'dynamic-config-json', env: 'LLM_ROUTER_DYNAMIC_CONFIG_JSON', format: 'vllm-router-json' },
];

/** The flags that name the settings file: the file itself may not set them. */
export const CONFIG_FILE_FLAGS: ReadonlyMap<string, string> = new Map(
  FILE_FLAGS.map((f) => [f.flag, 'a settings file cannot name another one; give it on the command line or in env']),
);

/** The last value of `--flag X` / `--flag=X` in argv. */
function argvValue(argv: readonly string[], flag: string): string | undefined {
  let found: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if (a === '--') break;
    if (a === `--${flag}`) found = argv[i + 1];
    else if (a.startsWith(`--${flag}=`)) found = a.slice(flag.length + 3);
  }
  return found;
}

/**
 * The settings file named in argv or env, found before the full parse since the file feeds that parse (a flag beats
 * its variable). One file at most: vllm_router's two options exclude each other, and --config with either is refused.
 */
export function configFileOf(argv: readonly string[], env: Readonly<Record<string, string | undefined>>): ConfigFileRef | undefined {
  const given = FILE_FLAGS.flatMap((f) => {
    const path = argvValue(argv, f.flag) ?? (env[f.env] || undefined);
    return path === undefined ? [] : [{ path, format: f.format, flag: `--${f.flag}` }];
  });
  if (given.length > 1)
    throw new UsageError(`${given.map((g) => g.flag).join(' and ')} both name a settings file; give one (they are read the same way)`);
  return given[0];
}

/** The file's text; a file that cannot be read is a usage error naming it. */
export function readConfigText(ref: ConfigFileRef): string {
  try {
    return readFileSync(ref.path, 'utf8');
  } catch (err) {
    throw new UsageError(`${ref.flag} ${ref.path}: ${(err as Error).message}`);
  }
}

function isMapping(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** vllm_router's YAML `static_models: {MODEL: {static_backends: [URL, ...], static_model_type: TYPE}}` as the flags' lists. */
function expandStaticModels(where: string, doc: Record<string, unknown>, models: Record<string, unknown>): void {
  if (doc.static_backends !== undefined && doc.static_backends !== null)
    throw new UsageError(
      `${where}: static_models is a mapping of models to their static_backends: give static_backends there, not beside it`,
    );
  const backends: string[] = [];
  const names: string[] = [];
  const types: string[] = [];
  for (const [model, details] of Object.entries(models)) {
    if (!isMapping(details) || !Array.isArray(details.static_backends))
      throw new UsageError(`${where}: static_models.${model} must be a mapping with static_backends: [URL, ...]`);
    for (const url of details.static_backends) {
      if (typeof url !== 'string')
        throw new UsageError(`${where}: static_models.${model}.static_backends: ${JSON.stringify(url)} is not a URL`);
      backends.push(url);
      names.push(model);
      if (details.static_model_type !== undefined) types.push(String(details.static_model_type));
    }
    const unknown = Object.keys(details).filter((k) => k !== 'static_backends' && k !== 'static_model_type');
    if (unknown.length > 0)
      throw new UsageError(
        `${where}: static_models.${model}: unknown setting ${JSON.stringify(unknown[0])} (static_backends, static_model_type)`,
      );
  }
  doc.static_backends = backends;
  doc.static_models = names;
  if (types.length > 0) doc.static_model_types = types;
}

/** vllm_router's forms that are not flag values: static_models and static_aliases as mappings. */
function fromVllmRouter(where: string, doc: Record<string, unknown>): Record<string, unknown> {
  const out = { ...doc };
  if (isMapping(out.static_models)) expandStaticModels(where, out, out.static_models);
  if (isMapping(out.static_aliases))
    out.static_aliases = Object.entries(out.static_aliases).map(([alias, model]) => `${alias}:${String(model)}`);
  return out;
}

/** The file's text as a mapping of setting names (flag names in any case) to values; a usage error when it is not one. */
export function parseConfigText(ref: ConfigFileRef, text: string): Record<string, unknown> {
  const where = `${ref.flag} ${ref.path}`;
  let doc: unknown;
  try {
    doc = ref.format === 'vllm-router-json' ? (text.trim() === '' ? null : JSON.parse(text)) : yaml().parse(text);
  } catch (err) {
    throw new UsageError(
      `${where}: not valid ${ref.format === 'vllm-router-json' ? 'JSON' : 'YAML'}: ${(err as Error).message.split('\n')[0]}`,
    );
  }
  if (doc === null || doc === undefined) return {};
  if (!isMapping(doc)) throw new UsageError(`${where}: must be a mapping of setting names to values`);
  return ref.format === 'yaml' ? doc : fromVllmRouter(where, doc);
}
