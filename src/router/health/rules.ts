// Per engine kind, the check that means "this model can serve now". None of them sends an inference request.
import { request, type Dispatcher } from 'undici';
import type { EngineKind } from '../core/engine.js';

export interface ProbeTarget {
  readonly url: string;
  readonly models: readonly string[];
}

export interface ProbeOptions {
  readonly kind: EngineKind;
  readonly timeoutMs: number;
  readonly apiKey: string | undefined;
  readonly dispatcher: Dispatcher;
}

export type ProbeVerdict =
  /** nothing answered: connection refused, reset or timed out */
  | 'unreachable'
  /** the engine's HTTP server answers, but the expected model cannot serve yet */
  | 'serving-api'
  /** the expected model is loaded */
  | 'ready';

export interface ProbeResult {
  readonly verdict: ProbeVerdict;
  /** true when the connection was refused outright (the process is not listening) */
  readonly refused: boolean;
  readonly detail: string;
  /** the LoRA adapters a 200 /v1/models listed (entries with a `parent`), name -> parent; absent when it was not read */
  readonly adapters?: ReadonlyMap<string, string>;
  /**
   * where the expected models are loaded from, as the engine says (a Hub repo id or a path): vLLM's /v1/models `root`,
   * SGLang's /get_model_info `tokenizer_path` (else `model_path`); absent when nothing was read
   */
  readonly roots?: ReadonlyMap<string, string>;
  /** a name mismatch, not a load: the engine answers and serves other models, without (some of) the expected ones */
  readonly mismatch?: NameMismatch;
}

export interface NameMismatch {
  /** the names it serves (its /v1/models ids that are not adapters, SGLang's model path, TGI's model id) */
  readonly serves: readonly string[];
  /** the expected models it does not serve */
  readonly missing: readonly string[];
}

interface Answer {
  readonly status: number;
  readonly json: unknown;
}

class Unreachable extends Error {
  constructor(
    readonly refused: boolean,
    message: string,
  ) {
    super(message);
  }
}

async function get(target: ProbeTarget, path: string, opts: ProbeOptions): Promise<Answer> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (opts.apiKey) headers.authorization = `Bearer ${opts.apiKey}`;
  try {
    const res = await request(target.url + path, {
      method: 'GET',
      headers,
      dispatcher: opts.dispatcher,
      headersTimeout: opts.timeoutMs,
      bodyTimeout: opts.timeoutMs,
      signal: AbortSignal.timeout(opts.timeoutMs),
    });
    const text = await res.body.text();
    let json: unknown;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    return { status: res.statusCode, json };
  } catch (err) {
    const code = (err as { code?: string }).code ?? (err as Error).name;
    // a TLS failure says why in its message (an untrusted or expired certificate, another name): keep it
    const message = (err as Error).message;
    const why = message && !message.includes(code) ? ` (${message})` : '';
    throw new Unreachable(code === 'ECONNREFUSED', `${path}: ${code}${why}`);
  }
}

/** Model ids listed by an OpenAI-compatible /v1/models answer. */
function listedModels(json: unknown): string[] {
  const data = (json as { data?: unknown } | undefined)?.data;
  if (!Array.isArray(data)) return [];
  return data.flatMap((m: unknown) => (typeof (m as { id?: unknown })?.id === 'string' ? [(m as { id: string }).id] : []));
}

/** The base models (not LoRA adapters: those have a `parent`) an OpenAI-compatible /v1/models answer lists. */
export function listedBaseModels(json: unknown): string[] {
  const data = (json as { data?: unknown } | undefined)?.data;
  if (!Array.isArray(data)) return [];
  return data.flatMap((m: { id?: unknown; parent?: unknown } | null) =>
    typeof m?.id === 'string' && !(typeof m.parent === 'string' && m.parent !== '') ? [m.id] : [],
  );
}

/** A result that misses expected models: a name mismatch when the engine names what it serves instead. */
function mismatchOf(served: readonly string[], missing: readonly string[]): { mismatch?: NameMismatch } {
  const serves = [...new Set(served.filter((n) => n.trim() !== ''))];
  return serves.length > 0 ? { mismatch: { serves, missing } } : {};
}

/**
 * SGLang's /v1/models lists loaded adapters (with a `parent`) only in releases whose cards have a `parent` field (null
 * for the base model); an older listing says nothing of adapters: undefined, so the router's own loads stand.
 */
export function sglangListedAdapters(json: unknown): Map<string, string> | undefined {
  const data = (json as { data?: unknown } | undefined)?.data;
  if (!Array.isArray(data) || !data.some((m: unknown) => typeof m === 'object' && m !== null && 'parent' in m)) return undefined;
  return listedAdapters(json);
}

/** The LoRA adapters an OpenAI-compatible /v1/models answer lists: vLLM gives them a `parent`, the base model. */
export function listedAdapters(json: unknown): Map<string, string> {
  const adapters = new Map<string, string>();
  const data = (json as { data?: unknown } | undefined)?.data;
  if (!Array.isArray(data)) return adapters;
  for (const m of data as { id?: unknown; parent?: unknown }[]) {
    if (typeof m?.id === 'string' && typeof m.parent === 'string' && m.parent !== '') adapters.set(m.id, m.parent);
  }
  return adapters;
}

/**
 * The `root` of each expected model in an OpenAI-compatible /v1/models answer: vLLM names there what it loaded the
 * model from (`vllm serve Qwen/Qwen3-8B --served-model-name qwen3` lists id qwen3, root Qwen/Qwen3-8B).
 */
export function listedRoots(json: unknown, expected: readonly string[]): Map<string, string> {
  const roots = new Map<string, string>();
  const data = (json as { data?: unknown } | undefined)?.data;
  if (!Array.isArray(data)) return roots;
  for (const m of data as { id?: unknown; root?: unknown; parent?: unknown }[]) {
    if (typeof m?.id !== 'string' || !expected.includes(m.id) || (typeof m.parent === 'string' && m.parent !== '')) continue;
    if (typeof m.root === 'string' && m.root.trim() !== '') roots.set(m.id, m.root.trim());
  }
  return roots;
}

/** SGLang's /get_model_info: its tokenizer's path (else its model's), for every expected model (it serves one). */
export function sglangRoots(info: unknown, expected: readonly string[]): Map<string, string> {
  const o = (info ?? {}) as { tokenizer_path?: unknown; model_path?: unknown };
  const pick = [o.tokenizer_path, o.model_path].find((v): v is string => typeof v === 'string' && v.trim() !== '');
  return new Map(pick === undefined ? [] : expected.map((m) => [m, pick.trim()]));
}

function missing(expected: readonly string[], listed: readonly string[]): string[] {
  return expected.filter((m) => !listed.includes(m));
}

function baseName(path: string): string {
  return path.replace(/\/+$/, '').split('/').pop() ?? path;
}

async function probeOpenAI(target: ProbeTarget, opts: ProbeOptions): Promise<ProbeResult> {
  const models = await get(target, '/v1/models', opts);
  if (models.status !== 200) return { verdict: 'serving-api', refused: false, detail: `/v1/models answered ${models.status}` };
  const listed = listedModels(models.json);
  const adapters = listedAdapters(models.json);
  const roots = listedRoots(models.json, target.models);
  const absent = missing(target.models, listed);
  if (absent.length > 0) {
    return {
      verdict: 'serving-api',
      refused: false,
      detail: `/v1/models lists [${listed.join(', ')}], not ${absent.join(', ')}`,
      adapters,
      roots,
      ...mismatchOf(listedBaseModels(models.json), absent),
    };
  }
  return { verdict: 'ready', refused: false, detail: `/v1/models lists ${target.models.join(', ')}`, adapters, roots };
}

async function probeSGLang(target: ProbeTarget, opts: ProbeOptions): Promise<ProbeResult> {
  const health = await get(target, '/health', opts);
  if (health.status !== 200) return { verdict: 'serving-api', refused: false, detail: `/health answered ${health.status}` };
  const info = await get(target, '/get_model_info', opts);
  if (info.status !== 200) return { verdict: 'serving-api', refused: false, detail: `/get_model_info answered ${info.status}` };
  const modelPath = String((info.json as { model_path?: unknown } | undefined)?.model_path ?? '');
  const names = [modelPath, baseName(modelPath)];
  // the OpenAI listing has the served names (--served-model-name may differ from the path) and the loaded adapters
  const models = await get(target, '/v1/models', opts);
  const listing = models.status === 200 ? models.json : undefined;
  const adapters = sglangListedAdapters(listing);
  const roots = sglangRoots(info.json, target.models);
  const absent = missing(
    target.models.filter((m) => !names.includes(m)),
    listedModels(listing),
  );
  if (absent.length > 0) {
    const served = listedBaseModels(listing);
    return {
      verdict: 'serving-api',
      refused: false,
      detail: `engine serves ${modelPath || 'an unnamed model'}, not ${absent.join(', ')}`,
      ...(adapters ? { adapters } : {}),
      roots,
      ...mismatchOf(served.length > 0 ? served : [modelPath], absent),
    };
  }
  return {
    verdict: 'ready',
    refused: false,
    detail: `/health 200, /get_model_info ${modelPath}`,
    ...(adapters ? { adapters } : {}),
    roots,
  };
}

async function probeTGI(target: ProbeTarget, opts: ProbeOptions): Promise<ProbeResult> {
  const health = await get(target, '/health', opts);
  if (health.status !== 200) return { verdict: 'serving-api', refused: false, detail: `/health answered ${health.status}` };
  const info = await get(target, '/info', opts);
  if (info.status !== 200) return { verdict: 'serving-api', refused: false, detail: `/info answered ${info.status}` };
  const modelId = String((info.json as { model_id?: unknown } | undefined)?.model_id ?? '');
  const absent = target.models.filter((m) => m !== modelId && baseName(m) !== baseName(modelId));
  if (absent.length > 0)
    return {
      verdict: 'serving-api',
      refused: false,
      detail: `TGI serves ${modelId || 'an unnamed model'}, not ${absent.join(', ')}`,
      ...mismatchOf([modelId], absent),
    };
  return { verdict: 'ready', refused: false, detail: `/health 200, /info ${modelId}` };
}

export async function probe(target: ProbeTarget, opts: ProbeOptions): Promise<ProbeResult> {
  try {
    switch (opts.kind) {
      case 'vllm':
      case 'openai':
        return await probeOpenAI(target, opts);
      case 'sglang':
        return await probeSGLang(target, opts);
      case 'tgi':
        return await probeTGI(target, opts);
    }
  } catch (err) {
    if (err instanceof Unreachable) return { verdict: 'unreachable', refused: err.refused, detail: err.message };
    return { verdict: 'unreachable', refused: false, detail: (err as Error).message };
  }
}

/** Optional warm-up: one token through the model, for engines whose first request compiles kernels. */
export async function warmup(
  target: ProbeTarget,
  model: string,
  opts: ProbeOptions & { timeoutMs: number },
): Promise<{ ok: boolean; detail: string }> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (opts.apiKey) headers.authorization = `Bearer ${opts.apiKey}`;
  try {
    const res = await request(target.url + '/v1/completions', {
      method: 'POST',
      headers,
      body: JSON.stringify({ model, prompt: 'ping', max_tokens: 1 }),
      dispatcher: opts.dispatcher,
      headersTimeout: opts.timeoutMs,
      bodyTimeout: opts.timeoutMs,
      signal: AbortSignal.timeout(opts.timeoutMs),
    });
    await res.body.dump();
    return res.statusCode === 200
      ? { ok: true, detail: 'warm-up token generated' }
      : { ok: false, detail: `warm-up answered ${res.statusCode}` };
  } catch (err) {
    return { ok: false, detail: `warm-up failed: ${(err as Error).message}` };
  }
}
