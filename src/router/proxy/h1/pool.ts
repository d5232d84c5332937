// A small keep-alive HTTP/1.1 client pool to one origin, for the forwarding hot path (it replaces undici's Pool there:
// undici's per-chunk overhead showed in the benchmarks). It speaks the subset of undici's Dispatcher handler API that
// AttemptHandler uses. Each request goes out in one write; responses are parsed by ./response-parser.ts and their
// bodies handed on as slices of the socket's reads. One request per connection at a time (no pipelining), as many
// connections as there are requests in flight up to the cap (then requests wait in arrival order for a free one),
// idle ones reused most recently used first. This module keeps the sockets (idle list, waiting requests, sweep,
// close); a request is built in ./request.ts and carried by a ./connection.ts over TCP or TLS.
import { unbracketHost } from '../../util/host.js';
import { isIP } from 'node:net';
import type tls from 'node:tls';
import type { EngineClient, EngineClientOptions } from '../engine-client.js';
import type { EngineClientStats } from '../../core/engine.js';
import { tlsConnectOptions } from '../../config/engine-tls.js';
import { realClock, type Clock, type ClockTimer } from '../../util/clock.js';
import { Conn, type ConnectionOwner } from './connection.js';
import { H1ClientError, P_DONE, prepare, Req, type H1DispatchOptions, type H1Handler } from './request.js';

export { H1ClientError, type H1DispatchOptions, type H1Handler } from './request.js';

export interface H1PoolOptions extends EngineClientOptions {
  /** default: the real clock */
  readonly clock?: Clock;
}

/** a server's Keep-Alive: timeout=N is trusted up to N s minus this */
const KEEP_ALIVE_MARGIN_MS = 500;
/** idle sockets expiring within this much of each other are closed by the same sweep */
const SWEEP_SLACK_MS = 20;

function sweepIdle(core: PoolCore): void {
  core.sweep();
}

/** The pool's state and bookkeeping, apart from its public face. */
class PoolCore implements ConnectionOwner {
  readonly host: string;
  readonly port: number;
  readonly hostHeader: string;
  readonly connectTimeoutMs: number;
  readonly keepAliveMs: number;
  readonly maxConnections: number;
  readonly clock: Clock;
  /** for an https origin: tls.connect's options (servername included); undefined for http */
  readonly tls: tls.ConnectionOptions | undefined;
  /** the last TLS session, offered again so a new connection can skip the full handshake */
  tlsSession: Buffer | undefined = undefined;
  readonly conns = new Set<Conn>();
  /** idle sockets, most recently used last */
  readonly idle: Conn[] = [];
  /** requests waiting for a connection under the cap, oldest first (aborted ones are skipped when their turn comes) */
  private readonly waiting: Req[] = [];
  private waitingHead = 0;
  closing = false;
  destroyed = false;
  private closed: Promise<void> | undefined = undefined;
  private resolveClosed: (() => void) | undefined = undefined;
  private sweepTimer: ClockTimer | undefined = undefined;
  private sweepAt = 0;

  constructor(origin: string, opts: H1PoolOptions) {
    const url = new URL(origin);
    if (url.protocol !== 'http:' && url.protocol !== 'https:')
      throw new Error(`H1Pool speaks http and https, not ${url.protocol} (${origin})`);
    this.host = unbracketHost(url.hostname);
    const https = url.protocol === 'https:';
    this.port = url.port === '' ? (https ? 443 : 80) : Number(url.port);
    this.hostHeader = url.host;
    this.connectTimeoutMs = opts.connectTimeoutMs;
    this.keepAliveMs = opts.keepAliveTimeoutMs;
    this.maxConnections = opts.maxConnections;
    this.clock = opts.clock ?? realClock;
    // SNI names a host, never an address; certificates for addresses are checked against their IP SANs
    this.tls = https
      ? { ...tlsConnectOptions(opts.tls), ...(isIP(this.host) === 0 ? { servername: this.host } : {}), ALPNProtocols: ['http/1.1'] }
      : undefined;
  }

  dispatch(opts: H1DispatchOptions, handler: H1Handler): void {
    const req = new Req(opts, handler);
    handler.onConnect(req.abort);
    if (req.phase === P_DONE) return; // aborted at once
    let err: Error | undefined;
    if (this.closing)
      err = this.destroyed
        ? new H1ClientError('the pool was destroyed', 'UND_ERR_DESTROYED')
        : new H1ClientError('the pool is closed', 'UND_ERR_CLOSED');
    else err = prepare(req, this.hostHeader);
    if (err !== undefined) {
      req.phase = P_DONE;
      handler.onError(err);
      return;
    }
    this.schedule(req);
  }

  /** Carries the request on an idle connection, a new one, or (at the cap) the next one to be free. */
  schedule(req: Req): void {
    const idle = this.idle;
    if (idle.length > 0) {
      const now = this.clock.now();
      for (let conn = idle.pop(); conn !== undefined; conn = idle.pop()) {
        conn.idle = false;
        if (conn.idleDeadline > now && !conn.ended && !conn.socket.destroyed) {
          conn.send(req, true);
          return;
        }
        conn.socket.destroy();
      }
    }
    // a connection whose socket is closing still counts until it has closed: the cap holds at every moment
    if (this.maxConnections > 0 && this.conns.size >= this.maxConnections) {
      this.waiting.push(req);
      return;
    }
    this.conns.add(new Conn(this, req));
  }

  get queued(): number {
    let n = 0;
    for (let i = this.waitingHead; i < this.waiting.length; i++) if ((this.waiting[i] as Req).phase !== P_DONE) n++;
    return n;
  }

  /** The oldest waiting request that was not aborted meanwhile. */
  private nextWaiting(): Req | undefined {
    const waiting = this.waiting;
    while (this.waitingHead < waiting.length) {
      const req = waiting[this.waitingHead] as Req;
      waiting[this.waitingHead++] = undefined as unknown as Req;
      if (this.waitingHead === waiting.length) {
        waiting.length = 0;
        this.waitingHead = 0;
      }
      if (req.phase !== P_DONE) return req;
    }
    return undefined;
  }

  /** A socket finished a response and may carry another. */
  reuse(conn: Conn): void {
    if (conn.socketPaused) {
      conn.socketPaused = false;
      conn.socket.resume();
    }
    const next = this.waiting.length > 0 ? this.nextWaiting() : undefined;
    if (next !== undefined) {
      conn.send(next, true);
      return;
    }
    let ms = this.keepAliveMs;
    const hint = conn.parser.keepAliveHintMs;
    if (hint >= 0 && hint - KEEP_ALIVE_MARGIN_MS < ms) ms = hint - KEEP_ALIVE_MARGIN_MS;
    if (this.closing || ms <= 0) {
      conn.socket.destroy();
      return;
    }
    const deadline = this.clock.now() + ms;
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
    const clock = this.clock;
    if (this.sweepTimer !== undefined) clock.clearTimeout(this.sweepTimer);
    const delay = Math.max(1, deadline - clock.now()) + SWEEP_SLACK_MS;
    this.sweepAt = clock.now() + delay;
    this.sweepTimer = clock.setTimeout(sweepIdle, delay, this);
    this.sweepTimer.unref();
  }

  /** Closes the idle sockets whose time is up. */
  sweep(): void {
    this.sweepTimer = undefined;
    const now = this.clock.now();
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
    // a place under the cap is free: the oldest waiting request gets a new connection
    if (this.waiting.length > 0 && !this.destroyed) {
      const next = this.nextWaiting();
      if (next !== undefined) this.conns.add(new Conn(this, next));
    }
    if (this.closing && this.conns.size === 0 && this.resolveClosed !== undefined) {
      const resolve = this.resolveClosed;
      this.resolveClosed = undefined;
      resolve();
    }
  }

  close(): Promise<void> {
    if (this.closed === undefined) {
      this.closing = true;
      if (this.sweepTimer !== undefined) this.clock.clearTimeout(this.sweepTimer);
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
    for (let req = this.nextWaiting(); req !== undefined; req = this.nextWaiting()) {
      req.phase = P_DONE;
      req.handler.onError(new H1ClientError('the pool was destroyed', 'UND_ERR_DESTROYED'));
    }
    for (const conn of [...this.conns]) {
      const req = conn.req;
      if (req !== undefined) conn.fail(req, new H1ClientError('the pool was destroyed', 'UND_ERR_DESTROYED'));
      else conn.socket.destroy();
    }
    return closed;
  }
}

export class H1Pool implements EngineClient {
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

  /** requests waiting for a connection under the cap */
  get queued(): number {
    return this.core.queued;
  }

  stats(): EngineClientStats {
    const core = this.core;
    return { open: core.conns.size, busy: core.conns.size - core.idle.length, queued: core.queued };
  }
}
