// The fast path's response: ServerResponse's meaning for the calls the inference path makes (ResponseSink), written
// straight to the socket. The head goes out with the first body bytes in one write, and each chunk of a chunked
// answer is framed in one write, so a small JSON answer costs one syscall.
import { EventEmitter } from 'node:events';
import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { ResponseSink } from '../../core/exchange.js';

export interface ResponseOwner {
  /** the whole answer was handed to the socket; keepAlive says whether the connection may serve another request */
  responseDone(keepAlive: boolean): void;
}

/** bodies up to this size are copied next to the head / chunk framing and written with one write() */
const COPY_LIMIT = 64 * 1024;
const INVALID_CHAR = /[\r\n\0]/;

let dateSecond = 0;
let dateValue = '';
function httpDate(): string {
  const now = Date.now();
  const second = Math.floor(now / 1000);
  if (second !== dateSecond) {
    dateSecond = second;
    dateValue = new Date(second * 1000).toUTCString();
  }
  return dateValue;
}

export class FastResponse extends EventEmitter implements ResponseSink {
  statusCode = 200;
  headersSent = false;
  writableFinished = false;
  /** headers given with setHeader before the head was built, flat */
  private fields: string[] | undefined;
  /** the head, built but not yet written (it goes out with the first bytes) */
  private head: string | undefined;
  private chunked = false;
  private closed = false;
  private drainWaiting = false;
  private readonly onSocketDrain = (): void => {
    this.drainWaiting = false;
    this.emit('drain');
  };

  constructor(
    private readonly socket: Socket,
    private keepAlive: boolean,
    private readonly keepAliveSeconds: number,
    private readonly owner: ResponseOwner,
  ) {
    super();
  }

  get destroyed(): boolean {
    return this.closed || this.socket.destroyed;
  }

  /** the connection closed; answers still unfinished are cut */
  connectionClosed(): void {
    if (this.closed) return;
    this.closed = true;
    // a finished answer already said 'close'
    if (this.writableFinished) return;
    if (this.drainWaiting) this.socket.off('drain', this.onSocketDrain);
    this.emit('close');
  }

  setHeader(name: string, value: string | number): this {
    if (this.head !== undefined || this.headersSent) throw new Error('headers already sent');
    this.fields ??= [];
    const fields = this.fields;
    const lower = name.toLowerCase();
    for (let i = 0; i < fields.length; i += 2) {
      if ((fields[i] as string).toLowerCase() === lower) {
        fields[i + 1] = String(value);
        return this;
      }
    }
    fields.push(name, String(value));
    return this;
  }

  writeHead(statusCode: number, headers: string[]): this {
    if (this.head !== undefined || this.headersSent) throw new Error('headers already sent');
    this.statusCode = statusCode;
    this.head = this.buildHead(this.fields ? mergeFields(this.fields, headers) : headers, -1);
    return this;
  }

  flushHeaders(): void {
    if (this.headersSent || this.destroyed) return;
    this.head ??= this.buildHead(this.fields ?? [], -1);
    this.send(undefined, false);
  }

  write(chunk: Buffer | string): boolean {
    if (this.destroyed || this.writableFinished) return false;
    if (!this.headersSent) this.head ??= this.buildHead(this.fields ?? [], -1);
    return this.send(typeof chunk === 'string' ? Buffer.from(chunk) : chunk, false);
  }

  end(chunk?: Buffer | string): this {
    if (this.writableFinished) return this;
    const data = chunk === undefined ? undefined : typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    if (this.destroyed) return this;
    // an answer given whole before its head was built gets a Content-Length rather than chunked framing (as node does)
    if (!this.headersSent) this.head ??= this.buildHead(this.fields ?? [], data?.length ?? 0);
    this.writableFinished = true;
    this.send(data, true);
    if (this.drainWaiting) {
      this.drainWaiting = false;
      this.socket.off('drain', this.onSocketDrain);
    }
    this.owner.responseDone(this.keepAlive);
    if (this.listenerCount('close') > 0) this.emit('close');
    return this;
  }

  destroy(): this {
    if (!this.socket.destroyed) this.socket.destroy();
    this.connectionClosed();
    return this;
  }

  private buildHead(fields: readonly string[], implicitLength: number): string {
    const status = this.statusCode;
    let head = `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Unknown'}\r\n`;
    let framed = false;
    let dated = false;
    for (let i = 0; i < fields.length; i += 2) {
      const name = fields[i] as string;
      const value = fields[i + 1] as string;
      if (INVALID_CHAR.test(name) || INVALID_CHAR.test(value))
        throw Object.assign(new TypeError(`Invalid character in header "${name}"`), { code: 'ERR_INVALID_CHAR' });
      switch (name.length) {
        case 4:
          if (name.toLowerCase() === 'date') dated = true;
          break;
        case 10:
          if (name.toLowerCase() === 'connection') {
            if (value.toLowerCase() === 'close') this.keepAlive = false;
            continue;
          }
          break;
        case 14:
          if (name.toLowerCase() === 'content-length') framed = true;
          break;
        case 17:
          if (name.toLowerCase() === 'transfer-encoding') {
            this.chunked = true;
            framed = true;
          }
          break;
      }
      head += `${name}: ${value}\r\n`;
    }
    if (!dated) head += `Date: ${httpDate()}\r\n`;
    head += this.keepAlive ? `Connection: keep-alive\r\nKeep-Alive: timeout=${this.keepAliveSeconds}\r\n` : 'Connection: close\r\n';
    const bodyless = status === 204 || status === 304 || status < 200;
    if (!framed && !bodyless) {
      if (implicitLength >= 0) head += `Content-Length: ${implicitLength}\r\n`;
      else {
        this.chunked = true;
        head += 'Transfer-Encoding: chunked\r\n';
      }
    }
    return `${head}\r\n`;
  }

  /** Writes the pending head (if any), the data framed as needed, and the final chunk when `last`: one write. */
  private send(data: Buffer | undefined, last: boolean): boolean {
    const head = this.head;
    this.head = undefined;
    this.headersSent = true;
    const size = data?.length ?? 0;
    let before = head ?? '';
    let after = '';
    if (this.chunked) {
      if (size > 0) {
        before += `${size.toString(16)}\r\n`;
        after = last ? '\r\n0\r\n\r\n' : '\r\n';
      } else if (last) {
        after = '0\r\n\r\n';
      }
    }
    let ok: boolean;
    if (size === 0) {
      const text = before + after;
      ok = text.length > 0 ? this.socket.write(text, 'latin1') : true;
    } else if (size <= COPY_LIMIT) {
      const out = Buffer.allocUnsafe(before.length + size + after.length);
      out.write(before, 0, 'latin1');
      (data as Buffer).copy(out, before.length);
      if (after.length > 0) out.write(after, before.length + size, 'latin1');
      ok = this.socket.write(out);
    } else {
      this.socket.cork();
      if (before.length > 0) this.socket.write(before, 'latin1');
      ok = this.socket.write(data as Buffer);
      if (after.length > 0) ok = this.socket.write(after, 'latin1');
      this.socket.uncork();
    }
    if (!ok && !last && !this.drainWaiting) {
      this.drainWaiting = true;
      this.socket.once('drain', this.onSocketDrain);
    }
    return ok;
  }
}

function mergeFields(set: readonly string[], given: readonly string[]): string[] {
  const out = [...given];
  const names = new Set<string>();
  for (let i = 0; i < given.length; i += 2) names.add((given[i] as string).toLowerCase());
  for (let i = 0; i < set.length; i += 2)
    if (!names.has((set[i] as string).toLowerCase())) out.push(set[i] as string, set[i + 1] as string);
  return out;
}
