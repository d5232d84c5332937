// node:http servers with the router's limits: head size, time for a client to send its request, and
// OpenAI-shaped answers for requests that fail before they reach a handler.
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { errorBody, errors, sendError, type RouterError } from './errors.js';

/** how long an idle keep-alive client connection is kept open (the fast path uses the same) */
export const KEEP_ALIVE_TIMEOUT_MS = 65_000;

export interface ServerLimits {
  readonly maxHeaderBytes: number;
  readonly clientTimeoutMs: number;
}

const CLIENT_ERRORS: Record<string, RouterError> = {
  HPE_HEADER_OVERFLOW: { status: 431, code: 'headers_too_large', type: 'invalid_request_error', message: 'The request head is larger than the limit.' },
  ERR_HTTP_REQUEST_TIMEOUT: errors.clientTimeout(),
};
const EXPECTATION_FAILED: RouterError = {
  status: 417, code: 'expectation_failed', type: 'invalid_request_error', message: 'Only "Expect: 100-continue" is supported.',
};
const CONNECT_REFUSED: RouterError = {
  status: 405, code: 'method_not_allowed', type: 'invalid_request_error', message: 'CONNECT is not supported: this is not a forward proxy.',
};
const BAD_REQUEST: RouterError = { status: 400, code: 'bad_request', type: 'invalid_request_error', message: 'The request is not valid HTTP.' };

function answerClientError(err: Error & { code?: string }, socket: Socket): void {
  const e = CLIENT_ERRORS[err.code ?? ''] ?? BAD_REQUEST;
  // a request whose head arrived already has a response object: answer through it if nothing was sent yet
  const pending = (socket as Socket & { _httpMessage?: unknown })._httpMessage;
  if (pending instanceof http.ServerResponse) {
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
  const body = errorBody(e);
  socket.end(
    `HTTP/1.1 ${e.status} ${http.STATUS_CODES[e.status]}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
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
      // routing needs no Host header; answering a request without one beats Node's bare 400
      requireHostHeader: false,
    },
    listener,
  );
  server.on('clientError', answerClientError);
  server.on('checkExpectation', (_req: IncomingMessage, res: ServerResponse) => sendError(res, EXPECTATION_FAILED, { connection: 'close' }));
  server.on('connect', (_req: IncomingMessage, socket: Socket) => {
    const body = errorBody(CONNECT_REFUSED);
    socket.on('error', () => undefined);
    socket.end(`HTTP/1.1 405 Method Not Allowed\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nallow: GET, POST\r\nconnection: close\r\n\r\n${body}`);
  });
  return server;
}
