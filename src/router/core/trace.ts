// What the request path needs of tracing (OpenTelemetry, src/router/tracing): a span it can add to, end, make children
// of, and whose context it can hand to an engine in W3C headers. Every stage takes an optional span: with tracing off
// there is none, and the request path makes no span object and does no context work at all.
import type { IncomingHttpHeaders } from 'node:http';

/** An attribute's value: names and numbers only; never a prompt, a body, a key or a header's credentials. */
export type TraceValue = string | number | boolean;
export type TraceAttributes = Readonly<Record<string, TraceValue>>;

/** internal: a stage of the router's own; client: a call to an engine (its context goes with the call) */
export type TraceSpanKind = 'internal' | 'client';

export interface TraceSpan {
  /** A span under this one, started now. */
  child(name: string, kind: TraceSpanKind, attributes?: TraceAttributes): TraceSpan;
  set(key: string, value: TraceValue): void;
  event(name: string, attributes?: TraceAttributes): void;
  /** Marks the span failed (status ERROR) with a short reason: the router's own words, an error code, never request data. */
  fail(reason: string): void;
  /**
   * This span's context as W3C headers for a call it makes, flat: ['traceparent', value] and ['tracestate', value]
   * when there is one. The engine continues the trace as a child of this span.
   */
  propagation(): readonly string[];
  /** Ends the span (again: nothing). */
  end(): void;
}

/** W3C Trace Context header names (lower case, as the router compares them). */
export const TRACE_HEADERS: ReadonlySet<string> = new Set(['traceparent', 'tracestate']);

/** Starts the SERVER span of a request (tracing on); with tracing off the pipeline has none. */
export interface RequestTracer {
  /** a child of the client's span when its headers carry a W3C traceparent, else the root of a new trace */
  request(name: string, headers: IncomingHttpHeaders, attributes: TraceAttributes): TraceSpan;
}
