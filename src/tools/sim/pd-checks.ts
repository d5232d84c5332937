// The simulator's strict reading of the P/D protocols (pure): what a prefill request must look like, and which P/D
// fields a decode request carries. Malformed fields are refused (400); absent or incomplete ones make a decode engine
// compute the prompt itself, as vLLM does when it logs "Got invalid KVTransferParams".

export class MalformedPd extends Error {}

/** The kv_transfer_params vLLM's NIXL connector wants on a prefill call (the simulator's own reading of it). */
export const NIXL_PREFILL_PARAMS: Readonly<Record<string, unknown>> = {
  do_remote_decode: true,
  do_remote_prefill: false,
  remote_engine_id: null,
  remote_block_ids: null,
  remote_host: null,
  remote_port: null,
};

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Throws MalformedPd unless `body` is a vllm-nixl prefill request for `path`. */
export function checkNixlPrefill(body: Record<string, unknown>, path: string): void {
  const params = body.kv_transfer_params;
  if (!isObject(params)) throw new MalformedPd('a prefill request needs kv_transfer_params (an object)');
  for (const [k, v] of Object.entries(NIXL_PREFILL_PARAMS))
    if (params[k] !== v) throw new MalformedPd(`kv_transfer_params.${k} must be ${JSON.stringify(v)} on a prefill request`);
  if (body.stream !== false) throw new MalformedPd('a prefill request must have "stream": false');
  if ('stream_options' in body) throw new MalformedPd('a prefill request must not have stream_options');
  if ('min_tokens' in body) throw new MalformedPd('a prefill request must not have min_tokens');
  if (path === '/v1/responses') {
    if (body.max_output_tokens !== 1) throw new MalformedPd('a /v1/responses prefill request must have "max_output_tokens": 1');
  } else {
    if (body.max_tokens !== 1) throw new MalformedPd('a prefill request must have "max_tokens": 1');
    if ('max_completion_tokens' in body && body.max_completion_tokens !== 1)
      throw new MalformedPd('a prefill request with max_completion_tokens must set it to 1');
  }
}

/** Where a decode engine pulls a prompt's KV cache from. */
export interface RemotePrefill {
  readonly engineId: string;
  readonly requestId: string;
  readonly blockIds: readonly number[];
  readonly host: string;
  readonly port: number;
}

function isPort(v: unknown): v is number {
  return typeof v === 'number' && Number.isInteger(v) && v > 0 && v < 65536;
}

/**
 * A decode request's kv_transfer_params: undefined when there are none or they do not ask for a remote prefill, or
 * when a remote_* field is missing (the engine computes the prompt itself); MalformedPd when they are of the wrong shape.
 */
export function readNixlParams(value: unknown): RemotePrefill | undefined {
  if (value === undefined || value === null) return undefined;
  if (!isObject(value)) throw new MalformedPd('kv_transfer_params must be an object');
  if (value.do_remote_prefill !== true) return undefined;
  const {
    remote_engine_id: engineId,
    remote_request_id: requestId,
    remote_block_ids: blocks,
    remote_host: host,
    remote_port: port,
  } = value;
  if ([engineId, requestId, blocks, host, port].some((v) => v === undefined || v === null)) return undefined;
  if (typeof engineId !== 'string' || typeof requestId !== 'string')
    throw new MalformedPd('remote_engine_id and remote_request_id must be strings');
  if (!Array.isArray(blocks) || !blocks.every((b) => Number.isInteger(b) && b >= 0))
    throw new MalformedPd('remote_block_ids must be a list of block numbers');
  if (typeof host !== 'string' || host === '') throw new MalformedPd('remote_host must be a host name or address');
  if (!isPort(port)) throw new MalformedPd('remote_port must be a port number');
  return { engineId, requestId, blockIds: blocks as number[], host, port };
}

/** SGLang's bootstrap fields: the prefill's bootstrap address and the room both halves meet in. */
export interface Bootstrap {
  readonly host: string;
  readonly port: number;
  /** decimal digits: rooms go beyond 2^53 */
  readonly room: string;
}

const ROOM_LIMIT = 1n << 63n;

/** Reads bootstrap_room's digits from the raw body (JSON.parse would round a room beyond 2^53). */
function roomDigits(raw: string): string | undefined {
  const matches = [...raw.matchAll(/"bootstrap_room"\s*:\s*(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)/g)];
  return matches.at(-1)?.[1];
}

/** undefined when the body has no bootstrap fields at all; MalformedPd when some are missing or of the wrong shape. */
export function readBootstrap(body: Record<string, unknown>, raw: string): Bootstrap | undefined {
  const { bootstrap_host: host, bootstrap_port: port, bootstrap_room: room } = body;
  if (host === undefined && port === undefined && room === undefined) return undefined;
  if (typeof host !== 'string' || host === '') throw new MalformedPd('bootstrap_host must be the prefill host');
  if (!isPort(port)) throw new MalformedPd('bootstrap_port must be a port number');
  const digits = roomDigits(raw);
  // compared as digits: a room near 2^63 parses to a number rounded up to 2^63
  if (typeof room !== 'number' || digits === undefined || !/^\d+$/.test(digits) || BigInt(digits) >= ROOM_LIMIT)
    throw new MalformedPd('bootstrap_room must be a whole number in [0, 2^63)');
  return { host, port, room: digits };
}

/** The x-prefiller-host-port header of llm-d's sidecar: the first of a comma-separated list of HOST:PORT. */
export function readPrefillerHeader(value: string | string[] | undefined): { host: string; port: number } | undefined {
  if (value === undefined) return undefined;
  const first = (Array.isArray(value) ? value[0] : value)?.split(',')[0]?.trim() ?? '';
  const m = /^(\[[0-9a-fA-F:.]+\]|[^:\s[\]]+):(\d{1,5})$/.exec(first);
  const port = Number(m?.[2]);
  if (!m || !isPort(port)) throw new MalformedPd('x-prefiller-host-port must be HOST:PORT');
  return { host: m[1] as string, port };
}
