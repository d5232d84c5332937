// Raw HTTP/1.1 on loopback for tests that must see the exact bytes: nothing in a client library tidies them.
// A reader of the router's answers (status, headers, body as framed, and where each answer ends in the stream),
// a connection that writes bytes and reads answers one after another, a one-shot exchange, and a request head sent
// alone to see the first answer to it (100 Continue or a refusal).
import net from 'node:net';

export interface RawAnswer {
  /** 0 when the connection closed without an answer */
  readonly status: number;
  /** lower-case names; a repeated name keeps its last value */
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Buffer;
  /** how the body was framed: content-length, chunked, none (204/304/HEAD), close (read until the end) */
  readonly framing: 'content-length' | 'chunked' | 'none' | 'close';
  /** the body framing was cut short by the end of the connection */
  readonly truncated: boolean;
}

const NO_ANSWER: RawAnswer = { status: 0, headers: {}, body: Buffer.alloc(0), framing: 'close', truncated: true };

/** Index just past a complete chunked body starting at `from`, or -1 while incomplete (or malformed). */
function chunkedEnd(buf: Buffer, from: number, parts: Buffer[]): number {
  let at = from;
  for (;;) {
    const eol = buf.indexOf('\r\n', at);
    if (eol < 0) return -1;
    const size = Number.parseInt(buf.subarray(at, eol).toString('latin1'), 16);
    if (!Number.isFinite(size)) return -1;
    if (size === 0) {
      const end = buf.indexOf('\r\n\r\n', eol);
      return end < 0 ? -1 : end + 4;
    }
    if (buf.length < eol + 2 + size + 2) {
      parts.push(buf.subarray(eol + 2, Math.min(buf.length, eol + 2 + size)));
      return -1;
    }
    parts.push(buf.subarray(eol + 2, eol + 2 + size));
    at = eol + 2 + size + 2;
  }
}

/**
 * The final (non-1xx) answer starting at buf[from], with the offset just past it; undefined while it is incomplete.
 * `closed`: the server closed, so what is there is all (an incomplete answer is returned, marked truncated).
 */
export function readAnswer(
  buf: Buffer,
  from: number,
  opts: { head?: boolean; closed?: boolean } = {},
): { answer: RawAnswer; end: number } | undefined {
  const closed = opts.closed ?? false;
  let at = from;
  for (;;) {
    const headEnd = buf.indexOf('\r\n\r\n', at);
    if (headEnd < 0) return closed ? { answer: { ...NO_ANSWER, body: buf.subarray(at) }, end: buf.length } : undefined;
    const lines = buf.subarray(at, headEnd).toString('latin1').split('\r\n');
    const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? '')?.[1] ?? 0);
    const headers: Record<string, string> = {};
    for (const line of lines.slice(1)) {
      const i = line.indexOf(':');
      if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
    }
    const bodyAt = headEnd + 4;
    if (status >= 100 && status < 200) {
      at = bodyAt;
      continue;
    }
    const base = { status, headers };
    if (opts.head || status === 204 || status === 304)
      return { answer: { ...base, body: Buffer.alloc(0), framing: 'none', truncated: false }, end: bodyAt };
    if (headers['transfer-encoding']?.toLowerCase().includes('chunked')) {
      const parts: Buffer[] = [];
      const done = chunkedEnd(buf, bodyAt, parts);
      if (done < 0)
        return closed
          ? { answer: { ...base, body: Buffer.concat(parts), framing: 'chunked', truncated: true }, end: buf.length }
          : undefined;
      return { answer: { ...base, body: Buffer.concat(parts), framing: 'chunked', truncated: false }, end: done };
    }
    if (headers['content-length'] !== undefined) {
      const n = Number(headers['content-length']);
      const have = buf.length - bodyAt;
      if (have < n && !closed) return undefined;
      return {
        answer: { ...base, body: buf.subarray(bodyAt, bodyAt + Math.min(n, have)), framing: 'content-length', truncated: have < n },
        end: bodyAt + Math.min(n, have),
      };
    }
    if (!closed) return undefined;
    return { answer: { ...base, body: buf.subarray(bodyAt), framing: 'close', truncated: false }, end: buf.length };
  }
}

/**
 * The server side of a raw connection: calls `onRequest` for each request that arrives on the socket (a head, then a
 * body of its Content-Length, one after another as an HTTP/1.1 server reads them).
 */
export function readRequests(socket: net.Socket, onRequest: (head: string, body: Buffer) => void): void {
  let buffered: Buffer = Buffer.alloc(0);
  socket.on('data', (data: Buffer) => {
    buffered = Buffer.concat([buffered, data]);
    for (;;) {
      const end = buffered.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = buffered.subarray(0, end).toString('latin1');
      const length = Number(/\r\ncontent-length:[ \t]*(\d+)/i.exec(head)?.[1] ?? 0);
      if (buffered.length < end + 4 + length) return;
      const body = buffered.subarray(end + 4, end + 4 + length);
      buffered = buffered.subarray(end + 4 + length);
      onRequest(head, body);
    }
  });
}

/** One client connection: write bytes, read answers in order, see whether the server closed it. */
export class RawClient {
  private buf: Buffer = Buffer.alloc(0);
  private at = 0;
  private ended = false;
  private wake: (() => void) | undefined;
  readonly closedPromise: Promise<void>;

  private constructor(private readonly socket: net.Socket) {
    socket.on('data', (b: Buffer) => {
      this.buf = this.buf.length === 0 ? b : Buffer.concat([this.buf, b]);
      this.wake?.();
    });
    socket.on('error', () => undefined); // a reset ends in 'close' as well
    this.closedPromise = new Promise((resolve) => {
      socket.on('close', () => {
        this.ended = true;
        this.wake?.();
        resolve();
      });
    });
  }

  static connect(port: number): Promise<RawClient> {
    return new Promise((resolve, reject) => {
      const socket = net.connect({ port, host: '127.0.0.1', noDelay: true });
      socket.once('error', reject);
      socket.once('connect', () => {
        socket.off('error', reject);
        resolve(new RawClient(socket));
      });
    });
  }

  /** the server closed (or reset) the connection */
  get closed(): boolean {
    return this.ended;
  }

  /** the local port of this connection (the server sees it as the remote port) */
  get localPort(): number {
    return this.socket.localPort as number;
  }

  /** every byte received so far */
  get received(): Buffer {
    return this.buf;
  }

  /** bytes received after the last answer next() returned */
  get unread(): Buffer {
    return this.buf.subarray(this.at);
  }

  write(data: Buffer | string): Promise<void> {
    return new Promise((resolve) => {
      if (this.socket.destroyed || !this.socket.writable) return resolve();
      this.socket.write(data, () => resolve());
    });
  }

  /** The next answer; undefined when the connection closed with nothing more; rejects after `timeoutMs`. */
  async next(timeoutMs: number, opts: { head?: boolean } = {}): Promise<RawAnswer | undefined> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const got = readAnswer(this.buf, this.at, { head: opts.head ?? false, closed: this.ended });
      if (got !== undefined) {
        if (got.end === this.at && this.ended) return undefined;
        this.at = got.end;
        return got.answer;
      }
      if (this.ended && this.at >= this.buf.length) return undefined;
      const left = deadline - Date.now();
      if (left <= 0)
        throw new Error(`no answer within ${timeoutMs} ms (unread: ${JSON.stringify(this.unread.toString('latin1').slice(0, 200))})`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.wake = () => {
          clearTimeout(timer);
          this.wake = undefined;
          resolve();
        };
      });
    }
  }

  /** The next answer, which must come: rejects when the connection closes without one, or after `timeoutMs`. */
  async answer(timeoutMs = 10_000): Promise<RawAnswer> {
    const a = await this.next(timeoutMs);
    if (a === undefined)
      throw new Error(`the connection closed without an answer (unread: ${JSON.stringify(this.unread.toString('latin1'))})`);
    return a;
  }

  /** Resolves true once the server closed the connection, false if it is still open after `timeoutMs`. */
  async closesWithin(timeoutMs: number): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs)));
    const closed = await Promise.race([this.closedPromise.then(() => true as const), timeout]);
    clearTimeout(timer);
    return closed;
  }

  end(): void {
    this.socket.end();
  }

  destroy(): void {
    this.socket.destroy();
  }
}

export interface ExchangeOptions {
  /** after writing: keep the connection open (default), half-close it (FIN), or cut it */
  readonly then?: 'wait' | 'half-close' | 'destroy';
  readonly head?: boolean;
  readonly timeoutMs?: number;
}

/** Writes the bytes on a new connection and reads one answer. Rejects if none comes in time: a hung request is a failure. */
export function exchange(port: number, data: Buffer | string, opts: ExchangeOptions = {}): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ port, host: '127.0.0.1' });
    const chunks: Buffer[] = [];
    let settled = false;
    const settle = (answer: RawAnswer | undefined, err?: Error): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      if (answer) resolve(answer);
      else reject(err);
    };
    const timeoutMs = opts.timeoutMs ?? 10_000;
    const timer = setTimeout(
      () => settle(undefined, new Error(`no answer within ${timeoutMs} ms (got ${Buffer.concat(chunks).length} bytes)`)),
      timeoutMs,
    );
    socket.on('data', (b: Buffer) => {
      chunks.push(b);
      const got = readAnswer(Buffer.concat(chunks), 0, { head: opts.head ?? false });
      if (got) settle(got.answer);
    });
    const closed = (): void =>
      settle(readAnswer(Buffer.concat(chunks), 0, { head: opts.head ?? false, closed: true })?.answer ?? NO_ANSWER);
    socket.on('end', closed);
    socket.on('close', closed);
    socket.on('error', () => undefined); // a reset after the answer (or instead of one) ends in 'close'
    socket.on('connect', () => {
      socket.write(data);
      if (opts.then === 'half-close') socket.end();
      if (opts.then === 'destroy') setTimeout(() => settle(NO_ANSWER), 50);
    });
  });
}

/** Sends a request head only and returns the first response head the server sends (within 3 s), '' if none. */
export function firstHead(port: number, head: string): Promise<string> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    let got = '';
    const done = (): void => {
      clearTimeout(timer);
      socket.destroy();
      const end = got.indexOf('\r\n\r\n');
      resolve(end < 0 ? got : got.slice(0, end));
    };
    const timer = setTimeout(done, 3_000);
    socket.on('connect', () => socket.write(head));
    socket.on('data', (d: Buffer) => {
      got += d.toString('latin1');
      if (got.includes('\r\n\r\n')) done();
    });
    socket.on('error', done);
    socket.on('close', done);
  });
}
