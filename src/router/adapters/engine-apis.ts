// The adapter admin API of each engine kind: where load and unload calls go, what their answers mean, how an inference
// request names an adapter, and where the engine tells its adapter slots. vLLM (and every kind without an API of its
// own): POST /v1/load_lora_adapter and /v1/unload_lora_adapter with VLLM_ALLOW_RUNTIME_LORA_UPDATING, the adapter's own
// name as `model`, slots from /metrics. SGLang: POST /load_lora_adapter and /unload_lora_adapter answering
// {success, error_message}, `model` as BASE:ADAPTER, slots from its server info. Pure (unit-tested).
import type { EngineKind } from '../core/engine.js';
import { VLLM_MISSING, type LoadResult, type MissingAdapterAnswer } from '../core/lora.js';

/** an engine's error text is cut to this many characters before it reaches a log or the operator's view */
const MAX_DETAIL_CHARS = 300;

export interface AdminAnswer {
  readonly result: LoadResult;
  /** the engine's own words (or the transport error): for logs and the operator's view, never for a client */
  readonly detail: string;
  /** the HTTP status the engine answered the call with; absent when it did not answer */
  readonly status?: number;
}

export interface AdapterApi {
  readonly loadPath: string;
  readonly unloadPath: string;
  classifyLoad(status: number, text: string): AdminAnswer;
  /** the engine no longer holds the adapter after this unload answer (it unloaded it, or never held it) */
  unloadDone(status: number, text: string): boolean;
  /** the `model` an inference request for `adapter` of `base` carries to the engine */
  requestModel(base: string, adapter: string): string;
  /** GET paths of the engine's settings, tried in order until one answers 200; none: its slots come from /metrics */
  readonly infoPaths: readonly string[];
  /** the adapter slots in an answer of an info path */
  slotsOf(info: unknown): number | undefined;
  /** its answer to an inference request for an adapter it does not hold */
  readonly missingAdapter: MissingAdapterAnswer;
}

/**
 * The message of an engine's error body: OpenAI's {error: {message}}, vLLM's older {message}, FastAPI's {detail},
 * SGLang's {error_message}, or the text.
 */
export function engineMessage(text: string): string {
  let message = text;
  try {
    const json = JSON.parse(text) as {
      error?: { message?: unknown } | string;
      message?: unknown;
      detail?: unknown;
      error_message?: unknown;
    };
    const m = typeof json.error === 'object' ? json.error?.message : (json.error ?? json.message ?? json.detail ?? json.error_message);
    if (typeof m === 'string') message = m;
    else if (m !== undefined && m !== null) message = JSON.stringify(m);
  } catch {
    // not JSON: the text itself
  }
  message = message.replace(/\s+/g, ' ').trim();
  return message.length > MAX_DETAIL_CHARS ? `${message.slice(0, MAX_DETAIL_CHARS)}...` : message;
}

/**
 * A route the engine does not have: 404 or 405 with FastAPI's own {"detail": ...} (or no JSON at all). vLLM's errors
 * about an adapter (404 "No adapter found for ...") carry an error object instead, and are failures of the adapter.
 */
function routeMissing(status: number, text: string): boolean {
  if (status === 405) return true;
  if (status !== 404) return false;
  try {
    const json = JSON.parse(text) as Record<string, unknown>;
    return json.detail !== undefined && json.error === undefined && json.message === undefined;
  } catch {
    return true;
  }
}

const VLLM_LOAD_PATH = '/v1/load_lora_adapter';
const VLLM_UNLOAD_PATH = '/v1/unload_lora_adapter';

/** What a vLLM load call's answer means: 200 loaded; 400 "already loaded" is a load too (another router made it). */
export function classifyLoad(status: number, text: string): AdminAnswer {
  const detail = engineMessage(text);
  if (status >= 200 && status < 300) return { result: 'loaded', detail };
  if (status === 400 && /already (been )?loaded/i.test(detail)) return { result: 'already-loaded', detail };
  if (routeMissing(status, text))
    return { result: 'unsupported', detail: `${VLLM_LOAD_PATH} answered ${status}: the engine does not load adapters at run time` };
  return { result: 'failed', detail: detail || `${VLLM_LOAD_PATH} answered ${status}` };
}

/** A vLLM unload call's answer: gone either way when 200, or 404 naming the adapter (the engine did not hold it). */
export function unloadDone(status: number, text: string): boolean {
  return (status >= 200 && status < 300) || (status === 404 && !routeMissing(status, text));
}

const VLLM_API: AdapterApi = {
  missingAdapter: VLLM_MISSING,
  loadPath: VLLM_LOAD_PATH,
  unloadPath: VLLM_UNLOAD_PATH,
  classifyLoad,
  unloadDone,
  requestModel: (_base, adapter) => adapter,
  infoPaths: [],
  slotsOf: () => undefined,
};

const SGLANG_LOAD_PATH = '/load_lora_adapter';

/** SGLang answers 200 or 400 with {success, error_message}; a success:false body is a failure whatever its status. */
function sglangFailed(status: number, text: string): boolean {
  if (status < 200 || status >= 300) return true;
  try {
    return (JSON.parse(text) as { success?: unknown }).success === false;
  } catch {
    return false;
  }
}

/**
 * What an SGLang load call's answer means: a name its registry has already ("already exists") is a load another
 * router made; "LoRA is not enabled" (started without --enable-lora) and a missing route mean no loads at run time.
 */
export function classifySglangLoad(status: number, text: string): AdminAnswer {
  const detail = engineMessage(text);
  if (!sglangFailed(status, text)) return { result: 'loaded', detail };
  if (status < 500 && /already (exists|been loaded|loaded)/i.test(detail)) return { result: 'already-loaded', detail };
  if (routeMissing(status, text))
    return { result: 'unsupported', detail: `${SGLANG_LOAD_PATH} answered ${status}: the engine does not load adapters at run time` };
  if (/lora is not enabled/i.test(detail))
    return { result: 'unsupported', detail: `the engine does not load adapters at run time: ${detail}` };
  return { result: 'failed', detail: detail || `${SGLANG_LOAD_PATH} answered ${status}` };
}

/** An SGLang unload answer: gone when it succeeded, or when the registry had no such name ("does not exist"). */
export function sglangUnloadDone(status: number, text: string): boolean {
  if (!sglangFailed(status, text)) return true;
  return status === 400 && /does not exist/i.test(engineMessage(text));
}

/** SGLang's server info: max_loaded_loras (the most it registers) when set, else max_loras_per_batch. */
export function sglangSlots(info: unknown): number | undefined {
  const i = info as { max_loaded_loras?: unknown; max_loras_per_batch?: unknown } | undefined;
  for (const n of [i?.max_loaded_loras, i?.max_loras_per_batch]) if (Number.isInteger(n) && (n as number) > 0) return n as number;
  return undefined;
}

const SGLANG_API: AdapterApi = {
  // "The requested LoRA adapters are not loaded: ..." (a 400; a lost adapter after a restart reads the same)
  missingAdapter: { status: 400, message: /LoRA adapters? (are|is) not loaded/i },
  loadPath: SGLANG_LOAD_PATH,
  unloadPath: '/unload_lora_adapter',
  classifyLoad: classifySglangLoad,
  unloadDone: sglangUnloadDone,
  // SGLang's OpenAI API reads the adapter from the text after the first colon of `model`; the name alone is no model
  requestModel: (base, adapter) => `${base}:${adapter}`,
  // /server_info in newer releases, /get_server_info (deprecated there) in older ones
  infoPaths: ['/server_info', '/get_server_info'],
  slotsOf: sglangSlots,
};

export function adapterApi(kind: EngineKind): AdapterApi {
  return kind === 'sglang' ? SGLANG_API : VLLM_API;
}
