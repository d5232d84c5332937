// vllm-nixl: the prefill endpoint computes the prompt's KV cache and answers with kv_transfer_params (where to pull
// it from); the decode endpoint gets the client's body plus those params, unchanged, and streams the answer.
// A prefill that fails for any reason but a 4xx leaves the decode endpoint to compute the prompt itself.
import { kvTransferParamsOf, nixlDecodeBody, nixlPrefillBody } from './bodies.js';
import type { PdProtocolRunner } from './protocol.js';

export const runVllmNixl: PdProtocolRunner = async (pair) => {
  const outcome = await pair.callPrefill(nixlPrefillBody(pair.body, pair.path)).done;
  const verdict = pair.judgePrefill(outcome, true);
  switch (verdict.kind) {
    case 'client-gone':
      return { kind: 'client-gone', endpoint: pair.prefill };
    case 'refused':
      return pair.passBack(verdict);
    case 'failed':
      return pair.decodeOnly('prefill-failed');
    case 'ok':
      return pair.forwardDecode(nixlDecodeBody(pair.body, kvTransferParamsOf(verdict.answer.body) as Buffer));
  }
};
