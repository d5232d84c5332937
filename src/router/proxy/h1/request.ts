// One request of the engine client: what a caller dispatches (options and handler), the request bytes built from
// them, and the request's own state while a connection (./connection.ts) carries it.

import { isHttpToken } from '../../util/http-token.js';
import type { EngineDispatchOptions, EngineHandler } from '../engine-client.js';

export type H1DispatchOptions = EngineDispatchOptions;
export type H1Handler = EngineHandler;

/** Errors of the pool, with the codes undici uses for the same cases (classify() in attempt.ts reads them). */
export class H1ClientError extends Error {
  constructor(
    message: string,
    readonly code: string,
  ) {
    super(message);
  }
}

/** Request bodies up to this size are copied behind the head so the request is one buffer; larger ones go in one writev. */
const COPY_BODY_MAX = 32 * 1024;

/** what Node's http and undici refuse in a header value: control characters other than HTAB, and anything above latin1 */
const BAD_VALUE_RE = /[^\t\x20-\x7e\x80-\xff]/;
/** what undici refuses in a path: spaces, control characters, anything above latin1 */
const BAD_PATH_RE = /[^\u0021-\u00ff]/;

/** dispatched, waiting for a connection (new, or free under the pool's cap) */
const P_NEW = 0;
export const P_CONNECT = 1;
export const P_HEADERS = 2;
export const P_BODY = 3;
export const P_DONE = 4;

/** What a request needs of the connection carrying it. */
export interface RequestCarrier {
  readonly socket: { destroy(): void };
  /** the request no longer uses this connection */
  detach(req: Req): void;
  /** the handler resumed: parse what was held back and read on */
  resumeReading(req: Req): void;
}

/** One dispatched request, from dispatch() until its handler completed or errored. */
export class Req {
  phase = P_NEW;
  conn: RequestCarrier | undefined = undefined;
  paused = false;
  retried = false;
  /** the request head, and the body behind it unless it is in `tail` */
  out: Buffer | undefined = undefined;
  tail: Buffer | undefined = undefined;

  constructor(
    readonly opts: H1DispatchOptions,
    readonly handler: H1Handler,
  ) {}

  readonly abort = (err?: Error): void => {
    if (this.phase === P_DONE) return;
    this.phase = P_DONE;
    const conn = this.conn;
    if (conn !== undefined) {
      conn.detach(this);
      conn.socket.destroy();
    }
    this.handler.onError(err ?? new Error('aborted'));
  };

  readonly resume = (): void => {
    if (!this.paused) return;
    this.paused = false;
    const conn = this.conn;
    if (conn !== undefined && this.phase !== P_DONE) conn.resumeReading(this);
  };
}

/** Builds the request bytes; an Error when the request cannot be written as given. */
export function prepare(req: Req, host: string): Error | undefined {
  const { method, path, headers, body } = req.opts;
  if (!isHttpToken(method)) return new H1ClientError(`invalid request method ${JSON.stringify(method)}`, 'UND_ERR_INVALID_ARG');
  if (path.length === 0 || BAD_PATH_RE.test(path))
    return new H1ClientError(`invalid request path ${JSON.stringify(path)}`, 'UND_ERR_INVALID_ARG');
  if (headers.length % 2 !== 0) return new H1ClientError('headers must be name/value pairs', 'UND_ERR_INVALID_ARG');
  let head = method + ' ' + path + ' HTTP/1.1\r\nhost: ' + host + '\r\n';
  for (let i = 0; i < headers.length; i += 2) {
    const name = headers[i] as string;
    const value = headers[i + 1] as string;
    if (!isHttpToken(name)) return new H1ClientError(`invalid header name ${JSON.stringify(name)}`, 'UND_ERR_INVALID_ARG');
    if (BAD_VALUE_RE.test(value)) return new H1ClientError(`invalid value of header ${name}`, 'UND_ERR_INVALID_ARG');
    head += name + ': ' + value + '\r\n';
  }
  head += '\r\n';
  if (body !== undefined && body.length > 0) {
    if (body.length <= COPY_BODY_MAX) {
      const out = Buffer.allocUnsafe(head.length + body.length);
      out.write(head, 0, 'latin1');
      body.copy(out, head.length);
      req.out = out;
    } else {
      req.out = Buffer.from(head, 'latin1');
      req.tail = body;
    }
  } else {
    req.out = Buffer.from(head, 'latin1');
  }
  return undefined;
}
