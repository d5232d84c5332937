// The fast path: the first to see each connection the router's node:http server accepts. Plain inference requests
// (a strict subset of HTTP/1.1: POST to an inference path with a Content-Length body, see request-head.ts) are parsed
// and answered here without node:http's per-request objects, which costs clearly less CPU per small request.
// Everything else (another method or path, chunked or oversized bodies, Expect, Upgrade, a head split over several
// reads, anything unusual) is handed, connection and buffered bytes together, to node:http's own connection handling,
// which answers it exactly as it would have. A connection is handed over only between requests, so answers never
// interleave. node:http keeps listening, and so keeps its connection tracking and its header and request timeouts
// for what it is handed.
import type http from 'node:http';
import type { Socket } from 'node:net';
import { errors, sendError } from '../errors.js';
import type { InboundRequest } from '../../core/exchange.js';
import { parseRequestHead, type HeadLimits, type RequestHead } from './request-head.js';
import { FastResponse, type ResponseOwner } from './response.js';

export interface FastRequest extends InboundRequest {
  readonly url: string;
  readonly headers: Record<string, string>;
  readonly socket: Socket;
}

/** Answers one request whose whole body has arrived. Must not throw (it owns its errors). */
export type FastHandler = (req: FastRequest, res: FastResponse, path: string, body: Buffer) => void;

export interface FastLaneOptions extends HeadLimits {
  /** an idle keep-alive connection is closed after this long (node:http's keepAliveTimeout) */
  readonly keepAliveTimeoutMs: number;
  /** a body must have arrived this long after its head, else 408 */
  readonly clientTimeoutMs: number;
}

/** bytes of a next (pipelined) request buffered while one is answered, before reading pauses */
const PIPELINE_BUFFER_LIMIT = 64 * 1024;

type ConnectionListener = (socket: Socket) => void;

/** a body at least this large is copied into one buffer as it arrives instead of concatenated at its end */
const COPY_INTO_BYTES = 1024 * 1024;

export class FastLane {
  /** requests answered here, and connections handed to node:http (exported as llm_router_fast_path_total) */
  answered = 0;
  handedOver = 0;
  /** the Keep-Alive: timeout=N every answer announces */
  readonly keepAliveSeconds: number;
  private readonly connections = new Set<FastConnection>();
  private closingConnections = false;
  /** node:http's own 'connection' listeners, called for a connection handed over */
  private readonly nodeListeners: ConnectionListener[];

  /** Puts the fast path in front of `server`'s connection handling (call before it listens). */
  constructor(
    private readonly server: http.Server,
    readonly options: FastLaneOptions,
    readonly handler: FastHandler,
  ) {
    this.keepAliveSeconds = Math.round(options.keepAliveTimeoutMs / 1000);
    this.nodeListeners = server.listeners('connection') as ConnectionListener[];
    server.removeAllListeners('connection');
    server.on('connection', (socket: Socket) => {
      this.connections.add(new FastConnection(socket, this));
    });
  }

  get closing(): boolean {
    return this.closingConnections;
  }

  /** Gives a connection, with the bytes read from it but not answered, to node:http. */
  handOff(conn: FastConnection, socket: Socket, buffered: Buffer | undefined): void {
    this.connections.delete(conn);
    this.handedOver++;
    for (const listener of this.nodeListeners) listener.call(this.server, socket);
    if (buffered && buffered.length > 0) socket.emit('data', buffered);
  }

  forget(conn: FastConnection): void {
    this.connections.delete(conn);
  }

  /** Closes idle connections now, and each busy one once its answer is done (shutdown). */
  closeIdleConnections(): void {
    this.closingConnections = true;
    for (const c of this.connections) c.closeIfIdle();
    this.server.closeIdleConnections();
  }

  closeAllConnections(): void {
    for (const c of this.connections) c.destroy();
    this.server.closeAllConnections();
  }
}

class FastConnection implements ResponseOwner {
  /** bytes read and not yet parsed */
  private buffered: Buffer | undefined;
  /** a head whose body is still arriving, with the body bytes so far */
  /**
   * a body still arriving: its chunks, or for a large one (an audio upload) the one buffer of its Content-Length that
   * they are copied into as they come, so that it is never held twice (chunks plus their concatenation)
   */
  private waiting: { head: RequestHead; parts: Buffer[]; size: number; timer: NodeJS.Timeout; into?: Buffer } | undefined;
  private active: FastResponse | undefined;
  private paused = false;
  private ending = false;
  private readonly onData = (chunk: Buffer): void => this.received(chunk);
  private readonly onClose = (): void => this.closed();
  /**
   * The client sent FIN. node:http's server allows half-open sockets, so nothing closes them by itself; like
   * node:http (without httpAllowHalfOpen), a client that stops sending is treated as gone: an unfinished answer is
   * cut (the engine's request is aborted) and the connection is closed.
   */
  private readonly onEnd = (): void => {
    this.ending = true;
    if (this.waiting) clearTimeout(this.waiting.timer);
    this.waiting = undefined;
    this.active?.connectionClosed();
    this.active = undefined;
    this.socket.end();
  };
  private readonly onTimeout = (): void => this.closeIfIdle();
  private readonly nextRequest = (): void => this.parse();

  constructor(
    private readonly socket: Socket,
    private readonly lane: FastLane,
  ) {
    socket.on('data', this.onData);
    socket.on('close', this.onClose);
    socket.on('end', this.onEnd);
    socket.on('error', ignore);
    socket.on('timeout', this.onTimeout);
    socket.setTimeout(lane.options.keepAliveTimeoutMs);
  }

  closeIfIdle(): void {
    if (!this.active && !this.waiting) this.socket.destroy();
  }

  destroy(): void {
    this.socket.destroy();
  }

  private received(chunk: Buffer): void {
    if (this.ending) return;
    const w = this.waiting;
    if (w?.into) {
      const take = Math.min(chunk.length, w.head.contentLength - w.size);
      chunk.copy(w.into, w.size, 0, take);
      w.size += take;
      if (w.size >= w.head.contentLength) this.bodyArrived(w, take < chunk.length ? chunk.subarray(take) : undefined);
      return;
    }
    if (w) {
      w.parts.push(chunk);
      w.size += chunk.length;
      if (w.size >= w.head.contentLength) this.bodyArrived(w);
      return;
    }
    this.buffered = this.buffered ? Buffer.concat([this.buffered, chunk]) : chunk;
    if (this.active) {
      if (this.buffered.length > PIPELINE_BUFFER_LIMIT && !this.paused) {
        this.paused = true;
        this.socket.pause();
      }
      return;
    }
    this.parse();
  }

  private parse(): void {
    const buf = this.buffered;
    if (!buf || this.active || this.ending || this.socket.destroyed) return;
    const head = parseRequestHead(buf, this.lane.options);
    if (typeof head === 'string') {
      this.handOff();
      return;
    }
    const bodyEnd = head.bodyStart + head.contentLength;
    if (buf.length >= bodyEnd) {
      this.buffered = buf.length > bodyEnd ? buf.subarray(bodyEnd) : undefined;
      this.dispatch(head, buf.subarray(head.bodyStart, bodyEnd));
      return;
    }
    this.buffered = undefined;
    const timer = setTimeout(() => this.bodyTimedOut(), this.lane.options.clientTimeoutMs);
    const first = buf.subarray(head.bodyStart);
    if (head.contentLength >= COPY_INTO_BYTES) {
      const into = Buffer.allocUnsafe(head.contentLength);
      first.copy(into, 0);
      this.waiting = { head, parts: [], size: first.length, timer, into };
      return;
    }
    this.waiting = { head, parts: [first], size: first.length, timer };
  }

  private bodyArrived(w: NonNullable<FastConnection['waiting']>, rest?: Buffer): void {
    clearTimeout(w.timer);
    this.waiting = undefined;
    if (w.into) {
      this.buffered = rest;
      this.dispatch(w.head, w.into);
      return;
    }
    const all = w.parts.length === 1 ? (w.parts[0] as Buffer) : Buffer.concat(w.parts, w.size);
    const need = w.head.contentLength;
    if (all.length > need) this.buffered = all.subarray(need);
    this.dispatch(w.head, all.length > need ? all.subarray(0, need) : all);
  }

  private bodyTimedOut(): void {
    this.waiting = undefined;
    this.ending = true;
    const res = new FastResponse(this.socket, false, 0, this);
    sendError(res, errors.clientTimeout());
  }

  private dispatch(head: RequestHead, body: Buffer): void {
    const socket = this.socket;
    socket.setTimeout(0);
    const lane = this.lane;
    const res = new FastResponse(socket, head.keepAlive && !lane.closing, lane.keepAliveSeconds, this);
    this.active = res;
    lane.answered++;
    lane.handler({ url: head.url, headers: head.headers, rawHeaders: head.rawHeaders, socket }, res, head.path, body);
  }

  responseDone(keepAlive: boolean): void {
    this.active = undefined;
    const socket = this.socket;
    if (!keepAlive || this.lane.closing) {
      this.ending = true;
      socket.end();
      return;
    }
    socket.setTimeout(this.lane.options.keepAliveTimeoutMs);
    if (this.paused) {
      this.paused = false;
      socket.resume();
    }
    // a pipelined request waits for this turn of the loop to end, so answers given synchronously cannot recurse
    if (this.buffered) setImmediate(this.nextRequest);
  }

  private handOff(): void {
    const socket = this.socket;
    socket.off('data', this.onData);
    socket.off('close', this.onClose);
    socket.off('end', this.onEnd);
    socket.off('error', ignore);
    socket.off('timeout', this.onTimeout);
    socket.setTimeout(0);
    if (this.paused) {
      this.paused = false;
      socket.resume();
    }
    const buffered = this.buffered;
    this.buffered = undefined;
    this.lane.handOff(this, socket, buffered);
  }

  private closed(): void {
    if (this.waiting) clearTimeout(this.waiting.timer);
    this.waiting = undefined;
    this.buffered = undefined;
    this.active?.connectionClosed();
    this.active = undefined;
    this.lane.forget(this);
  }
}

function ignore(): void {}
