// llm-d-sidecar: one call, to the decode pod's routing sidecar, naming the chosen prefill endpoint in
// x-prefiller-host-port; the sidecar runs the prefill call itself (and falls back to decode-only when it fails).
import type { Endpoint } from '../../core/endpoint.js';
import { PREFILLER_HEADER } from '../../core/pd.js';
import type { PdProtocolRunner } from './protocol.js';

/** IP:PORT of an endpoint, as the sidecar dials it ([v6]:PORT for IPv6). */
export function hostPort(endpoint: Endpoint): string {
  const url = new URL(endpoint.url);
  return `${url.hostname}:${url.port || (url.protocol === 'https:' ? '443' : '80')}`;
}

export const runLlmdSidecar: PdProtocolRunner = (pair) => pair.forwardDecode(pair.body, [PREFILLER_HEADER, hostPort(pair.prefill)]);
