// How the router frames an engine's answer to its client (src/router/proxy/attempt.ts). The engine's Content-Length
// and Transfer-Encoding are never copied: an event stream is chunked (the router may have to end it with an error
// event of its own); another answer with a Content-Length gets that length only because exactly that many bytes will
// be written (they are counted); anything else is chunked (close-delimited for an HTTP/1.0 client, which node:http
// decides); a 204 or 304 has no body.
import type { ResponseHead } from './headers.js';

/** How an answer is framed: kept on the attempt itself (no object of its own per attempt). */
export interface AnswerFraming {
  /** 204 or 304: no body may follow */
  bodyless: boolean;
  /** an event stream */
  sse: boolean;
  /** bytes of the body still to write when the router declared a Content-Length, else -1 */
  remaining: number;
}

/**
 * Reads the engine's head of a final answer into `framing` and adds the router's Content-Length to `head.headers`
 * when it declares one; the reason the answer cannot be passed on, or undefined.
 */
export function frameAnswer(status: number, head: ResponseHead, framing: AnswerFraming): string | undefined {
  const bodyless = status === 204 || status === 304;
  if (head.badFraming) return 'the engine sent contradictory or invalid framing headers';
  if (bodyless && (head.transferEncoding || head.contentLength > 0)) return `the engine declared a body on a ${status}`;
  framing.bodyless = bodyless;
  framing.sse = !bodyless && head.contentType.startsWith('text/event-stream');
  framing.remaining = framing.sse || bodyless ? -1 : head.contentLength;
  if (framing.remaining >= 0) head.headers.push('content-length', String(framing.remaining));
  return undefined;
}
