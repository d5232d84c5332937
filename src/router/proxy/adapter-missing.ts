// The attempt's judgement of whether an engine does not hold the LoRA adapter a request names
// (src/router/proxy/attempt.ts): by the status alone (vLLM's 404), or by the status and the body (SGLang's 400 naming
// the adapter), for which the answer is held whole, up to a small bound, before it is passed on or drained.
import { saysAdapterMissing, type MissingAdapterAnswer } from '../core/lora.js';

/** an engine's "adapter not loaded" error is far shorter; a longer answer is passed on without judging it */
const MAX_HELD_BYTES = 16 * 1024;

/**
 * At the head of an answer to an adapter's request: 'missing' when its status alone says the engine does not hold the
 * adapter, 'judge-body' when its body must be read to know, undefined when it cannot say so.
 */
export function adapterMissingAtHead(missing: MissingAdapterAnswer | undefined, status: number): 'missing' | 'judge-body' | undefined {
  if (missing === undefined || status !== missing.status) return undefined;
  return missing.message === undefined ? 'missing' : 'judge-body';
}

/** Whether an answer held to be judged may grow to `bytes`; beyond that it is the client's own, passed on. */
export function mayHold(bytes: number): boolean {
  return bytes <= MAX_HELD_BYTES;
}

/** At the end of a held answer: whether it says the engine does not hold the adapter. */
export function heldSaysMissing(missing: MissingAdapterAnswer | undefined, status: number, held: readonly Buffer[]): boolean {
  return missing !== undefined && saysAdapterMissing(missing, status, Buffer.concat(held));
}
