// The fast path's request-head parser: accepts only a strict, unambiguous subset of HTTP/1.1 and says "other" for
// everything else, which then goes to node:http's full parser. Accepting less than node does (never more), and reading
// what it accepts as node does, is what keeps the two from reading one byte stream differently (request smuggling).
// test/integration/http-differential.test.ts holds it against node:http on the same bytes.
import { isHttpToken } from '../../util/http-token.js';
import { bodyLimitFor } from '../multipart.js';

/** A POST head (the only method the fast path takes). */
export interface RequestHead {
  /** the request-target as sent (path and query) */
  readonly url: string;
  /** the target without its query */
  readonly path: string;
  /** [name, value, ...] with the names as sent, like IncomingMessage.rawHeaders */
  readonly rawHeaders: string[];
  /** lower-case name -> value, like IncomingMessage.headers (a repeated name makes the request "other") */
  readonly headers: Record<string, string>;
  readonly contentLength: number;
  /** false when the client sent `Connection: close` */
  readonly keepAlive: boolean;
  /** offset of the first body byte in the buffer */
  readonly bodyStart: number;
}

/** incomplete: the head has not fully arrived; other: not for the fast path (node:http answers it) */
export type HeadResult = RequestHead | 'incomplete' | 'other';

export interface HeadLimits {
  /** the head, request line and final CRLF CRLF included, may not be longer */
  readonly maxHeadBytes: number;
  /** a larger declared body is not for the fast path (node:http answers 413) */
  readonly maxBodyBytes: number;
  /** the same for the JSON routes (all but the audio ones), when smaller */
  readonly maxJsonBodyBytes?: number;
  /** the paths the fast path serves (exact match, query ignored) */
  readonly paths: ReadonlySet<string>;
}

const HEAD_END = Buffer.from('\r\n\r\n', 'latin1');
const TARGET = /^\/[\x21-\x7e]*$/;
/**
 * control characters, tab included; CR and LF are gone after the split, so any left means bare CR or LF. llhttp takes
 * a tab as white space in some places and refuses it in others (after a Content-Length's digits): no tab is simplest.
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are exactly what a head may not hold
const CTL = /[\x00-\x1f\x7f]/;
const DIGITS = /^[0-9]{1,15}$/;
/**
 * node:http exposes only the first 2,000 header lines of a request (maxHeadersCount) and would not see, say, an
 * Authorization beyond them; a head this long is unusual enough to leave to node:http whole
 */
const MAX_HEADER_LINES = 100;

/** Parses the head at the start of `buf`. Pure; allocates only for an accepted head. */
export function parseRequestHead(buf: Buffer, limits: HeadLimits): HeadResult {
  const end = buf.indexOf(HEAD_END);
  if (end < 0) return buf.length >= limits.maxHeadBytes ? 'other' : 'incomplete';
  if (end + 4 > limits.maxHeadBytes) return 'other';
  const lines = buf.toString('latin1', 0, end).split('\r\n');
  const requestLine = lines[0] as string;
  // "POST " target " HTTP/1.1", single spaces
  if (!requestLine.startsWith('POST ') || !requestLine.endsWith(' HTTP/1.1')) return 'other';
  const url = requestLine.slice(5, requestLine.length - 9);
  if (!TARGET.test(url)) return 'other';
  const q = url.indexOf('?');
  const path = q < 0 ? url : url.slice(0, q);
  if (!limits.paths.has(path)) return 'other';

  if (lines.length - 1 > MAX_HEADER_LINES) return 'other';
  const rawHeaders: string[] = [];
  const headers: Record<string, string> = Object.create(null) as Record<string, string>;
  let contentLength = -1;
  let keepAlive = true;
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i] as string;
    const colon = line.indexOf(':');
    // no colon, an empty name, obs-fold (a line starting with white space) or a control character: not ours
    if (colon <= 0 || CTL.test(line)) return 'other';
    const name = line.slice(0, colon);
    if (!isHttpToken(name)) return 'other';
    const value = trimOws(line, colon + 1);
    const lower = name.toLowerCase();
    if (lower in headers) return 'other';
    switch (lower) {
      case 'content-length':
        if (!DIGITS.test(value)) return 'other';
        contentLength = Number(value);
        break;
      case 'connection': {
        const v = value.toLowerCase();
        if (v === 'close') keepAlive = false;
        else if (v !== 'keep-alive') return 'other';
        break;
      }
      case 'transfer-encoding':
      case 'expect':
      case 'upgrade':
        return 'other';
    }
    headers[lower] = value;
    rawHeaders.push(name, value);
  }
  if (contentLength < 0 || contentLength > bodyLimitFor(path, limits.maxBodyBytes, limits.maxJsonBodyBytes)) return 'other';
  // HTTP/1.1 needs exactly one Host (a repeated one is already 'other'); node:http's listener answers the 400
  if (!('host' in headers)) return 'other';
  return { url, path, rawHeaders, headers, contentLength, keepAlive, bodyStart: end + 4 };
}

/** Spaces around a value are not part of it (node:http trims them too); a tab never gets here. */
function trimOws(line: string, from: number): string {
  let start = from;
  let end = line.length;
  while (start < end && line.charCodeAt(start) === 0x20) start++;
  while (end > start && line.charCodeAt(end - 1) === 0x20) end--;
  return line.slice(start, end);
}
