// The SERVER span of one inference request (tracing on), in the HTTP and GenAI semantic conventions' names: method,
// route, the Host it was sent to, the request id; the model asked for and the one it resolved to, stream or not; the
// status and the router's error code when it answered itself. The stage spans of the pipeline are its children.
// Nothing from the body but `model` and `stream`; no header but Host and the W3C trace context it continues.
import type { InboundRequest } from '../core/exchange.js';
import type { RequestTracer, TraceSpan } from '../core/trace.js';
import {
  ERROR_CODE,
  ERROR_TYPE,
  GEN_AI_REQUEST_MODEL,
  HTTP_REQUEST_METHOD,
  HTTP_RESPONSE_STATUS_CODE,
  HTTP_ROUTE,
  REQUEST_ID,
  RESOLVED_MODEL,
  SERVER_ADDRESS,
  SERVER_PORT,
  STREAM,
} from '../tracing/attributes.js';
import { loggable } from '../util/log.js';

function hostOf(req: InboundRequest): { address: string; port?: number } | undefined {
  const host = req.headers.host;
  if (typeof host !== 'string' || host.length === 0 || host.length > 300) return undefined;
  const m = /^(\[[^\]]*\]|[^:]*)(?::([0-9]{1,5}))?$/.exec(host);
  if (!m) return undefined;
  const address = (m[1] as string).replace(/^\[|\]$/g, '');
  return m[2] !== undefined ? { address, port: Number(m[2]) } : { address };
}

export function startRequestSpan(tracer: RequestTracer, req: InboundRequest, path: string, requestId: string): TraceSpan {
  const host = hostOf(req);
  return tracer.request(`POST ${path}`, req.headers, {
    [HTTP_REQUEST_METHOD]: 'POST',
    [HTTP_ROUTE]: path,
    [REQUEST_ID]: requestId,
    ...(host ? { [SERVER_ADDRESS]: host.address, ...(host.port !== undefined ? { [SERVER_PORT]: host.port } : {}) } : {}),
  });
}

/** What the parsed body says: the model asked for (a name, made loggable) and whether the answer streams. */
export function requestParsed(span: TraceSpan, model: string, body: Readonly<Record<string, unknown>>): void {
  span.set(GEN_AI_REQUEST_MODEL, loggable(model));
  span.set(STREAM, body.stream === true);
}

/** Ends the request's span: its status, and the router's own error code when it answered itself. */
export function endRequestSpan(span: TraceSpan, status: number, code: string | undefined, resolvedModel: string): void {
  span.set(HTTP_RESPONSE_STATUS_CODE, status);
  if (resolvedModel !== '') span.set(RESOLVED_MODEL, resolvedModel);
  if (code !== undefined) span.set(ERROR_CODE, code);
  if (status >= 500) {
    span.set(ERROR_TYPE, code ?? String(status));
    span.fail(code ?? `answered ${status}`);
  }
  span.end();
}
