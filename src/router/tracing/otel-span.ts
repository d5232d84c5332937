// The request path's TraceSpan (src/router/core/trace.ts) over an OpenTelemetry span: children are started with this
// span as their parent in an explicit context (no context manager, no async-hooks), and the context a call carries to
// an engine is injected as W3C traceparent/tracestate.
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Span, type Tracer } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import type { TraceAttributes, TraceSpan, TraceSpanKind, TraceValue } from '../core/trace.js';

export const W3C = new W3CTraceContextPropagator();

const KINDS: Readonly<Record<TraceSpanKind, SpanKind>> = { internal: SpanKind.INTERNAL, client: SpanKind.CLIENT };

/** Writes an injected header into a flat [name, value, ...] list. */
const FLAT_SETTER = {
  set(carrier: string[], key: string, value: string): void {
    carrier.push(key, value);
  },
};

export class OtelSpan implements TraceSpan {
  private ended = false;

  constructor(
    private readonly tracer: Tracer,
    readonly span: Span,
  ) {}

  child(name: string, kind: TraceSpanKind, attributes?: TraceAttributes): TraceSpan {
    const span = this.tracer.startSpan(
      name,
      attributes ? { kind: KINDS[kind], attributes } : { kind: KINDS[kind] },
      trace.setSpan(ROOT_CONTEXT, this.span),
    );
    return new OtelSpan(this.tracer, span);
  }

  set(key: string, value: TraceValue): void {
    this.span.setAttribute(key, value);
  }

  event(name: string, attributes?: TraceAttributes): void {
    this.span.addEvent(name, attributes);
  }

  fail(reason: string): void {
    this.span.setStatus({ code: SpanStatusCode.ERROR, message: reason });
  }

  propagation(): readonly string[] {
    const out: string[] = [];
    W3C.inject(trace.setSpan(ROOT_CONTEXT, this.span), out, FLAT_SETTER);
    return out;
  }

  end(): void {
    if (this.ended) return;
    this.ended = true;
    this.span.end();
  }
}
