// OpenAI-shaped error bodies with stable codes. Every error a client sees from the router itself comes from here.
import type { ResponseSink } from '../core/exchange.js';
import { PRIORITY_MAX, PRIORITY_MIN, TENANT_MAX_CHARS } from '../core/flow.js';
import type { UnavailableWhy } from '../core/model.js';

export type ErrorType = 'invalid_request_error' | 'authentication_error' | 'rate_limit_error' | 'server_error' | 'service_unavailable';

export interface RouterError {
  readonly status: number;
  readonly code: string;
  readonly type: ErrorType;
  readonly message: string;
  readonly param?: string | null;
  readonly headers?: Readonly<Record<string, string>>;
}

export function errorBody(err: RouterError): string {
  return JSON.stringify({ error: { message: err.message, type: err.type, param: err.param ?? null, code: err.code } });
}

/** Writes the error as the whole response. Safe to call only before headers were sent. */
export function sendError(res: ResponseSink, err: RouterError, extraHeaders?: Readonly<Record<string, string>>): void {
  const body = errorBody(err);
  res.statusCode = err.status;
  res.setHeader('content-type', 'application/json');
  res.setHeader('content-length', Buffer.byteLength(body));
  if (err.headers) for (const [k, v] of Object.entries(err.headers)) res.setHeader(k, v);
  if (extraHeaders) for (const [k, v] of Object.entries(extraHeaders)) res.setHeader(k, v);
  res.end(body);
}

/**
 * A model's state and why, in words a client may read: "unavailable: the engine serves \"X\"; declare that name or an
 * alias", "unreachable for 14 s", or the state. Never an engine's address or its errors (SECURITY.md).
 */
export function stateWords(state: string, why: UnavailableWhy | undefined): string {
  if (why?.servesInstead?.length)
    return `${state}: the engine serves ${why.servesInstead.map((n) => JSON.stringify(n)).join(', ')}; declare that name or an alias`;
  if (why?.unreachableFor !== undefined) return why.unreachableFor > 0 ? `unreachable for ${why.unreachableFor} s` : 'unreachable';
  return state;
}

/** "a", "a" or "b", "a", "b" or "c" */
function orList(names: readonly string[]): string {
  const quoted = names.map((n) => JSON.stringify(n));
  return quoted.length === 1 ? (quoted[0] as string) : `${quoted.slice(0, -1).join(', ')} or ${quoted.at(-1)}`;
}

export const errors = {
  clientTimeout: (): RouterError => ({
    status: 408,
    code: 'client_timeout',
    type: 'invalid_request_error',
    message: 'The request was not received in time.',
  }),
  invalidJson: (detail: string): RouterError => ({
    status: 400,
    code: 'invalid_json',
    type: 'invalid_request_error',
    message: `The request body must be a JSON object: ${detail}`,
  }),
  modelRequired: (detail = 'the request body has no "model" field'): RouterError => ({
    status: 400,
    code: 'model_required',
    type: 'invalid_request_error',
    param: 'model',
    message: `A model is required: ${detail}.`,
  }),
  invalidMultipart: (detail: string): RouterError => ({
    status: 400,
    code: 'invalid_multipart',
    type: 'invalid_request_error',
    message: `The request body is not valid multipart/form-data: ${detail}.`,
  }),
  bodyTooLarge: (limit: number): RouterError => ({
    status: 413,
    code: 'body_too_large',
    type: 'invalid_request_error',
    message: `The request body is larger than the limit of ${limit} bytes.`,
  }),
  modelNotFound: (model: string, similar: readonly string[] = []): RouterError => ({
    status: 404,
    code: 'model_not_found',
    type: 'invalid_request_error',
    param: 'model',
    message: `The model ${JSON.stringify(model)} does not exist.${similar.length > 0 ? ` Did you mean ${orList(similar)}?` : ''}`,
  }),
  modelUnavailable: (
    model: string,
    state: string,
    retryAfterSeconds: number,
    missingRoles?: readonly string[],
    /** why, as clients may learn it: said instead of the bare state */
    why?: UnavailableWhy,
  ): RouterError => ({
    status: 503,
    code: 'model_unavailable',
    type: 'service_unavailable',
    param: 'model',
    message: missingRoles?.length
      ? `The model ${JSON.stringify(model)} is served P/D and has no ready ${missingRoles.join(' or ')} engine (${stateWords(state, why)}); retry after ${retryAfterSeconds} s.`
      : `The model ${JSON.stringify(model)} exists but has no ready engine (${stateWords(state, why)}); retry after ${retryAfterSeconds} s.`,
    headers: { 'retry-after': String(retryAfterSeconds), 'x-llm-router-model-state': state },
  }),
  queueFull: (model: string, retryAfterSeconds: number): RouterError => ({
    status: 429,
    code: 'queue_full',
    type: 'rate_limit_error',
    param: 'model',
    message: `Too many requests are already waiting for ${JSON.stringify(model)} to start; retry after ${retryAfterSeconds} s.`,
    headers: { 'retry-after': String(retryAfterSeconds) },
  }),
  /** flow control: a sheddable request (negative priority) while the model's engines are saturated */
  shed: (model: string, retryAfterSeconds: number): RouterError =>
    flowRefusal(
      429,
      'overloaded',
      retryAfterSeconds,
      `The engines of ${JSON.stringify(model)} are saturated and this request is sheddable (negative priority)`,
    ),
  /** flow control: too many requests (or bytes) already wait for room on the model's engines */
  flowQueueFull: (model: string, retryAfterSeconds: number): RouterError =>
    flowRefusal(
      429,
      'queue_full',
      retryAfterSeconds,
      `The engines of ${JSON.stringify(model)} are saturated and too many requests already wait for them`,
    ),
  /** flow control: the request waited --flow-queue-timeout for room on the model's engines */
  queueTimeout: (model: string, retryAfterSeconds: number): RouterError =>
    flowRefusal(
      503,
      'queue_timeout',
      retryAfterSeconds,
      `The engines of ${JSON.stringify(model)} stayed saturated for as long as a request may wait`,
    ),
  /** flow control: the router is shutting down; the request waited and was not served here */
  flowStopped: (model: string, retryAfterSeconds: number): RouterError => ({
    ...flowRefusal(
      503,
      'model_unavailable',
      retryAfterSeconds,
      `This router is shutting down; ${JSON.stringify(model)} is served by its other replicas`,
    ),
    headers: { 'retry-after': String(retryAfterSeconds), 'x-llm-router-model-state': 'ready' },
  }),
  discoveryNotSynced: (model: string): RouterError => ({
    status: 503,
    code: 'model_unavailable',
    type: 'service_unavailable',
    param: 'model',
    message: `The router has not finished listing its engines yet, so it cannot tell whether ${JSON.stringify(model)} exists; retry shortly.`,
    headers: { 'retry-after': '1', 'x-llm-router-model-state': 'unavailable' },
  }),
  /** `basic`: a page a browser opens, which then asks its user for the key (any user name, the key as password) */
  invalidApiKey: (challenge: 'bearer' | 'basic' = 'bearer'): RouterError => ({
    status: 401,
    code: 'invalid_api_key',
    type: 'authentication_error',
    message: 'A valid API key is required: send it as Authorization: Bearer KEY.',
    headers: { 'www-authenticate': challenge === 'basic' ? 'Basic realm="llm-router", charset="UTF-8"' : 'Bearer' },
  }),
  rateLimited: (retryAfterSeconds: number): RouterError => ({
    status: 429,
    code: 'rate_limited',
    type: 'rate_limit_error',
    message: `Too many requests for this API key; retry after ${retryAfterSeconds} s.`,
    headers: { 'retry-after': String(retryAfterSeconds) },
  }),
  overloaded: (): RouterError => ({
    status: 429,
    code: 'overloaded',
    type: 'rate_limit_error',
    message: 'The router is at its limit of concurrent requests; retry shortly.',
    headers: { 'retry-after': '1' },
  }),
  notFound: (path: string): RouterError => ({
    status: 404,
    code: 'not_found',
    type: 'invalid_request_error',
    message: `No route for ${path}.`,
  }),
  methodNotAllowed: (method: string, path: string, allowed: string): RouterError => ({
    status: 405,
    code: 'method_not_allowed',
    type: 'invalid_request_error',
    message: `${method} is not allowed on ${path}; use ${allowed}.`,
    headers: { allow: allowed },
  }),
  upstreamUnreachable: (model: string): RouterError => ({
    status: 502,
    code: 'upstream_unavailable',
    type: 'server_error',
    message: `No engine for model ${JSON.stringify(model)} could be reached.`,
  }),
  /** `engineStatus`: what the engine answered the load with (undefined: it did not answer); its words stay in the logs */
  adapterLoadFailed: (model: string, engineStatus: number | undefined): RouterError => ({
    status: 502,
    code: 'adapter_load_failed',
    type: 'server_error',
    param: 'model',
    message: `The engine could not load the adapter ${JSON.stringify(model)} (${engineStatus === undefined ? 'it did not answer' : `it answered ${engineStatus}`}); the router's log and its operator's view say why.`,
  }),
  adapterUnavailable: (model: string, detail: string, retryAfterSeconds: number): RouterError => ({
    status: 503,
    code: 'model_unavailable',
    type: 'service_unavailable',
    param: 'model',
    message: `The adapter ${JSON.stringify(model)} cannot be loaded now (${detail}); retry after ${retryAfterSeconds} s.`,
    headers: { 'retry-after': String(retryAfterSeconds), 'x-llm-router-model-state': 'unavailable' },
  }),
  adapterNotHeld: (model: string): RouterError => ({
    status: 502,
    code: 'upstream_unavailable',
    type: 'server_error',
    param: 'model',
    message: `The engines that should hold the adapter ${JSON.stringify(model)} answered that they do not serve it.`,
  }),
  upstreamProtocolError: (model: string): RouterError => ({
    status: 502,
    code: 'upstream_protocol_error',
    type: 'server_error',
    message: `The engine for model ${JSON.stringify(model)} sent an answer that breaks HTTP/1.1's framing rules; it was not passed on.`,
  }),
  invalidRequest: (message: string): RouterError => ({
    status: 400,
    code: 'invalid_request',
    type: 'invalid_request_error',
    message,
  }),
  /** a bad x-llm-router-priority header */
  invalidPriority: (detail: string): RouterError => ({
    status: 400,
    code: 'invalid_priority',
    type: 'invalid_request_error',
    param: 'x-llm-router-priority',
    message: `The x-llm-router-priority header must be an integer from ${PRIORITY_MIN} to ${PRIORITY_MAX}: ${detail}.`,
  }),
  /** a bad x-gateway-inference-fairness-id header (read without API keys or from a trusted key) */
  invalidFairnessId: (detail: string): RouterError => ({
    status: 400,
    code: 'invalid_fairness_id',
    type: 'invalid_request_error',
    param: 'x-gateway-inference-fairness-id',
    message: `The x-gateway-inference-fairness-id header must be 1 to ${TENANT_MAX_CHARS} printable ASCII characters, not starting or ending with a space: ${detail}.`,
  }),
  httpVersionNotSupported: (): RouterError => ({
    status: 505,
    code: 'http_version_not_supported',
    type: 'invalid_request_error',
    message: 'Only HTTP/1.1 and HTTP/1.0 are supported.',
  }),
  upstreamTimeout: (what: string): RouterError => ({
    status: 504,
    code: 'upstream_timeout',
    type: 'server_error',
    message: `The engine did not answer in time (${what}).`,
  }),
  badRequest: (code: string, message: string): RouterError => ({
    status: 400,
    code,
    type: 'invalid_request_error',
    message,
  }),
  tooManyStreams: (limit: number): RouterError => ({
    status: 503,
    code: 'too_many_streams',
    type: 'service_unavailable',
    message: `This router process already serves ${limit} /events streams; close one (another dashboard tab) or retry later.`,
    headers: { 'retry-after': '5' },
  }),
  shuttingDown: (): RouterError => ({
    status: 503,
    code: 'shutting_down',
    type: 'service_unavailable',
    message: 'The router is shutting down; retry on another replica.',
    headers: { 'retry-after': '1', connection: 'close' },
  }),
};

/** A flow-control refusal: retryable, about the model, with Retry-After in the header and the message. */
function flowRefusal(status: 429 | 503, code: string, retryAfterSeconds: number, reason: string): RouterError {
  return {
    status,
    code,
    type: status === 429 ? 'rate_limit_error' : 'service_unavailable',
    param: 'model',
    message: `${reason}; retry after ${retryAfterSeconds} s.`,
    headers: { 'retry-after': String(retryAfterSeconds) },
  };
}
