// A small keep-alive HTTP/1.1 client pool to one origin, for the forwarding hot path (it replaces undici's Pool there:
// undici's per-chunk overhead showed in the benchmarks). It speaks the subset of undici's Dispatcher handler API that
// AttemptHandler uses. Each request goes out in one write; responses are parsed by ./response-parser.ts and their
// bodies handed on as slices of the socket's reads. One request per connection at a time (no pipelining), as many
// connections as there are requests in flight, idle ones reused most recently used first.
import net from 'node:net';
import { ResponseParser, type ResponseEvents } from './response-parser.js';

export interface H1DispatchOptions {
  /** e.g. 'POST', 'GET' */
  readonly method: string;
  /** request-target, e.g. '/v1/chat/completions?x=1' */
  readonly path: string;
  /** flat [name, value, name, value...]; already filtered, includes content-length when there is a body; no host */
  readonly headers: readonly string[];
  readonly body: Buffer | undefined;
  /** ms from the request being written until the response head is complete; 0 = none */
  readonly headersTimeout: number;
  /** ms of silence allowed between response body reads; 0 = none */
  readonly bodyTimeout: number;
}

export interface H1Handler {
  /** called synchronously inside dispatch(), before any other callback */
  onConnect(abort: (err?: Error) => void): void;
  /** 1xx heads are reported too, then the final head; false = pause reading until resume() */
  onHeaders(statusCode: number, rawHeaders: Buffer[], resume: () => void): boolean;
  /** body bytes, already de-chunked; false = pause reading until resume() */
  onData(chunk: Buffer): boolean;
  /** the whole body arrived */
  onComplete(trailers: null): void;
  /** at most once, and never after onComplete */
  onError(err: Error): void;
}

export interface H1PoolOptions {
  /** 0 = no timeout of our own */
  readonly connectTimeoutMs: number;
  /** idle sockets are closed after this (default 4000); 0 = sockets are not kept idle */
  readonly keepAliveTimeoutMs: number;
}

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
/** a server's Keep-Alive: timeout=N is trusted up to N s minus this */
const KEEP_ALIVE_MARGIN_MS = 500;
/** idle sockets expiring within this much of each other are closed by the same sweep */
const SWEEP_SLACK_MS = 20;

const TOKEN_RE = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** what Node's http and undici refuse in a header value: control characters other than HTAB, and anything above latin1 */
const BAD_VALUE_RE = /[^\t\x20-\x7e\x80-\xff]/;
/** what undici refuses in a path: spaces, control characters, anything above latin1 */
const BAD_PATH_RE = /[^\u0021-\u00ff]/;

const P_NEW = 0;
const P_CONNECT = 1;
const P_HEADERS = 2;
const P_BODY = 3;
const P_DONE = 4;

/** One dispatched request, from dispatch() until its handler completed or errored. */
class Req {
  phase = P_NEW;
  conn: Conn | undefined = undefined;
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
function prepare(req: Req, host: string): Error | undefined {
  const { method, path, headers, body } = req.opts;
  if (!TOKEN_RE.test(method)) return new H1ClientError(`invalid request method ${JSON.stringify(method)}`, 'UND_ERR_INVALID_ARG');
  if (path.length === 0 || BAD_PATH_RE.test(path)) return new H1ClientError(`invalid request path ${JSON.stringify(path)}`, 'UND_ERR_INVALID_ARG');
  if (headers.length % 2 !== 0) return new H1ClientError('headers must be name/value pairs', 'UND_ERR_INVALID_ARG');
  let head = method + ' ' + path + ' HTTP/1.1\r\nhost: ' + host + '\r\n';
  for (let i = 0; i < headers.length; i += 2) {
    const name = headers[i] as string;
    const value = headers[i + 1] as string;
    if (!TOKEN_RE.test(name)) return new H1ClientError(`invalid header name ${JSON.stringify(name)}`, 'UND_ERR_INVALID_ARG');
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
    // the handler holds the reading back; silence is not the server's
    conn.bodyTimer?.refresh();
    return;
  }
  conn.fail(req, new H1ClientError(`body timeout (${req.opts.bodyTimeout} ms without data)`, 'UND_ERR_BODY_TIMEOUT'));
}

/** The timer, refreshed when its duration stays the same (no new timer object), else replaced; unref'd. */
function rearm(timer: NodeJS.Timeout | undefined, currentMs: number, ms: number, fire: (conn: Conn) => void, conn: Conn): NodeJS.Timeout {
  if (timer !== undefined && currentMs === ms) return timer.refresh();
  if (timer !== undefined) clearTimeout(timer);
  const next = setTimeout(fire, ms, conn);
  next.unref();
  return next;
}

/**
 * One socket. Its timers live as long as it does and are refreshed per request (one object per kind, not one per
 * request or chunk); "armed" flags say whether they mean anything right now, so a stale one fires at most once, idly.
 */
class Conn implements ResponseEvents {
  readonly socket: net.Socket;
  readonly parser: ResponseParser;
  req: Req | undefined;
  connected = false;
  /** responses completed on this socket */
  served = 0;
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
  connectTimer: NodeJS.Timeout | undefined = undefined;
  headersTimer: NodeJS.Timeout | undefined = undefined;
  headersMs = 0;
  headersArmed = false;
  bodyTimer: NodeJS.Timeout | undefined = undefined;
  bodyMs = 0;
  bodyArmed = false;

  constructor(
    readonly core: PoolCore,
    req: Req,
  ) {
    this.parser = new ResponseParser(this);
    this.req = req;
    req.conn = this;
    req.phase = P_CONNECT;
    const socket = net.connect({ host: core.host, port: core.port, noDelay: true });
    this.socket = socket;
    socket.on('connect', this.sockConnect);
    socket.on('data', this.sockData);
    socket.on('end', this.sockEnd);
    socket.on('error', this.sockError);
    socket.on('close', this.sockClose);
    if (core.connectTimeoutMs > 0) {
      this.connectTimer = setTimeout(onConnectTimeout, core.connectTimeoutMs, this);
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
      this.core.open(req);
      return;
    }
    this.fail(req, err);
  }

  private complete(req: Req, leftover: boolean): void {
    this.detach(req);
    req.phase = P_DONE;
    this.served++;
    // bytes beyond the response, or a request body the server did not read: the socket cannot carry another request
    if (!leftover && this.parser.keepAlive && !this.ended && this.socket.writableLength === 0) this.core.release(this);
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
      clearTimeout(this.connectTimer);
      this.connectTimer = undefined;
    }
    const req = this.req;
    if (req === undefined) this.socket.destroy();
    else this.send(req, false);
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
    if (this.connectTimer !== undefined) clearTimeout(this.connectTimer);
    if (this.headersTimer !== undefined) clearTimeout(this.headersTimer);
    if (this.bodyTimer !== undefined) clearTimeout(this.bodyTimer);
    this.connectTimer = this.headersTimer = this.bodyTimer = undefined;
    const req = this.req;
    if (req !== undefined) {
      if (this.connected) this.socketFailed(req, new H1ClientError('socket closed', 'UND_ERR_SOCKET'), false);
      else this.fail(req, new H1ClientError('socket closed while connecting', 'UND_ERR_SOCKET'));
    }
    this.core.removed(this);
  };
}

function sweepIdle(core: PoolCore): void {
  core.sweep();
}

/** The pool's state and bookkeeping, apart from its public face. */
class PoolCore {
  readonly host: string;
  readonly port: number;
  readonly hostHeader: string;
  readonly connectTimeoutMs: number;
  readonly keepAliveMs: number;
  readonly conns = new Set<Conn>();
  /** idle sockets, most recently used last */
  readonly idle: Conn[] = [];
  closing = false;
  destroyed = false;
  private closed: Promise<void> | undefined = undefined;
  private resolveClosed: (() => void) | undefined = undefined;
  private sweepTimer: NodeJS.Timeout | undefined = undefined;
  private sweepAt = 0;

  constructor(origin: string, opts: H1PoolOptions) {
    const url = new URL(origin);
    if (url.protocol !== 'http:') throw new Error(`H1Pool speaks plain http only, not ${url.protocol} (${origin})`);
    this.host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
    this.port = url.port === '' ? 80 : Number(url.port);
    this.hostHeader = url.host;
    this.connectTimeoutMs = opts.connectTimeoutMs;
    this.keepAliveMs = opts.keepAliveTimeoutMs ?? 4_000;
  }

  dispatch(opts: H1DispatchOptions, handler: H1Handler): void {
    const req = new Req(opts, handler);
    handler.onConnect(req.abort);
    if (req.phase === P_DONE) return; // aborted at once
    let err: Error | undefined;
    if (this.closing) err = this.destroyed ? new H1ClientError('the pool was destroyed', 'UND_ERR_DESTROYED') : new H1ClientError('the pool is closed', 'UND_ERR_CLOSED');
    else err = prepare(req, this.hostHeader);
    if (err !== undefined) {
      req.phase = P_DONE;
      handler.onError(err);
      return;
    }
    const idle = this.idle;
    if (idle.length > 0) {
      const now = Date.now();
      let conn: Conn | undefined;
      while ((conn = idle.pop()) !== undefined) {
        conn.idle = false;
        if (conn.idleDeadline > now && !conn.ended && !conn.socket.destroyed) {
          conn.send(req, true);
          return;
        }
        conn.socket.destroy();
      }
    }
    this.open(req);
  }

  open(req: Req): void {
    this.conns.add(new Conn(this, req));
  }

  /** A socket finished a response and may carry another. */
  release(conn: Conn): void {
    if (conn.socketPaused) {
      conn.socketPaused = false;
      conn.socket.resume();
    }
    let ms = this.keepAliveMs;
    const hint = conn.parser.keepAliveHintMs;
    if (hint >= 0 && hint - KEEP_ALIVE_MARGIN_MS < ms) ms = hint - KEEP_ALIVE_MARGIN_MS;
    if (this.closing || ms <= 0) {
      conn.socket.destroy();
      return;
    }
    const deadline = Date.now() + ms;
    conn.idle = true;
    conn.idleDeadline = deadline;
    this.idle.push(conn);
    if (this.sweepTimer === undefined || deadline + SWEEP_SLACK_MS < this.sweepAt) this.scheduleSweep(deadline);
  }

  dropIdle(conn: Conn): void {
    if (!conn.idle) return;
    conn.idle = false;
    const i = this.idle.lastIndexOf(conn);
    if (i >= 0) this.idle.splice(i, 1);
  }

  private scheduleSweep(deadline: number): void {
    if (this.sweepTimer !== undefined) clearTimeout(this.sweepTimer);
    const delay = Math.max(1, deadline - Date.now()) + SWEEP_SLACK_MS;
    this.sweepAt = Date.now() + delay;
    this.sweepTimer = setTimeout(sweepIdle, delay, this);
    this.sweepTimer.unref();
  }

  /** Closes the idle sockets whose time is up. */
  sweep(): void {
    this.sweepTimer = undefined;
    const now = Date.now();
    const idle = this.idle;
    let next = Infinity;
    let kept = 0;
    for (let i = 0; i < idle.length; i++) {
      const conn = idle[i] as Conn;
      if (conn.idleDeadline <= now) {
        conn.idle = false;
        conn.socket.destroy();
      } else {
        idle[kept++] = conn;
        if (conn.idleDeadline < next) next = conn.idleDeadline;
      }
    }
    idle.length = kept;
    if (kept > 0) this.scheduleSweep(next);
  }

  removed(conn: Conn): void {
    this.dropIdle(conn);
    this.conns.delete(conn);
    if (this.closing && this.conns.size === 0 && this.resolveClosed !== undefined) {
      const resolve = this.resolveClosed;
      this.resolveClosed = undefined;
      resolve();
    }
  }

  close(): Promise<void> {
    if (this.closed === undefined) {
      this.closing = true;
      if (this.sweepTimer !== undefined) clearTimeout(this.sweepTimer);
      this.sweepTimer = undefined;
      for (const conn of this.idle.splice(0)) {
        conn.idle = false;
        conn.socket.destroy();
      }
      this.closed = new Promise<void>((resolve) => {
        if (this.conns.size === 0) resolve();
        else this.resolveClosed = resolve;
      });
    }
    return this.closed;
  }

  destroy(): Promise<void> {
    this.destroyed = true;
    const closed = this.close();
    for (const conn of [...this.conns]) {
      const req = conn.req;
      if (req !== undefined) conn.fail(req, new H1ClientError('the pool was destroyed', 'UND_ERR_DESTROYED'));
      else conn.socket.destroy();
    }
    return closed;
  }
}

export class H1Pool {
  private readonly core: PoolCore;

  constructor(origin: string, opts: H1PoolOptions) {
    this.core = new PoolCore(origin, opts);
  }

  dispatch(options: H1DispatchOptions, handler: H1Handler): void {
    this.core.dispatch(options, handler);
  }

  /** No new dispatches; resolves when in-flight requests have finished and every socket is closed. */
  close(): Promise<void> {
    return this.core.close();
  }

  /** Aborts everything now (in-flight handlers get onError) and closes every socket. */
  destroy(): Promise<void> {
    return this.core.destroy();
  }

  /** open sockets: connecting, busy and idle */
  get connections(): number {
    return this.core.conns.size;
  }
}
