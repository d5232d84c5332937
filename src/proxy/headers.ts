// Hop-by-hop header filtering in both directions (RFC 9110 section 7.6.1), working on Node's flat raw header arrays.

const HOP_BY_HOP = new Set([
  'connection', 'keep-alive', 'proxy-connection', 'proxy-authenticate', 'proxy-authorization',
  'te', 'trailer', 'transfer-encoding', 'upgrade', 'http2-settings',
]);

/** Header names listed in a Connection header are hop-by-hop too. */
function connectionTokens(value: string | undefined): Set<string> | undefined {
  if (!value) return undefined;
  const tokens = value.split(',').map((t) => t.trim().toLowerCase()).filter(Boolean);
  return tokens.length ? new Set(tokens) : undefined;
}

export interface RequestHeaderOptions {
  readonly requestId: string;
  readonly contentLength: number;
  /** replaces the client's Authorization when set */
  readonly engineAuthorization: string | undefined;
  readonly forwardClientAuth: boolean;
}

/** Headers for the engine: the client's, minus hop-by-hop, host, length and (by default) its credentials. */
export function upstreamRequestHeaders(raw: readonly string[], opts: RequestHeaderOptions): string[] {
  const dropAuthorization = opts.engineAuthorization !== undefined || !opts.forwardClientAuth;
  let connection: string | undefined;
  let out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = (raw[i] as string).toLowerCase();
    if (name === 'connection') connection = raw[i + 1];
    if (HOP_BY_HOP.has(name) || name === 'host' || name === 'content-length' || name === 'x-request-id' || name === 'expect') continue;
    if ((name === 'authorization' || name === 'x-api-key') && dropAuthorization) continue;
    out.push(raw[i] as string, raw[i + 1] as string);
  }
  const extra = connection === undefined || connection === 'keep-alive' || connection === 'close' ? undefined : connectionTokens(connection);
  if (extra) out = withoutNamed(out, extra);
  out.push('content-length', String(opts.contentLength), 'x-request-id', opts.requestId);
  if (opts.engineAuthorization !== undefined) out.push('authorization', opts.engineAuthorization);
  return out;
}

export interface ResponseHead {
  /** flat [name, value, ...] for ServerResponse.writeHead */
  readonly headers: string[];
  readonly contentType: string;
  /** the engine's Content-Length, or -1 when it sent none (chunked, or read until close) */
  readonly contentLength: number;
}

/** Engine response headers for the client, minus hop-by-hop; x-request-id is the router's. One pass, each Buffer decoded once. */
export function downstreamResponseHeaders(raw: readonly Buffer[], requestId: string): ResponseHead {
  let connection: string | undefined;
  let contentType = '';
  let contentLength = -1;
  const headers: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const original = (raw[i] as Buffer).toString('latin1');
    const name = original.toLowerCase();
    const value = (raw[i + 1] as Buffer).toString('latin1');
    if (name === 'content-type') contentType = value;
    else if (name === 'content-length') contentLength = Number(value);
    else if (name === 'connection') connection = value;
    if (HOP_BY_HOP.has(name) || name === 'x-request-id') continue;
    headers.push(original, value);
  }
  headers.push('x-request-id', requestId);
  if (!Number.isSafeInteger(contentLength)) contentLength = -1;
  // rare: other headers named in Connection are hop-by-hop too ("keep-alive" and "close" are the usual values)
  const extra = connection === undefined || connection === 'keep-alive' || connection === 'close' ? undefined : connectionTokens(connection);
  return { headers: extra ? withoutNamed(headers, extra) : headers, contentType, contentLength };
}

function withoutNamed(flat: readonly string[], names: ReadonlySet<string>): string[] {
  const out: string[] = [];
  for (let i = 0; i < flat.length; i += 2) if (!names.has((flat[i] as string).toLowerCase())) out.push(flat[i] as string, flat[i + 1] as string);
  return out;
}
