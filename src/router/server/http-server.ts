// node:http servers with the router's limits: head size, time for a client to send its request, and
// OpenAI-shaped answers for requests that fail before they reach a handler.
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { errorBody, errors, sendError, type RouterError } from './errors.js';
import { bodyLimitFor } from './multipart.js';

/** how long an idle keep-alive client connection is kept open (the fast path uses the same) */
export const KEEP_ALIVE_TIMEOUT_MS = 65_000;

export interface ServerLimits {
  readonly maxHeaderBytes: number;
  readonly clientTimeoutMs: number;
  /**
   * --max-body-bytes: a request with `Expect: 100-continue` that announces a larger Content-Length gets no
   * `100 Continue`; its handler answers 413 at once and the connection closes. Without it, 100 Continue is always sent.
   */
  readonly maxBodyBytes?: number;
  /** --max-json-body-bytes: the same for the JSON routes (all but the audio ones), when smaller */
  readonly maxJsonBodyBytes?: number;
}

const CLIENT_ERRORS: Record<string, RouterError> = {
  HPE_HEADER_OVERFLOW: {
    status: 431,
    code: 'headers_too_large',
    type: 'invalid_request_error',
    message: 'The request head is larger than the limit.',
  },
  ERR_HTTP_REQUEST_TIMEOUT: errors.clientTimeout(),
  // llhttp refuses versions other than 0.9, 1.0, 1.1 and 2.0 in a request line; the listener refuses 0.9 and 2.0
  HPE_INVALID_VERSION: errors.httpVersionNotSupported(),
};
const EXPECTATION_FAILED: RouterError = {
  status: 417,
  code: 'expectation_failed',
  type: 'invalid_request_error',
  message: 'Only "Expect: 100-continue" is supported.',
};
const CONNECT_REFUSED: RouterError = {
  status: 405,
  code: 'method_not_allowed',
  type: 'invalid_request_error',
  message: 'CONNECT is not supported: this is not a forward proxy.',
};
const BAD_REQUEST: RouterError = {
  status: 400,
  code: 'bad_request',
  type: 'invalid_request_error',
  message: 'The request is not valid HTTP.',
};

/** A whole answer for a connection node:http no longer parses (it is closed after it). */
function rawAnswer(e: RouterError): string {
  const body = errorBody(e);
  let extra = '';
  for (const [name, value] of Object.entries(e.headers ?? {})) extra += `${name}: ${value}\r\n`;
  return `HTTP/1.1 ${e.status} ${http.STATUS_CODES[e.status]}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n${extra}connection: close\r\n\r\n${body}`;
}

function answerClientError(err: Error & { code?: string }, socket: Socket): void {
  const e = CLIENT_ERRORS[err.code ?? ''] ?? BAD_REQUEST;
  // a request whose head arrived already has a response object
  const pending = (socket as Socket & { _httpMessage?: unknown })._httpMessage;
  // bytes after a request that said Connection: close are not read at all (RFC 9112 section 9.6), as the fast path does
  const afterClose = err.code === 'HPE_CLOSED_CONNECTION';
  if (pending instanceof http.ServerResponse) {
    if (pending.req.complete) {
      // the bad bytes came after a whole request that is still being answered (pipelined junk): that answer is its
      // handler's to finish; this one follows it, and then the connection closes (nothing after the junk is read).
      // An answer already sent with Connection: close (a refused request) is the last one: what came after it is not
      // read, nor answered.
      const closing = pending.headersSent && /\bclose\b/i.test(String(pending.getHeader('connection') ?? ''));
      pending.shouldKeepAlive = false;
      // before node:http's own 'finish' listener, which ends the socket of a response that closes its connection
      pending.prependOnceListener('finish', () => {
        if (!socket.writable) return;
        if (afterClose || closing) socket.end();
        else socket.end(rawAnswer(e));
      });
      pending.once('close', () => socket.destroySoon());
      return;
    }
    // the request itself is broken (its body, say): answer it here if nothing was sent yet; its handler only reads
    if (pending.headersSent || !socket.writable) socket.destroy();
    else {
      pending.shouldKeepAlive = false;
      sendError(pending, e, { connection: 'close' });
    }
    return;
  }
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  if (afterClose) socket.end();
  else socket.end(rawAnswer(e));
}

/**
 * An earlier answer on this connection closes it: a request node:http parsed behind that answer (pipelined) is not
 * served. node:http would run its handler (and send it to an engine) and then drop its answer with the connection.
 */
function behindAClosingAnswer(req: IncomingMessage, res: ServerResponse): boolean {
  const socket = req.socket;
  if (!socket.writable) return true;
  const current = (socket as Socket & { _httpMessage?: unknown })._httpMessage;
  if (!(current instanceof http.ServerResponse) || current === res) return false;
  return !current.shouldKeepAlive || /\bclose\b/i.test(String(current.getHeader('connection') ?? ''));
}

function asksForUpgrade(req: IncomingMessage): boolean {
  return req.headers.upgrade !== undefined && /(^|,)\s*upgrade\s*(,|$)/i.test(String(req.headers.connection ?? ''));
}

/** HTTP/1.1 needs exactly one Host (RFC 9112 section 3.2); only HTTP/1.0 and 1.1 are spoken here. */
function requestRefusal(req: IncomingMessage): RouterError | undefined {
  const version = req.httpVersion;
  if (version !== '1.1' && version !== '1.0') return errors.httpVersionNotSupported();
  if (version === '1.0') return undefined;
  let hosts = 0;
  const raw = req.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] as string;
    if (name.length === 4 && name.toLowerCase() === 'host') hosts++;
  }
  if (hosts === 1) return undefined;
  return errors.invalidRequest(
    hosts === 0 ? 'An HTTP/1.1 request needs a Host header.' : 'An HTTP/1.1 request may carry only one Host header.',
  );
}

export function createHttpServer(limits: ServerLimits, listener: (req: IncomingMessage, res: ServerResponse) => void): http.Server {
  const server = http.createServer(
    {
      keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
      maxHeaderSize: limits.maxHeaderBytes,
      // headers and body must arrive within the client timeout; streaming the response is not limited by it
      headersTimeout: limits.clientTimeoutMs,
      requestTimeout: limits.clientTimeoutMs,
      connectionsCheckingInterval: Math.max(100, Math.min(limits.clientTimeoutMs / 4, 30_000)),
      // the listener below answers a missing or repeated Host in the OpenAI error shape instead of Node's bare 400
      requireHostHeader: false,
    },
    (req, res) => {
      if (behindAClosingAnswer(req, res)) {
        req.resume();
        return;
      }
      const refusal = requestRefusal(req);
      // no protocol upgrade is spoken here (node:http, with no 'upgrade' listener, passes the request on as a plain
      // one), but llhttp reads nothing after an upgrade request's body: it is answered and the connection closed, or a
      // next request on it would wait forever
      if (asksForUpgrade(req)) res.shouldKeepAlive = false;
      if (refusal === undefined) return listener(req, res);
      req.resume();
      res.shouldKeepAlive = false;
      sendError(res, refusal, { connection: 'close' });
    },
  );
  server.on('clientError', answerClientError);
  // node:http sends 100 Continue by itself unless this listener is there: a body announced over the limit is refused
  // before the client sends it (the handler's body reader answers 413 from the Content-Length alone)
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
    const declared = Number(req.headers['content-length']);
    const path = (req.url ?? '').split('?', 1)[0] as string;
    const limit = limits.maxBodyBytes === undefined ? undefined : bodyLimitFor(path, limits.maxBodyBytes, limits.maxJsonBodyBytes);
    if (limit !== undefined && Number.isFinite(declared) && declared > limit) {
      // the client may or may not send the body after a final answer: the connection is not reused
      res.shouldKeepAlive = false;
    } else {
      res.writeContinue();
    }
    server.emit('request', req, res);
  });
  server.on('checkExpectation', (_req: IncomingMessage, res: ServerResponse) =>
    sendError(res, EXPECTATION_FAILED, { connection: 'close' }),
  );
  server.on('connect', (_req: IncomingMessage, socket: Socket) => {
    socket.on('error', () => undefined);
    socket.end(rawAnswer({ ...CONNECT_REFUSED, headers: { allow: 'GET, POST' } }));
  });
  return server;
}
