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
  let connection: string | undefined;
  for (let i = 0; i < raw.length; i += 2) if ((raw[i] as string).toLowerCase() === 'connection') connection = raw[i + 1];
  const extra = connectionTokens(connection);
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = (raw[i] as string).toLowerCase();
    if (HOP_BY_HOP.has(name) || name === 'host' || name === 'content-length' || name === 'x-request-id' || name === 'expect') continue;
    if (name === 'authorization' && (opts.engineAuthorization !== undefined || !opts.forwardClientAuth)) continue;
    if (extra?.has(name)) continue;
    out.push(raw[i] as string, raw[i + 1] as string);
  }
  out.push('content-length', String(opts.contentLength), 'x-request-id', opts.requestId);
  if (opts.engineAuthorization !== undefined) out.push('authorization', opts.engineAuthorization);
  return out;
}

export interface ResponseHead {
  /** flat [name, value, ...] for ServerResponse.writeHead */
  readonly headers: string[];
  readonly contentType: string;
}

/** Engine response headers for the client, minus hop-by-hop; x-request-id is the router's. */
export function downstreamResponseHeaders(raw: readonly Buffer[], requestId: string): ResponseHead {
  let connection: string | undefined;
  let contentType = '';
  for (let i = 0; i < raw.length; i += 2) {
    const name = (raw[i] as Buffer).toString('latin1').toLowerCase();
    if (name === 'connection') connection = (raw[i + 1] as Buffer).toString('latin1');
    else if (name === 'content-type') contentType = (raw[i + 1] as Buffer).toString('latin1');
  }
  const extra = connectionTokens(connection);
  const headers: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const original = (raw[i] as Buffer).toString('latin1');
    const name = original.toLowerCase();
    if (HOP_BY_HOP.has(name) || name === 'x-request-id' || extra?.has(name)) continue;
    headers.push(original, (raw[i + 1] as Buffer).toString('latin1'));
  }
  headers.push('x-request-id', requestId);
  return { headers, contentType };
}
