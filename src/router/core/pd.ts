// Prefill/decode disaggregation words: the roles an endpoint can have, the wire protocols a P/D model is served
// with, and which of those can run a request on a decode endpoint alone.

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
export function allowsDecodeOnly(protocol: PdProtocol): boolean {
  return protocol !== 'sglang';
}

export function isPdProtocol(value: string): value is PdProtocol {
  return (PD_PROTOCOLS as readonly string[]).includes(value);
}
