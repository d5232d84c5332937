// The request bodies of the P/D protocols, made from the client's bytes: only the fields each protocol names change;
// every other byte is kept as the client sent it (src/router/proxy/json-members.ts).
import { editMembers, memberValue, type MemberEdit } from '../json-members.js';

/** What vLLM's NIXL connector wants on the prefill call: prefill here, decode elsewhere, nothing remote yet. */
const PREFILL_KV_TRANSFER_PARAMS =
  '{"do_remote_decode":true,"do_remote_prefill":false,"remote_engine_id":null,"remote_block_ids":null,"remote_host":null,"remote_port":null}';

const ONE = '1';

/**
 * vllm-nixl, prefill call: the client's body with the connector's kv_transfer_params, stream false, no stream_options,
 * one output token (max_tokens, and max_completion_tokens when present; max_output_tokens on /v1/responses), no
 * min_tokens.
 */
export function nixlPrefillBody(body: Buffer, path: string): Buffer {
  const limits: MemberEdit[] = isResponsesPath(path)
    ? [{ key: 'max_output_tokens', value: ONE }]
    : [
        { key: 'max_tokens', value: ONE },
        { key: 'max_completion_tokens', value: ONE, ifPresent: true },
      ];
  return editMembers(body, [
    { key: 'kv_transfer_params', value: PREFILL_KV_TRANSFER_PARAMS },
    { key: 'stream', value: 'false' },
    { key: 'stream_options', value: undefined },
    ...limits,
    { key: 'min_tokens', value: undefined },
  ]);
}

/** The prefill answer's top-level kv_transfer_params, as its raw bytes; undefined when absent or not an object. */
export function kvTransferParamsOf(answer: Buffer): Buffer | undefined {
  const raw = memberValue(answer, 'kv_transfer_params');
  return raw !== undefined && raw[0] === 0x7b ? raw : undefined;
}

/** The client's body without kv_transfer_params of its own (the same bytes when it has none). */
export function withoutKvTransferParams(body: Buffer): Buffer {
  return editMembers(body, [{ key: 'kv_transfer_params', value: undefined }]);
}

/** vllm-nixl, decode call: the client's body plus the prefill's kv_transfer_params, unchanged. */
export function nixlDecodeBody(body: Buffer, kvTransferParams: Buffer): Buffer {
  return editMembers(body, [{ key: 'kv_transfer_params', value: kvTransferParams }]);
}

/** sglang: the same body for prefill and decode, paired by the prefill's bootstrap address and one room number. */
export function bootstrapBody(body: Buffer, host: string, port: number, room: bigint): Buffer {
  return editMembers(body, [
    { key: 'bootstrap_host', value: JSON.stringify(host) },
    { key: 'bootstrap_port', value: String(port) },
    { key: 'bootstrap_room', value: room.toString() },
  ]);
}

function isResponsesPath(path: string): boolean {
  return path === '/v1/responses' || path.startsWith('/v1/responses?');
}
