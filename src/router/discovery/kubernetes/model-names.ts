// Which model names a Kubernetes workload or pod declares. First rule that gives names wins:
// the `llm-router/models` annotation; the pod (template) label named by --k8s-model-label; the engine container's
// arguments (--served-model-name, else `vllm serve MODEL`, --model, SGLang --model-path, TGI --model-id).

export const MODELS_ANNOTATION = 'llm-router/models';
export const PORT_ANNOTATION = 'llm-router/port';

export interface ContainerLike {
  readonly name?: string;
  readonly command?: readonly string[];
  readonly args?: readonly string[];
}

export interface ObjectMetaLike {
  readonly name?: string;
  readonly namespace?: string;
  readonly labels?: Readonly<Record<string, string>>;
  readonly annotations?: Readonly<Record<string, string>>;
}

/** A pod, or a workload's pod template, reduced to what names its models. */
export interface PodShape {
  readonly metadata?: ObjectMetaLike;
  readonly spec?: { readonly containers?: readonly ContainerLike[] };
}

export type ModelNameSource = 'annotation' | 'label' | 'args';

export interface DeclaredNames {
  readonly names: readonly string[];
  readonly source: ModelNameSource;
}

function commaList(value: string | undefined): string[] {
  return (value ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

/** Splits a shell command line into words, honouring simple quotes; enough for `sh -c "vllm serve ..."`. */
export function shellWords(line: string): string[] {
  const words: string[] = [];
  let current = '';
  let quote: '"' | "'" | undefined;
  let inWord = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i] as string;
    if (quote) {
      if (c === quote) quote = undefined;
      else if (c === '\\' && quote === '"' && i + 1 < line.length) current += line[++i];
      else current += c;
    } else if (c === '"' || c === "'") {
      quote = c;
      inWord = true;
    } else if (c === '\\' && i + 1 < line.length) {
      current += line[++i];
      inWord = true;
    } else if (/\s/.test(c) || c === ';' || c === '&' || c === '|') {
      if (inWord) words.push(current);
      current = '';
      inWord = false;
    } else {
      current += c;
      inWord = true;
    }
  }
  if (inWord) words.push(current);
  return words;
}

/** The words a container runs: command + args, with `sh -c "..."` scripts split into words too. */
export function containerWords(c: ContainerLike): string[] {
  const words: string[] = [];
  for (const w of [...(c.command ?? []), ...(c.args ?? [])]) {
    if (/\s/.test(w)) words.push(...shellWords(w));
    else words.push(w);
  }
  return words;
}

/** Values of a flag in `--flag v`, `--flag=v`, and for multi-valued flags `--flag a b` (up to the next flag). */
export function flagValues(words: readonly string[], flag: string, multi: boolean): string[] {
  const out: string[] = [];
  for (let i = 0; i < words.length; i++) {
    const w = words[i] as string;
    if (w.startsWith(flag + '=')) out.push(w.slice(flag.length + 1));
    else if (w === flag) {
      for (let j = i + 1; j < words.length && !(words[j] as string).startsWith('-'); j++) {
        out.push(words[j] as string);
        if (!multi) break;
      }
    }
  }
  return out.filter(Boolean);
}

/** Model names from an engine's command line. */
export function namesFromArgs(words: readonly string[]): string[] {
  const served = flagValues(words, '--served-model-name', true);
  if (served.length > 0) return served;
  const serve = words.findIndex((w, i) => w === 'serve' && /(^|\/)vllm$/.test(words[i - 1] ?? ''));
  if (serve >= 0) {
    const model = words[serve + 1];
    if (model && !model.startsWith('-')) return [model];
  }
  for (const flag of ['--model', '--model-path', '--model-id']) {
    const v = flagValues(words, flag, false);
    if (v.length > 0) return [v[0] as string];
  }
  return [];
}

/** The port an engine container listens on, from its `--port` argument (used by the linter, not for routing). */
export function portFromArgs(words: readonly string[]): number | undefined {
  const v = flagValues(words, '--port', false)[0];
  const n = Number(v);
  return v !== undefined && Number.isInteger(n) && n > 0 && n < 65536 ? n : undefined;
}

/**
 * Names declared by a workload (its own annotations first, then its pod template) or by a pod.
 * `workloadMeta` is the Deployment/StatefulSet/LeaderWorkerSet metadata when there is one.
 */
export function declaredModelNames(template: PodShape, modelLabel: string, workloadMeta?: ObjectMetaLike): DeclaredNames | undefined {
  const annotated = commaList(workloadMeta?.annotations?.[MODELS_ANNOTATION] ?? template.metadata?.annotations?.[MODELS_ANNOTATION]);
  if (annotated.length > 0) return { names: annotated, source: 'annotation' };
  const label = template.metadata?.labels?.[modelLabel];
  if (label) return { names: [label], source: 'label' };
  for (const c of template.spec?.containers ?? []) {
    const names = namesFromArgs(containerWords(c));
    if (names.length > 0) return { names, source: 'args' };
  }
  return undefined;
}
