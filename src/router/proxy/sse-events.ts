// Server-sent event boundaries for an attempt's event stream (src/router/proxy/attempt.ts): what the router passes on
// goes out whole events at a time, the bytes of an incomplete last event are held back until the rest of it comes,
// and the router's own error event ends a stream on an event boundary.
import type { FailureKind } from '../core/forward.js';

const LF = 0x0a;
const CR = 0x0d;

/**
 * Beyond this many bytes of one event, an event stream is passed on without holding its incomplete event back (an
 * engine that never ends its events must not make the router buffer without bound).
 */
const MAX_HELD_EVENT_BYTES = 256 * 1024;

/**
 * Index just past the last complete server-sent event in `buf` (the end of its blank line), or -1 when there is none.
 * Lines end with CRLF, LF or CR (the WHATWG rules); an event ends with an empty line. `from`: no blank line ends
 * before this index (the bytes before it were scanned already).
 */
export function lastEventEnd(buf: Buffer, from = 0): number {
  for (let end = buf.length; end >= 2 && end > from; end--) {
    const last = buf[end - 1];
    if (last !== LF && last !== CR) continue;
    // the line terminator ending here (CRLF counts as one), and just before it the end of another: an empty line
    const start = last === LF && buf[end - 2] === CR ? end - 2 : end - 1;
    const before = buf[start - 1];
    if (start >= 1 && (before === LF || before === CR)) return end;
  }
  return -1;
}

/** Where an event stream stands: kept on the attempt itself (no object of its own per attempt). */
export interface EventBoundaryState {
  /** the bytes of the incomplete last event, not yet written */
  partial: Buffer | undefined;
  /** what the client has been sent ends on an event boundary */
  atBoundary: boolean;
}

/**
 * The bytes of `data` (after those held back before) to write now: the complete events, or everything when the stream
 * cannot be followed (an event longer than MAX_HELD_EVENT_BYTES); undefined when nothing is complete yet. The rest is
 * held back in `state.partial`.
 */
export function completeEvents(state: EventBoundaryState, data: Buffer): Buffer | undefined {
  const held = state.partial;
  const all = held === undefined ? data : Buffer.concat([held, data]);
  // a blank line cannot end before the held bytes' last 3 (they were scanned when they came)
  const end = lastEventEnd(all, held === undefined ? 0 : Math.max(0, held.length - 3));
  if (end === all.length) {
    state.partial = undefined;
    state.atBoundary = true;
    return all;
  }
  if (all.length - Math.max(end, 0) > MAX_HELD_EVENT_BYTES) {
    // not an event stream the router can follow: passed on as it comes
    state.partial = undefined;
    state.atBoundary = false;
    return all;
  }
  if (end > 0) {
    state.partial = all.subarray(end);
    state.atBoundary = true;
    return all.subarray(0, end);
  }
  state.partial = all;
  return undefined;
}

function sseError(message: string, code: string): string {
  return `data: ${JSON.stringify({ error: { message, type: 'server_error', param: null, code } })}\n\n`;
}

/**
 * The router's error event that ends a stream the engine failed mid-way; it starts on an event boundary (a stream
 * passed on unfollowed may stop mid-event: that event is ended first). The held incomplete event is dropped whole.
 */
export function streamErrorEvent(state: EventBoundaryState, failure: FailureKind): string {
  state.partial = undefined;
  const timeout = failure === 'idle-timeout' || failure === 'total-timeout';
  const code = timeout ? 'upstream_timeout' : failure === 'protocol' ? 'upstream_protocol_error' : 'upstream_stream_error';
  const event = sseError(
    timeout ? 'The engine stopped sending in time; the stream was ended.' : 'The engine failed mid-stream; the stream was ended.',
    code,
  );
  return state.atBoundary ? event : `\n\n${event}`;
}
