// An incremental HTTP/1.1 response parser (RFC 9112) for the router's upstream client. No sockets: feed it what a
// socket read gives with execute(), in pieces split anywhere; it reports each head (1xx ones too), each body slice
// (de-chunked, never copied: subarrays of the buffers it was given) and the end of the response to its sink.
//
// It is at least as strict as undici (llhttp) on framing, and stricter where an engine has no reason to be creative:
// one Content-Length of digits or one `Transfer-Encoding: chunked`, never both; no framing header on 1xx, and none
// but `Content-Length: 0` on 204/304; chunk sizes of hex digits with no extensions or white space; trailers as
// `name: value` lines; HTTP/1.0 or 1.1 only; a head of at most 16 KiB (undici's default). A response must end exactly
// where the bytes it was given end: the client never pipelines, so a byte beyond the response in the same read means
// the engine and the router disagree about where the response ends, and is an error reported *before* the event
// that would have ended the response (a caller that has written nothing yet can still answer with an error).
import { TCHAR } from '../../util/http-token.js';

export class H1ParseError extends Error {
  readonly code = 'LLM_ROUTER_H1_PARSE';
}

export interface ResponseEvents {
  /** A complete head. Informational (1xx) heads come first, then the final one. false = stop after this event. */
  onHead(statusCode: number, rawHeaders: Buffer[]): boolean;
  /** A slice of the body. false = stop after this event. */
  onBody(chunk: Buffer): boolean;
  /** The whole response arrived. Called even right after an event that returned false (nothing is left to read). */
  onComplete(): void;
}

/** undici's default (Node's --max-http-header-size) */
const DEFAULT_MAX_HEAD_SIZE = 16 * 1024;

const S_IDLE = 0;
const S_HEAD = 1;
const S_BODY_LENGTH = 2;
const S_BODY_EOF = 3;
const S_CHUNK_SIZE = 4;
const S_CHUNK_SIZE_LF = 5;
const S_CHUNK_DATA = 6;
const S_CHUNK_DATA_CR = 7;
const S_CHUNK_DATA_LF = 8;
const S_TRAILER_START = 9;
const S_TRAILER_NAME = 10;
const S_TRAILER_VALUE = 11;
const S_TRAILER_LINE_LF = 12;
const S_TRAILER_END_LF = 13;
const S_DONE = 14;

const CR = 13;
const LF = 10;
const HEAD_END = Buffer.from('\r\n\r\n', 'latin1');

const HEX = new Int8Array(256).fill(-1);
for (let i = 0; i < 10; i++) HEX[48 + i] = i;
for (let i = 0; i < 6; i++) {
  HEX[65 + i] = 10 + i;
  HEX[97 + i] = 10 + i;
}

/** field-value bytes: HTAB, visible ASCII, SP, obs-text; no other control characters */
function badValueByte(c: number): boolean {
  return (c < 32 && c !== 9) || c === 127;
}

/** Case-insensitive match of a token (validated: no byte maps onto a letter or '-' wrongly) against a lowercase name. */
function isName(buf: Buffer, start: number, end: number, lower: string): boolean {
  if (end - start !== lower.length) return false;
  for (let i = 0; i < lower.length; i++) if (((buf[start + i] as number) | 0x20) !== lower.charCodeAt(i)) return false;
  return true;
}

function tabBetween(buf: Buffer, from: number, to: number): boolean {
  for (let i = from; i < to; i++) if (buf[i] === 9) return true;
  return false;
}

function fail(message: string): never {
  throw new H1ParseError(message);
}

/**
 * One parser per connection; start() before each response. execute() returns how many bytes it consumed: all of
 * them, unless it stopped early because a sink call returned false (feed the rest later) or the response ended
 * (the rest is not part of it). Protocol errors throw H1ParseError; after one, the parser is unusable until start().
 */
export class ResponseParser {
  /** status of the final head (0 before it) */
  statusCode = 0;
  /** the connection may carry another request after this response (meaningful once the final head is parsed) */
  keepAlive = false;
  /** the server's Keep-Alive: timeout=N, in ms; -1 when it sent none */
  keepAliveHintMs = -1;

  private state = S_IDLE;
  private headRequest = false;
  /** bytes of a head split over reads, copied here until it is complete */
  private acc: Buffer | undefined = undefined;
  private accLen = 0;
  /** body bytes still expected: of the whole body (Content-Length) or of the current chunk */
  private remaining = 0;
  private chunkSize = 0;
  private sizeDigits = 0;
  private trailerLen = 0;
  // fields of the head being parsed
  private contentLength = -1;
  private hasTransferEncoding = false;
  private connectionClose = false;

  constructor(
    private readonly sink: ResponseEvents,
    private readonly maxHeadSize = DEFAULT_MAX_HEAD_SIZE,
  ) {}

  /** Expect a new response. A response to HEAD has no body whatever its headers say. */
  start(headRequest: boolean): void {
    this.state = S_HEAD;
    this.headRequest = headRequest;
    this.acc = undefined;
    this.accLen = 0;
    this.statusCode = 0;
    this.keepAlive = false;
    this.keepAliveHintMs = -1;
  }

  /** The response is complete (onComplete was called). */
  get done(): boolean {
    return this.state === S_DONE;
  }

  /**
   * The connection ended. Completes a body delimited by the end of the connection (calls onComplete, returns true);
   * false when the response is not complete (or was already), which the caller reports as an error.
   */
  finish(): boolean {
    if (this.state !== S_BODY_EOF) return false;
    this.state = S_DONE;
    this.sink.onComplete();
    return true;
  }

  execute(data: Buffer): number {
    const len = data.length;
    const sink = this.sink;
    let pos = 0;
    for (;;) {
      const state = this.state;
      if (state === S_CHUNK_DATA || state === S_BODY_LENGTH) {
        if (pos >= len) return len;
        const available = len - pos;
        const n = Math.min(this.remaining, available);
        const chunk = pos === 0 && n === len ? data : data.subarray(pos, pos + n);
        pos += n;
        this.remaining -= n;
        if (this.remaining === 0) {
          if (state === S_BODY_LENGTH) {
            if (pos < len) fail('bytes after the end of the response');
            this.state = S_DONE;
            sink.onBody(chunk);
            sink.onComplete();
            return pos;
          }
          this.state = S_CHUNK_DATA_CR;
        }
        if (!sink.onBody(chunk)) return pos;
        continue;
      }
      if (state === S_HEAD) {
        if (pos >= len) return len;
        const end = this.readHead(data, pos);
        if (end < 0) return len;
        pos = end;
        if (this.state === S_HEAD) {
          // informational: another head follows
          if (!sink.onHead(this.infoStatus, this.headers)) return pos;
          continue;
        }
        if (this.state === S_DONE && pos < len) fail('bytes after the end of a response without a body');
        const ok = sink.onHead(this.statusCode, this.headers);
        if (this.state === S_DONE) {
          sink.onComplete();
          return pos;
        }
        if (!ok) return pos;
        continue;
      }
      if (state === S_BODY_EOF) {
        if (pos >= len) return len;
        const chunk = pos === 0 ? data : data.subarray(pos);
        sink.onBody(chunk);
        return len;
      }
      if (state === S_DONE || state === S_IDLE) return pos;

      // chunked framing, a byte at a time
      if (pos >= len) return len;
      const c = data[pos++] as number;
      switch (state) {
        case S_CHUNK_SIZE: {
          // hex digits, then CRLF: no extensions, no white space (no engine sends them; llhttp refuses the white space)
          const v = HEX[c] as number;
          if (v >= 0) {
            if (++this.sizeDigits > 12) fail('chunk size too large');
            this.chunkSize = this.chunkSize * 16 + v;
          } else if (this.sizeDigits > 0 && c === CR) this.state = S_CHUNK_SIZE_LF;
          else fail(c === 59 ? 'chunk extensions are not accepted' : 'invalid chunk size');
          break;
        }
        case S_CHUNK_SIZE_LF:
          if (c !== LF) fail('expected LF after the chunk size');
          if (this.chunkSize === 0) {
            this.state = S_TRAILER_START;
            this.trailerLen = 0;
          } else {
            this.remaining = this.chunkSize;
            this.state = S_CHUNK_DATA;
          }
          this.chunkSize = 0;
          this.sizeDigits = 0;
          break;
        case S_CHUNK_DATA_CR:
          if (c !== CR) fail('expected CRLF after chunk data');
          this.state = S_CHUNK_DATA_LF;
          break;
        case S_CHUNK_DATA_LF:
          if (c !== LF) fail('expected CRLF after chunk data');
          this.state = S_CHUNK_SIZE;
          break;
        case S_TRAILER_START:
          if (c === CR) this.state = S_TRAILER_END_LF;
          else if (TCHAR[c] === 1) this.state = S_TRAILER_NAME;
          else fail('invalid trailer');
          if (++this.trailerLen > this.maxHeadSize) fail('trailers too large');
          break;
        case S_TRAILER_NAME:
          if (c === 58) this.state = S_TRAILER_VALUE;
          else if (TCHAR[c] !== 1) fail('invalid trailer name');
          if (++this.trailerLen > this.maxHeadSize) fail('trailers too large');
          break;
        case S_TRAILER_VALUE:
          if (c === CR) this.state = S_TRAILER_LINE_LF;
          else if (badValueByte(c)) fail('invalid trailer value');
          if (++this.trailerLen > this.maxHeadSize) fail('trailers too large');
          break;
        case S_TRAILER_LINE_LF:
          if (c !== LF) fail('expected LF in trailers');
          this.state = S_TRAILER_START;
          break;
        case S_TRAILER_END_LF:
          if (c !== LF) fail('expected LF after the last chunk');
          if (pos < len) fail('bytes after the end of the response');
          this.state = S_DONE;
          sink.onComplete();
          return pos;
        default:
          fail(`parser in unknown state ${state}`);
      }
    }
  }

  // results of readHead for execute()
  private headers: Buffer[] = [];
  private infoStatus = 0;

  /** Finds the end of the head starting at data[pos]; parses it when complete. Returns the position after it, or -1 (all buffered). */
  private readHead(data: Buffer, pos: number): number {
    const max = this.maxHeadSize;
    const prev = this.accLen;
    if (prev === 0) {
      const idx = data.indexOf(HEAD_END, pos);
      if (idx < 0) {
        if (data.length - pos > max) fail('response head too large');
        this.append(data, pos);
        return -1;
      }
      const end = idx + 4;
      if (end - pos > max) fail('response head too large');
      this.parseHead(data, pos, end);
      return end;
    }
    this.append(data, pos);
    const acc = this.acc as Buffer;
    const idx = acc.subarray(0, this.accLen).indexOf(HEAD_END, prev > 3 ? prev - 3 : 0);
    if (idx < 0) {
      if (this.accLen > max) fail('response head too large');
      return -1;
    }
    const end = idx + 4;
    if (end > max) fail('response head too large');
    // the header slices handed out point into acc: never write into it again
    this.acc = undefined;
    this.accLen = 0;
    this.parseHead(acc, 0, end);
    return pos + (end - prev);
  }

  private append(data: Buffer, pos: number): void {
    const n = data.length - pos;
    const need = this.accLen + n;
    let acc = this.acc;
    if (acc === undefined || acc.length < need) {
      const grown = Buffer.allocUnsafe(Math.max(need, acc === undefined ? 1024 : acc.length * 2));
      if (acc !== undefined) acc.copy(grown, 0, 0, this.accLen);
      acc = grown;
      this.acc = acc;
    }
    data.copy(acc, this.accLen, pos);
    this.accLen = need;
  }

  /** buf[start, end) is one whole head, ending with the empty line. */
  private parseHead(buf: Buffer, start: number, end: number): void {
    // status line: HTTP/1.x NNN[ reason]
    const lineEnd = buf.indexOf(CR, start);
    if (buf[lineEnd + 1] !== LF) fail('bare CR in the status line');
    if (
      lineEnd - start < 12 ||
      buf[start] !== 72 ||
      buf[start + 1] !== 84 ||
      buf[start + 2] !== 84 ||
      buf[start + 3] !== 80 ||
      buf[start + 4] !== 47 ||
      buf[start + 5] !== 49 ||
      buf[start + 6] !== 46 ||
      buf[start + 8] !== 32 ||
      (lineEnd > start + 12 && buf[start + 12] !== 32)
    )
      fail('invalid status line');
    const minor = (buf[start + 7] as number) - 48;
    const d0 = (buf[start + 9] as number) - 48;
    const d1 = (buf[start + 10] as number) - 48;
    const d2 = (buf[start + 11] as number) - 48;
    if ((minor !== 0 && minor !== 1) || d0 < 1 || d0 > 9 || d1 < 0 || d1 > 9 || d2 < 0 || d2 > 9) fail('invalid status line');
    for (let i = start + 13; i < lineEnd; i++) if (badValueByte(buf[i] as number)) fail('invalid reason phrase');
    const status = d0 * 100 + d1 * 10 + d2;
    if (status === 101) fail('101 Switching Protocols is not supported');
    // the router never sends Expect: 100-continue, so a 100 is not an answer to it (undici refuses it too)
    if (status === 100) fail('100 Continue to a request that did not ask for it');

    this.contentLength = -1;
    this.hasTransferEncoding = false;
    this.connectionClose = false;
    const headers: Buffer[] = [];
    const last = end - 2;
    let p = lineEnd + 2;
    while (p < last) {
      const cr = buf.indexOf(CR, p);
      if (buf[cr + 1] !== LF) fail('bare CR in a header');
      let q = p;
      while (q < cr && TCHAR[buf[q] as number] === 1) q++;
      if (q === p || buf[q] !== 58) fail('invalid header name');
      let vs = q + 1;
      let ve = cr;
      while (vs < ve && (buf[vs] === 32 || buf[vs] === 9)) vs++;
      while (ve > vs && (buf[ve - 1] === 32 || buf[ve - 1] === 9)) ve--;
      for (let i = vs; i < ve; i++) if (badValueByte(buf[i] as number)) fail('invalid header value');
      headers.push(buf.subarray(p, q), buf.subarray(vs, ve));
      const nameLen = q - p;
      if (nameLen === 14 || nameLen === 17 || nameLen === 10) this.noteHeader(buf, p, q, vs, ve, cr);
      p = cr + 2;
    }
    this.headers = headers;

    const length = this.contentLength;
    if (this.hasTransferEncoding && length >= 0) fail('both Content-Length and Transfer-Encoding');
    if (status < 200) {
      // an informational head never has a body, so it has no business framing one
      if (this.hasTransferEncoding || length >= 0) fail(`a ${status} response with a framing header`);
      this.infoStatus = status;
      this.state = S_HEAD;
      return;
    }
    this.statusCode = status;
    // HTTP/1.0 connections are not reused (keep-alive there is opt-in; not worth the cases)
    let keepAlive = minor === 1 && !this.connectionClose;
    if (status === 204 || status === 304) {
      // no body may follow; a length other than 0 or a transfer coding says the engine thinks one does
      if (this.hasTransferEncoding || length > 0) fail(`a ${status} response that declares a body`);
      this.state = S_DONE;
    } else if (this.headRequest) {
      this.state = S_DONE;
    } else if (this.hasTransferEncoding) {
      this.state = S_CHUNK_SIZE;
      this.chunkSize = 0;
      this.sizeDigits = 0;
    } else if (length >= 0) {
      this.remaining = length;
      this.state = length === 0 ? S_DONE : S_BODY_LENGTH;
    } else {
      this.state = S_BODY_EOF;
      keepAlive = false;
    }
    this.keepAlive = keepAlive;
  }

  /** Content-Length, Transfer-Encoding, Connection, Keep-Alive (the name lengths were checked). */
  private noteHeader(buf: Buffer, ns: number, ne: number, vs: number, ve: number, lineEnd: number): void {
    if (isName(buf, ns, ne, 'content-length')) {
      // llhttp refuses a tab after a Content-Length's digits (spaces pass); so does this, for both framing headers
      if (tabBetween(buf, ve, lineEnd)) fail('a tab after the Content-Length');
      // one header of digits; repeated or listed values ("42, 42") are refused, as llhttp refuses them
      if (this.contentLength >= 0) fail('more than one Content-Length');
      if (vs === ve) fail('invalid Content-Length');
      let n = 0;
      for (let i = vs; i < ve; i++) {
        const d = (buf[i] as number) - 48;
        if (d < 0 || d > 9) fail('invalid Content-Length');
        n = n * 10 + d;
        if (n > Number.MAX_SAFE_INTEGER) fail('Content-Length too large');
      }
      this.contentLength = n;
    } else if (isName(buf, ns, ne, 'transfer-encoding')) {
      // chunked, once: a coding list or another coding would mean a body read until the connection closes, which
      // no engine needs and which undici refuses when it contradicts the rest of the head
      if (this.hasTransferEncoding) fail('more than one Transfer-Encoding');
      if (tabBetween(buf, ve, lineEnd)) fail('a tab after the Transfer-Encoding');
      if (!(ve - vs === 7 && isName(buf, vs, ve, 'chunked'))) fail('a Transfer-Encoding other than chunked');
      this.hasTransferEncoding = true;
    } else if (isName(buf, ns, ne, 'connection')) {
      if (ve - vs === 5 && isName(buf, vs, ve, 'close')) this.connectionClose = true;
      else if (!(ve - vs === 10 && isName(buf, vs, ve, 'keep-alive'))) {
        for (const token of buf.toString('latin1', vs, ve).split(','))
          if (token.trim().toLowerCase() === 'close') this.connectionClose = true;
      }
    } else if (isName(buf, ns, ne, 'keep-alive')) {
      for (const param of buf.toString('latin1', vs, ve).split(',')) {
        const m = /^\s*timeout\s*=\s*"?(\d+)"?\s*$/i.exec(param);
        if (m) this.keepAliveHintMs = Number(m[1]) * 1000;
      }
    }
  }
}
