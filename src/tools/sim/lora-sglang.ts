// The simulated engine's LoRA API as SGLang serves it (--engine-kind sglang): POST /load_lora_adapter and
// /unload_lora_adapter answering {success, error_message, loaded_adapters} with 200 or 400 (400 "LoRA is not enabled"
// without --enable-lora), at most --max-loaded-loras adapters registered, the LoRA settings in its server info, and
// requests that name an adapter as BASE:ADAPTER in `model` (or in the native `lora_path` field): an adapter's name alone
// is no served model (404), and an adapter that is not loaded is a 400.
import type { AdminReply, LoraFlavour, SimLora } from './lora.js';
import { errorBody } from './openai.js';

/** SGLang's default --max-loras-per-batch */
const DEFAULT_MAX_LORAS_PER_BATCH = 8;

function failure(message: string): AdminReply {
  return { status: 400, body: { success: false, error_message: message, loaded_adapters: null } };
}

function success(loaded: ReadonlyMap<string, string>): AdminReply {
  return { status: 200, body: { success: true, error_message: null, loaded_adapters: Object.fromEntries(loaded) } };
}

function names(loaded: ReadonlyMap<string, string>): string {
  return [...loaded.keys()].join(', ');
}

export const SGLANG_LORA: LoraFlavour = {
  loadPath: '/load_lora_adapter',
  unloadPath: '/unload_lora_adapter',
  owner: 'sglang',
  disabled: () => failure('LoRA is not enabled on this server (start it with --enable-lora).'),
  load(outcome, { name, path, loaded, maxLoaded }) {
    switch (outcome) {
      case 'invalid':
        return failure('lora_name and lora_path are required.');
      case 'exists':
        return failure(`LoRA with name ${name} already exists (loaded: ${names(loaded)}).`);
      case 'no-adapter':
        return failure(`Could not load LoRA adapter ${name}: no adapter at ${path}.`);
      case 'full':
        return failure(`Cannot load LoRA adapter ${name}: the maximum number of loaded LoRA adapters (${maxLoaded}) is reached.`);
      case 'loaded':
        return success(loaded);
    }
  },
  unload(outcome, { name, loaded }) {
    switch (outcome) {
      case 'invalid':
        return failure('lora_name is required.');
      case 'unknown':
        return failure(`LoRA with name ${name} does not exist (loaded: ${names(loaded)}).`);
      case 'unloaded':
        return success(loaded);
    }
  },
};

/** The LoRA settings of SGLang's server info (/server_info, /get_server_info). */
export function sglangLoraInfo(lora: SimLora | undefined): object {
  return {
    enable_lora: lora !== undefined,
    max_loras_per_batch: lora?.maxLoras ?? DEFAULT_MAX_LORAS_PER_BATCH,
    max_loaded_loras: lora && lora.maxLoaded > 0 ? lora.maxLoaded : null,
  };
}

export type SglangNaming =
  | { readonly ok: true; readonly adapter: string | undefined }
  | { readonly ok: false; readonly status: number; readonly body: object };

/**
 * The adapter an inference request names, as SGLang reads it: `model` is BASE or BASE:ADAPTER (split at the first
 * colon), BASE must be a served name, and the adapter in `model` wins over the native `lora_path` field.
 */
export function sglangAdapter(model: string, served: readonly string[], lora: SimLora | undefined, loraPath: unknown): SglangNaming {
  const colon = model.indexOf(':');
  const base = colon < 0 ? model : model.slice(0, colon).trim();
  const fromModel = colon < 0 ? '' : model.slice(colon + 1).trim();
  if (!served.includes(base)) return { ok: false, status: 404, body: errorBody(`Model '${model}' is not served.`, 'NotFound', 404) };
  const adapter = fromModel || (typeof loraPath === 'string' && loraPath !== '' ? loraPath : undefined);
  if (adapter === undefined) return { ok: true, adapter: undefined };
  if (!lora) return { ok: false, status: 400, body: errorBody('LoRA is not enabled on this server.', 'BadRequest', 400) };
  if (!lora.has(adapter))
    return {
      ok: false,
      status: 400,
      body: errorBody(`The requested LoRA adapters are not loaded: ${adapter} (loaded: ${lora.names().join(', ')})`, 'BadRequest', 400),
    };
  return { ok: true, adapter };
}
