// The LoRA rules of `llm-router lint`: what keeps the router from serving the adapters a workload declares. The
// annotation is read with the router's own reader and parser, so lint and router agree on what is declared; the
// router loads adapters through the engines' runtime endpoints: vLLM's need --enable-lora and
// VLLM_ALLOW_RUNTIME_LORA_UPDATING, SGLang's need LoRA on (--enable-lora, or adapters given with --lora-paths) and one
// data-parallel rank (it refuses runtime loads with --dp-size above 1).
import type { AdapterDeclaration } from '../../router/core/lora.js';
import { LORA_ADAPTERS_ANNOTATION, workloadAdapters, type WorkloadLike } from '../../router/discovery/kubernetes/desired.js';
import { containerWords, flagValues } from '../../router/discovery/kubernetes/model-names.js';
import type { KubeObject } from './load.js';
import { annotationPath, type Place, type Report } from './pd-rules.js';
import { argsKey, type ContainerSpec, type ManifestEngineKind } from './pods.js';

const RUNTIME_ENV = 'VLLM_ALLOW_RUNTIME_LORA_UPDATING';

/** One workload's declared adapters, for the checks across workloads. */
export interface LoraWorkload {
  readonly adapters: readonly AdapterDeclaration[];
  readonly report: Report;
  /** where its llm-router/lora-adapters annotation is written */
  readonly annotation: Place;
}

/** The annotation's place: on the workload, as the router reads it first, else on its pod template. */
function annotationPlace(object: KubeObject): Place {
  const onObject = object.metadata?.annotations?.[LORA_ADAPTERS_ANNOTATION] !== undefined;
  return { of: onObject ? 'object' : 'template', path: annotationPath(LORA_ADAPTERS_ANNOTATION) };
}

const listOf = (adapters: readonly { name: string }[]): string => adapters.map((a) => JSON.stringify(a.name)).join(', ');

/** vLLM's reading of the variable: "1" or "true", any case, blanks trimmed. */
const truthy = (value: string): boolean => ['1', 'true'].includes(value.trim().toLowerCase());

/**
 * Whether the engine runs with runtime adapter loading: a shell assignment in its command line, else its last env
 * entry of that name; undefined when lint cannot see the value (valueFrom, envFrom).
 */
function runtimeLoading(engine: ContainerSpec, words: readonly string[]): { on: boolean; value?: string } | undefined {
  const assigned = words.filter((w) => w.startsWith(`${RUNTIME_ENV}=`)).at(-1);
  if (assigned !== undefined) return { on: truthy(assigned.slice(RUNTIME_ENV.length + 1)), value: assigned.slice(RUNTIME_ENV.length + 1) };
  const entry = (engine.env ?? []).filter((e) => e.name === RUNTIME_ENV).at(-1);
  if (entry?.valueFrom !== undefined) return undefined;
  if (entry !== undefined) return { on: truthy(String(entry.value ?? '')), value: String(entry.value ?? '') };
  return engine.envFrom?.length ? undefined : { on: false };
}

/**
 * Names of the adapters vLLM loads at start: --lora-modules NAME=PATH ... or JSON objects with a name, as vLLM parses
 * them; from the arguments as given (a JSON entry has blanks) and from the words of a shell line.
 */
function startedAdapters(engine: ContainerSpec, words: readonly string[]): Set<string> {
  const names = new Set<string>();
  const given = [...(engine.command ?? []), ...(engine.args ?? [])];
  for (const item of [...flagValues(given, '--lora-modules', true), ...flagValues(words, '--lora-modules', true)]) {
    if (item.includes('=') && !item.includes(',')) names.add(item.slice(0, item.indexOf('=')));
    else {
      try {
        const parsed: unknown = JSON.parse(item);
        const name = (parsed as { name?: unknown } | null)?.name;
        if (typeof name === 'string') names.add(name);
      } catch {
        // vLLM refuses to start with it; no adapter of that entry is loaded
      }
    }
  }
  return names;
}

/** The checks of a workload's engine against the adapters its annotation declares for its models. */
export function checkLoraEngine(
  object: KubeObject,
  engine: ContainerSpec,
  kind: ManifestEngineKind,
  models: readonly string[],
  report: Report,
): LoraWorkload | undefined {
  const declared = workloadAdapters(object as WorkloadLike, models);
  if (!declared) return undefined;
  const annotation = annotationPlace(object);
  for (const why of declared.invalid)
    report(
      'lora-annotation-invalid',
      `${LORA_ADAPTERS_ANNOTATION}: ${why}: the router ignores that entry, so no adapter is declared by it`,
      `write the annotation as NAME=PATH,NAME2=PATH2 (names without blanks, commas, = or @)`,
      annotation,
    );
  const { adapters } = declared;
  if (adapters.length === 0) return undefined;
  const name = engine.name ?? '(unnamed)';
  const args: Place = { of: 'engine', path: [argsKey(engine)] };
  if (kind === 'sglang') {
    checkSglang(engine, adapters, report, args);
    return { adapters, report, annotation };
  }
  if (kind !== 'vllm') {
    report(
      'lora-runtime-loading-off',
      `${LORA_ADAPTERS_ANNOTATION} declares ${listOf(adapters)}, but llm-router loads adapters only through vLLM's and SGLang's runtime endpoints and this engine is ${kind}: its load calls answer 404 and the adapters 503`,
      `serve the adapters' base model ${JSON.stringify(adapters[0]?.base)} with vLLM or SGLang, or remove the annotation`,
      annotation,
    );
    return { adapters, report, annotation };
  }
  const words = containerWords(engine);
  if (words.filter((w) => w === '--enable-lora' || w === '--no-enable-lora').at(-1) !== '--enable-lora') {
    report(
      'lora-not-enabled',
      `${LORA_ADAPTERS_ANNOTATION} declares ${listOf(adapters)}, but the engine runs without --enable-lora: vLLM serves no adapter, and every load the router makes fails`,
      `add --enable-lora to the engine's arguments, with --max-loras N (adapters at once) and --max-lora-rank covering the adapters`,
      args,
    );
  }
  const started = startedAdapters(engine, words);
  const notStarted = adapters.filter((a) => !started.has(a.name));
  const runtime = runtimeLoading(engine, words);
  if (notStarted.length > 0 && runtime?.on === false) {
    const state =
      runtime.value === undefined
        ? `the engine runs without ${RUNTIME_ENV}=true`
        : `${RUNTIME_ENV} is ${JSON.stringify(runtime.value)} (vLLM takes 1 or true)`;
    const lost =
      notStarted.length === adapters.length
        ? 'none of them is served (the engine starts with none of them: --lora-modules)'
        : `${listOf(notStarted)}, which the engine does not start with (--lora-modules), ${notStarted.length === 1 ? 'is' : 'are'} served nowhere`;
    report(
      'lora-runtime-loading-off',
      `${LORA_ADAPTERS_ANNOTATION} declares ${listOf(adapters)}, but ${state}: vLLM then has no /v1/load_lora_adapter, so every load the router makes answers 404 and ${lost}`,
      `set env ${RUNTIME_ENV}: "true" on container ${name}, or start the engine with the adapters (--lora-modules NAME=PATH)`,
      { of: 'engine', path: engine.env === undefined ? [argsKey(engine)] : ['env'] },
    );
  }
  return { adapters, report, annotation };
}

/** Names of the adapters SGLang loads at start: --lora-paths NAME=PATH, PATH (named by its path) or JSON with lora_name. */
function sglangStartedAdapters(words: readonly string[]): Set<string> {
  const names = new Set<string>();
  for (const item of flagValues(words, '--lora-paths', true)) {
    try {
      const name = (JSON.parse(item) as { lora_name?: unknown } | null)?.lora_name;
      if (typeof name === 'string') names.add(name);
    } catch {
      names.add(item.includes('=') ? item.slice(0, item.indexOf('=')) : item);
    }
  }
  return names;
}

/** SGLang loads adapters at run time only with LoRA on and one data-parallel rank. */
function checkSglang(engine: ContainerSpec, adapters: readonly AdapterDeclaration[], report: Report, args: Place): void {
  const words = containerWords(engine);
  const started = sglangStartedAdapters(words);
  if (!words.includes('--enable-lora') && started.size === 0) {
    report(
      'lora-not-enabled',
      `${LORA_ADAPTERS_ANNOTATION} declares ${listOf(adapters)}, but the engine runs without --enable-lora (or --lora-paths): SGLang answers every load the router makes "LoRA is not enabled"`,
      `add --enable-lora to the engine's arguments, with --max-loras-per-batch N, --max-lora-rank and --lora-target-modules covering the adapters`,
      args,
    );
    return;
  }
  const dp = Number([...flagValues(words, '--dp-size', false), ...flagValues(words, '--dp', false)].at(-1) ?? 1);
  const notStarted = adapters.filter((a) => !started.has(a.name));
  if (dp > 1 && notStarted.length > 0)
    report(
      'lora-runtime-loading-off',
      `${LORA_ADAPTERS_ANNOTATION} declares ${listOf(adapters)}, but the engine runs with --dp-size ${dp}: SGLang loads adapters at run time only with one data-parallel rank, so ${listOf(notStarted)} ${notStarted.length === 1 ? 'is' : 'are'} served nowhere`,
      `run container ${engine.name ?? '(unnamed)'} with --dp-size 1 (more replicas instead), or start it with the adapters (--lora-paths NAME=PATH)`,
      args,
    );
}

/** The check across workloads: an adapter named like a model is never routed to (the model wins). */
export function checkLoraNames(workloads: readonly LoraWorkload[], models: ReadonlySet<string>): void {
  for (const w of workloads)
    for (const a of w.adapters.filter((x) => models.has(x.name)))
      w.report(
        'lora-annotation-invalid',
        `${LORA_ADAPTERS_ANNOTATION} declares adapter ${JSON.stringify(a.name)}, which is also a model's name: the router routes requests for ${JSON.stringify(a.name)} to that model, never to the adapter`,
        `give the adapter a name no model has`,
        w.annotation,
      );
}
