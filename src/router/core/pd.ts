// Prefill/decode disaggregation words: the roles an endpoint can have, the wire protocols a P/D model is served
// with, which of those can run a request on a decode endpoint alone, and what P/D forwarding reports.
import type { FailureKind } from './forward.js';

/** What an endpoint does for its models: the prefill half, the decode half, or whole requests (the default). */
export const ENDPOINT_ROLES = ['prefill', 'decode', 'both'] as const;
export type EndpointRole = (typeof ENDPOINT_ROLES)[number];

/** A half of a P/D pair; what /v1/models and a 503 name when no endpoint of it is ready. */
export type PdRole = Exclude<EndpointRole, 'both'>;

/**
 * vllm-nixl: the router calls prefill, then decode with the prefill's kv_transfer_params. llm-d-sidecar: one call to
 * the decode pod's sidecar, naming the prefill in x-prefiller-host-port. sglang: prefill and decode at once, paired by
 * bootstrap fields.
 */
export const PD_PROTOCOLS = ['vllm-nixl', 'llm-d-sidecar', 'sglang'] as const;
export type PdProtocol = (typeof PD_PROTOCOLS)[number];

/** Whether a decode endpoint can serve a request alone, computing the prompt itself (SGLang's decode cannot). */
/**
 * llm-d-sidecar's header naming the prefill endpoint (host:port) to the decode pod's routing sidecar. Named by the
 * router alone: the sidecar sends a prefill request to whatever it names, so a client's own is never forwarded
 * (src/router/proxy/headers.ts drops it; src/router/proxy/pd/llm-d-sidecar.ts sets it).
 */
export const PREFILLER_HEADER = 'x-prefiller-host-port';

export function allowsDecodeOnly(protocol: PdProtocol): boolean {
  return protocol !== 'sglang';
}

export function isPdProtocol(value: string): value is PdProtocol {
  return (PD_PROTOCOLS as readonly string[]).includes(value);
}

/** Why a request of a P/D model went to a decode endpoint alone. */
export type DecodeOnlyReason = 'prefill-failed' | 'no-prefill' | 'short-prompt';

/** How a prefill call failed: as forwarding fails, or with a 4xx (passed to the client), or 2xx without kv_transfer_params. */
export type PrefillFailure = FailureKind | 'invalid-answer';

/** Where P/D forwarding reports (metrics). */
export interface PdObserver {
  /** one call the router made to an endpoint of that role for a P/D request, and how long it took */
  call(model: string, role: PdRole, seconds: number): void;
  prefillFailed(model: string, kind: PrefillFailure): void;
  decodeOnly(model: string, reason: DecodeOnlyReason): void;
}
