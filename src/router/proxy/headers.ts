// Hop-by-hop header filtering in both directions (RFC 9110 section 7.6.1), working on Node's flat raw header arrays.
import { PREFILLER_HEADER } from '../core/pd.js';
import { TRACE_HEADERS } from '../core/trace.js';

const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'http2-settings',
]);

/** Header names listed in a Connection header are hop-by-hop too. */
function connectionTokens(value: string | undefined): Set<string> | undefined {
  if (!value) return undefined;
  const tokens = value
    .split(',')
    .map((t) => t.trim().toLowerCase())
    .filter(Boolean);
  return tokens.length ? new Set(tokens) : undefined;
}

export interface RequestHeaderOptions {
  readonly requestId: string;
  readonly contentLength: number;
  /** replaces the client's Authorization when set */
  readonly engineAuthorization: string | undefined;
  readonly forwardClientAuth: boolean;
  /**
   * tracing on: the client's traceparent and tracestate stay behind; each engine call carries its own span's context
   * instead. Tracing off: they pass through as any other header (the router is not a hop of the trace).
   */
  readonly dropTraceContext?: boolean;
}

/** Headers for the engine: the client's, minus hop-by-hop, host, length, x-prefiller-host-port and (by default) its credentials. */
export function upstreamRequestHeaders(raw: readonly string[], opts: RequestHeaderOptions): string[] {
  const dropAuthorization = opts.engineAuthorization !== undefined || !opts.forwardClientAuth;
  let connection: string | undefined;
  let out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = (raw[i] as string).toLowerCase();
    if (name === 'connection') connection = raw[i + 1];
    if (HOP_BY_HOP.has(name) || name === 'host' || name === 'content-length' || name === 'x-request-id' || name === 'expect') continue;
    if (name === PREFILLER_HEADER) continue;
    if ((name === 'authorization' || name === 'x-api-key') && dropAuthorization) continue;
    if (opts.dropTraceContext === true && TRACE_HEADERS.has(name)) continue;
    out.push(raw[i] as string, raw[i + 1] as string);
  }
  const extra =
    connection === undefined || connection === 'keep-alive' || connection === 'close' ? undefined : connectionTokens(connection);
  if (extra) out = withoutNamed(out, extra);
  out.push('content-length', String(opts.contentLength), 'x-request-id', opts.requestId);
  if (opts.engineAuthorization !== undefined) out.push('authorization', opts.engineAuthorization);
  return out;
}

export interface ResponseHead {
  /**
   * flat [name, value, ...] for ServerResponse.writeHead: the engine's headers minus hop-by-hop ones and minus its
   * framing (Content-Length, Transfer-Encoding): the router frames the answer it writes itself
   */
  readonly headers: string[];
  readonly contentType: string;
  /** the body's length when the engine framed it with one Content-Length of digits and no Transfer-Encoding, else -1 */
  readonly contentLength: number;
  /** the engine sent Transfer-Encoding */
  readonly transferEncoding: boolean;
  /**
   * the engine's framing headers contradict each other or cannot be read (two lengths, a length that is not digits,
   * a length and a transfer coding, a coding other than chunked). The engine client refuses such a response first;
   * this is the same rule again where the router decides its own framing, so no engine client can slip one through.
   */
  readonly badFraming: boolean;
}

const DIGITS = /^[0-9]{1,15}$/;

/** Engine response headers for the client, minus hop-by-hop and framing; x-request-id is the router's. One pass, each Buffer decoded once. */
export function downstreamResponseHeaders(raw: readonly Buffer[], requestId: string): ResponseHead {
  let connection: string | undefined;
  let contentType = '';
  let contentLength = -1;
  let lengths = 0;
  let codings = 0;
  let badFraming = false;
  const headers: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const original = (raw[i] as Buffer).toString('latin1');
    const name = original.toLowerCase();
    const value = (raw[i + 1] as Buffer).toString('latin1');
    if (name === 'content-type') contentType = value;
    else if (name === 'content-length') {
      lengths++;
      if (DIGITS.test(value)) contentLength = Number(value);
      else badFraming = true;
      continue;
    } else if (name === 'transfer-encoding') {
      codings++;
      if (value.toLowerCase() !== 'chunked') badFraming = true;
    } else if (name === 'connection') connection = value;
    if (HOP_BY_HOP.has(name) || name === 'x-request-id') continue;
    headers.push(original, value);
  }
  headers.push('x-request-id', requestId);
  if (lengths > 1 || codings > 1 || (lengths > 0 && codings > 0)) badFraming = true;
  if (badFraming || codings > 0) contentLength = -1;
  // rare: other headers named in Connection are hop-by-hop too ("keep-alive" and "close" are the usual values)
  const extra =
    connection === undefined || connection === 'keep-alive' || connection === 'close' ? undefined : connectionTokens(connection);
  return { headers: extra ? withoutNamed(headers, extra) : headers, contentType, contentLength, transferEncoding: codings > 0, badFraming };
}

function withoutNamed(flat: readonly string[], names: ReadonlySet<string>): string[] {
  const out: string[] = [];
  for (let i = 0; i < flat.length; i += 2)
    if (!names.has((flat[i] as string).toLowerCase())) out.push(flat[i] as string, flat[i + 1] as string);
  return out;
}
