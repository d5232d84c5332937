// One socket of the engine client (TCP, or TLS for an https engine): writes a request, feeds the response to
// ./response-parser.ts, reports to the request's handler, runs the connect, headers and body timers, and hands itself
// back to its pool when done.
import net from 'node:net';
import tls from 'node:tls';
import type { Clock, ClockTimer } from '../../util/clock.js';
import { ResponseParser, type ResponseEvents } from './response-parser.js';
import { H1ClientError, P_BODY, P_CONNECT, P_DONE, P_HEADERS, type Req } from './request.js';

/** What a connection needs of the pool that owns it (./pool.ts). */
export interface ConnectionOwner {
  readonly host: string;
  readonly port: number;
  /** 0 = none; for TLS it covers the handshake too */
  readonly connectTimeoutMs: number;
  /** what the connect, headers and body timers run on */
  readonly clock: Clock;
  /** tls.connect's options for an https engine; undefined for http */
  readonly tls: tls.ConnectionOptions | undefined;
  /** the last TLS session the engine gave, to resume */
  tlsSession: Buffer | undefined;
  readonly destroyed: boolean;
  /** the connection finished a response and may carry another */
  reuse(conn: Conn): void;
  /** the connection may no longer be handed out as idle */
  dropIdle(conn: Conn): void;
  /** the connection's socket closed */
  removed(conn: Conn): void;
  /** carry `req` on another connection (a new one, or the next free one under the cap) */
  schedule(req: Req): void;
}

function onConnectTimeout(conn: Conn): void {
  conn.connectTimer = undefined;
  if (conn.connected) return;
  const req = conn.req;
  if (req !== undefined) conn.fail(req, new H1ClientError(`connect timeout (${conn.core.connectTimeoutMs} ms)`, 'UND_ERR_CONNECT_TIMEOUT'));
  else conn.socket.destroy();
}

function onHeadersTimeout(conn: Conn): void {
  const req = conn.req;
  if (!conn.headersArmed || req === undefined) return;
  conn.fail(req, new H1ClientError(`headers timeout (${req.opts.headersTimeout} ms)`, 'UND_ERR_HEADERS_TIMEOUT'));
}

function onBodyTimeout(conn: Conn): void {
  const req = conn.req;
  if (!conn.bodyArmed || req === undefined) return;
  if (req.paused) {
    // the handler held the reading back for the whole body timeout: its own reader (the router's client) took no byte
    // for that long. Silence that is not the server's, so it gets a code of its own (attempt.ts: the client is gone).
    conn.fail(req, new H1ClientError(`the reader took no data for ${req.opts.bodyTimeout} ms`, 'LLM_ROUTER_CLIENT_STALLED'));
    return;
  }
  conn.fail(req, new H1ClientError(`body timeout (${req.opts.bodyTimeout} ms without data)`, 'UND_ERR_BODY_TIMEOUT'));
}

/** The timer, refreshed when its duration stays the same (no new timer object), else replaced; unref'd. */
function rearm(timer: ClockTimer | undefined, currentMs: number, ms: number, fire: (conn: Conn) => void, conn: Conn): ClockTimer {
  if (timer !== undefined && currentMs === ms) return timer.refresh();
  const clock = conn.core.clock;
  if (timer !== undefined) clock.clearTimeout(timer);
  const next = clock.setTimeout(fire, ms, conn);
  next.unref();
  return next;
}

/**
 * One socket. Its timers live as long as it does and are refreshed per request (one object per kind, not one per
 * request or chunk); "armed" flags say whether they mean anything right now, so a stale one fires at most once, idly.
 */
export class Conn implements ResponseEvents {
  readonly socket: net.Socket;
  readonly parser: ResponseParser;
  req: Req | undefined;
  connected = false;
  /** the current request went out on a socket that had served before */
  reusedForReq = false;
  /** a byte of the current request's response arrived */
  gotBytes = false;
  messageDone = false;
  ended = false;
  socketPaused = false;
  /** the rest of a read the parser stopped in (the handler paused) */
  pending: Buffer | undefined = undefined;
  idle = false;
  idleDeadline = 0;
  connectTimer: ClockTimer | undefined = undefined;
  headersTimer: ClockTimer | undefined = undefined;
  headersMs = 0;
  headersArmed = false;
  bodyTimer: ClockTimer | undefined = undefined;
  bodyMs = 0;
  bodyArmed = false;

  constructor(
    readonly core: ConnectionOwner,
    req: Req,
  ) {
    this.parser = new ResponseParser(this);
    this.req = req;
    req.conn = this;
    req.phase = P_CONNECT;
    let socket: net.Socket;
    if (core.tls === undefined) {
      socket = net.connect({ host: core.host, port: core.port, noDelay: true });
      socket.on('connect', this.sockConnect);
    } else {
      // the request goes out once the handshake is done and the engine's certificate was verified
      socket = tls.connect({ host: core.host, port: core.port, ...core.tls, ...(core.tlsSession ? { session: core.tlsSession } : {}) });
      socket.setNoDelay(true);
      socket.on('secureConnect', this.sockConnect);
      socket.on('session', this.sockSession);
    }
    this.socket = socket;
    socket.on('data', this.sockData);
    socket.on('end', this.sockEnd);
    socket.on('error', this.sockError);
    socket.on('close', this.sockClose);
    if (core.connectTimeoutMs > 0) {
      this.connectTimer = core.clock.setTimeout(onConnectTimeout, core.connectTimeoutMs, this);
      this.connectTimer.unref();
    }
  }

  /** Writes the request; the response is parsed from here on. */
  send(req: Req, reused: boolean): void {
    this.req = req;
    req.conn = this;
    req.phase = P_HEADERS;
    this.reusedForReq = reused;
    this.gotBytes = false;
    this.messageDone = false;
    this.parser.start(req.opts.method === 'HEAD');
    const ms = req.opts.headersTimeout;
    if (ms > 0) this.armHeaders(ms);
    const socket = this.socket;
    if (req.tail !== undefined) {
      socket.cork();
      socket.write(req.out as Buffer);
      socket.write(req.tail);
      socket.uncork();
    } else {
      socket.write(req.out as Buffer);
    }
  }

  private armHeaders(ms: number): void {
    this.headersArmed = true;
    this.headersTimer = rearm(this.headersTimer, this.headersMs, ms, onHeadersTimeout, this);
    this.headersMs = ms;
  }

  private armBody(ms: number): void {
    this.bodyArmed = true;
    this.bodyTimer = rearm(this.bodyTimer, this.bodyMs, ms, onBodyTimeout, this);
    this.bodyMs = ms;
  }

  /** The request no longer uses this socket (it ended, or moves to another socket). */
  detach(req: Req): void {
    if (this.req === req) this.req = undefined;
    req.conn = undefined;
    this.headersArmed = false;
    this.bodyArmed = false;
    this.pending = undefined;
  }

  /** Ends the request with an error; the socket is not reused. */
  fail(req: Req, err: Error): void {
    this.detach(req);
    req.phase = P_DONE;
    this.socket.destroy();
    req.handler.onError(err);
  }

  /** The socket failed. A reused socket that failed before any response byte gets the request again on a fresh one. */
  private socketFailed(req: Req, err: Error, retryable: boolean): void {
    if (retryable && this.reusedForReq && !this.gotBytes && !req.retried && req.phase === P_HEADERS && !this.core.destroyed) {
      // the server closed the idle connection as we wrote to it
      req.retried = true;
      this.detach(req);
      this.socket.destroy();
      this.core.schedule(req);
      return;
    }
    this.fail(req, err);
  }

  private complete(req: Req, leftover: boolean): void {
    this.detach(req);
    req.phase = P_DONE;
    // bytes beyond the response, or a request body the server did not read: the socket cannot carry another request
    if (!leftover && this.parser.keepAlive && !this.ended && this.socket.writableLength === 0) this.core.reuse(this);
    else this.socket.destroy();
    req.handler.onComplete(null);
  }

  private feed(req: Req, data: Buffer): void {
    let n: number;
    try {
      n = this.parser.execute(data);
    } catch (err) {
      // a protocol error, or a handler callback threw
      if (this.req === req) this.fail(req, err instanceof Error ? err : new Error(String(err)));
      return;
    }
    if (this.req !== req) return; // the handler aborted
    if (this.messageDone) {
      this.complete(req, n < data.length);
      return;
    }
    if (req.paused) {
      if (n < data.length) this.pending = data.subarray(n);
      if (!this.socketPaused) {
        this.socketPaused = true;
        this.socket.pause();
      }
    }
    if (req.phase === P_BODY && req.opts.bodyTimeout > 0) this.armBody(req.opts.bodyTimeout);
  }

  resumeReading(req: Req): void {
    const pending = this.pending;
    if (pending !== undefined) {
      this.pending = undefined;
      this.feed(req, pending);
      if (this.req !== req || req.paused) return;
    } else if (req.phase === P_BODY && req.opts.bodyTimeout > 0) {
      this.armBody(req.opts.bodyTimeout);
    }
    if (this.socketPaused) {
      this.socketPaused = false;
      this.socket.resume();
    }
  }

  // ResponseEvents (the parser reports here)

  onHead(statusCode: number, rawHeaders: Buffer[]): boolean {
    const req = this.req as Req;
    if (statusCode >= 200) {
      req.phase = P_BODY;
      this.headersArmed = false;
    }
    const ok = req.handler.onHeaders(statusCode, rawHeaders, req.resume);
    if (this.req !== req) return false;
    if (!ok) req.paused = true;
    return ok;
  }

  onBody(chunk: Buffer): boolean {
    const req = this.req as Req;
    const ok = req.handler.onData(chunk);
    if (this.req !== req) return false;
    if (!ok) req.paused = true;
    return ok;
  }

  onComplete(): void {
    this.messageDone = true;
  }

  // socket events

  private readonly sockConnect = (): void => {
    this.connected = true;
    if (this.connectTimer !== undefined) {
      this.core.clock.clearTimeout(this.connectTimer);
      this.connectTimer = undefined;
    }
    const req = this.req;
    if (req === undefined) this.socket.destroy();
    else this.send(req, false);
  };

  private readonly sockSession = (session: Buffer): void => {
    this.core.tlsSession = session;
  };

  private readonly sockData = (data: Buffer): void => {
    const req = this.req;
    if (req === undefined || req.phase < P_HEADERS) {
      // bytes nobody asked for (on an idle socket): the stream is out of step
      this.core.dropIdle(this);
      this.socket.destroy();
      return;
    }
    this.gotBytes = true;
    this.feed(req, data);
  };

  private readonly sockEnd = (): void => {
    this.ended = true;
    const req = this.req;
    if (req === undefined) {
      this.core.dropIdle(this);
      this.socket.destroy();
      return;
    }
    if (this.parser.finish()) {
      // a body delimited by the end of the connection
      this.complete(req, false);
      return;
    }
    this.socketFailed(req, new H1ClientError('other side closed', 'UND_ERR_SOCKET'), true);
  };

  private readonly sockError = (err: Error): void => {
    const req = this.req;
    if (req === undefined) return; // 'close' follows
    if (!this.connected) {
      this.fail(req, err); // ECONNREFUSED and the like, as Node reports them
      return;
    }
    const code = (err as NodeJS.ErrnoException).code;
    this.socketFailed(req, err, code === 'ECONNRESET' || code === 'EPIPE');
  };

  private readonly sockClose = (): void => {
    const clock = this.core.clock;
    if (this.connectTimer !== undefined) clock.clearTimeout(this.connectTimer);
    if (this.headersTimer !== undefined) clock.clearTimeout(this.headersTimer);
    if (this.bodyTimer !== undefined) clock.clearTimeout(this.bodyTimer);
    this.connectTimer = this.headersTimer = this.bodyTimer = undefined;
    const req = this.req;
    if (req !== undefined) {
      if (this.connected) this.socketFailed(req, new H1ClientError('socket closed', 'UND_ERR_SOCKET'), false);
      else this.fail(req, new H1ClientError('socket closed while connecting', 'UND_ERR_SOCKET'));
    }
    this.core.removed(this);
  };
}
