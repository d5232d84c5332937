// OpenTelemetry tracing of the router, when an endpoint is configured (src/router/config/tracing-config.ts): the SDK's
// tracer provider (sampler from OTEL_TRACES_SAMPLER(_ARG), parent-based always-on by default), its OTLP exporter (gRPC,
// or HTTP/protobuf for an http(s)://.../v1/traces endpoint), a bounded batch queue whose drops are counted, and a
// resource naming this process (service.name, a service.instance.id of its own: each --workers worker exports as one
// instance). Nothing here is registered globally: the router's spans are made from this object, and with tracing off
// it does not exist.
import { randomUUID } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { ROOT_CONTEXT, SpanKind, type Tracer } from '@opentelemetry/api';
import { OTLPTraceExporter as GrpcExporter } from '@opentelemetry/exporter-trace-otlp-grpc';
import { OTLPTraceExporter as ProtoExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import { DEFAULT_SERVICE_NAME, type TracingConfig } from '../config/tracing-config.js';
import type { RequestTracer, TraceAttributes, TraceSpan } from '../core/trace.js';
import type { Logger } from '../util/log.js';
import { PROCESS_PID, SERVICE_INSTANCE_ID, SERVICE_NAME, SERVICE_VERSION, WORKER } from './attributes.js';
import { BoundedSpanProcessor, type DroppedSpans } from './bounded-export.js';
import { OtelSpan, W3C } from './otel-span.js';

export interface TracingOptions {
  readonly config: TracingConfig;
  readonly version: string;
  /** the --workers worker's id, or null in a single process */
  readonly worker: number | null;
  readonly log: Logger;
  /** process.env: OTEL_BSP_* (queue and batch), read here; the SDK reads the other OTEL_* itself */
  readonly env?: Readonly<Record<string, string | undefined>>;
}

/** a failed export is logged at most this often (a collector that is down fails every batch) */
const FAILURE_LOG_INTERVAL_MS = 60_000;

function positive(env: Readonly<Record<string, string | undefined>>, name: string, fallback: number): number {
  const n = Number(env[name]);
  return env[name] !== undefined && Number.isFinite(n) && n > 0 ? n : fallback;
}

const HEADER_GETTER = {
  get(carrier: IncomingHttpHeaders, key: string): string | string[] | undefined {
    return carrier[key];
  },
  keys(carrier: IncomingHttpHeaders): string[] {
    return Object.keys(carrier);
  },
};

export class Tracing implements RequestTracer {
  private readonly provider: BasicTracerProvider;
  private readonly tracer: Tracer;
  private readonly processor: BoundedSpanProcessor;
  readonly instanceId = randomUUID();
  readonly serviceName: string;
  private lastFailureLog = 0;

  constructor(private readonly opts: TracingOptions) {
    const env = opts.env ?? process.env;
    const fromEnv = detectResources({ detectors: [envDetector] });
    const named = opts.config.serviceName ?? fromEnv.attributes[SERVICE_NAME];
    this.serviceName = typeof named === 'string' && named.length > 0 ? named : DEFAULT_SERVICE_NAME;
    const resource = fromEnv.merge(
      resourceFromAttributes({
        [SERVICE_NAME]: this.serviceName,
        [SERVICE_INSTANCE_ID]: this.instanceId,
        [SERVICE_VERSION]: opts.version,
        [PROCESS_PID]: process.pid,
        ...(opts.worker !== null ? { [WORKER]: opts.worker } : {}),
      }),
    );
    this.processor = new BoundedSpanProcessor(this.exporter(), {
      maxQueueSize: positive(env, 'OTEL_BSP_MAX_QUEUE_SIZE', 2048),
      maxExportBatchSize: positive(env, 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE', 512),
      scheduledDelayMillis: positive(env, 'OTEL_BSP_SCHEDULE_DELAY', 1000),
      exportTimeoutMillis: positive(env, 'OTEL_BSP_EXPORT_TIMEOUT', 30_000),
      onExportFailed: (spans, error) => this.exportFailed(spans, error),
    });
    this.provider = new BasicTracerProvider({ resource, spanProcessors: [this.processor] });
    this.tracer = this.provider.getTracer('llm-router', opts.version);
  }

  private exporter(): SpanExporter {
    const { protocol, url } = this.opts.config;
    const given = url !== undefined ? { url } : {};
    return protocol === 'grpc' ? new GrpcExporter(given) : new ProtoExporter(given);
  }

  private exportFailed(spans: number, error: Error | undefined): void {
    const now = Date.now();
    if (now - this.lastFailureLog < FAILURE_LOG_INTERVAL_MS) return;
    this.lastFailureLog = now;
    this.opts.log.warn(
      { endpoint: this.opts.config.endpoint, spans, err: error?.message },
      'traces: the collector did not take a batch of spans; they are dropped (llm_router_otel_spans_dropped_total), requests are not affected',
    );
  }

  /**
   * The SERVER span of one request: a child of the client's span when its W3C traceparent (and tracestate) says so,
   * else the root of a new trace; sampled as the sampler decides (parent-based: the client's sampled flag).
   */
  request(name: string, headers: IncomingHttpHeaders, attributes: TraceAttributes): TraceSpan {
    const parent = W3C.extract(ROOT_CONTEXT, headers, HEADER_GETTER);
    return new OtelSpan(this.tracer, this.tracer.startSpan(name, { kind: SpanKind.SERVER, attributes }, parent));
  }

  /** spans dropped so far: the queue was full, or the collector did not take them */
  get dropped(): Readonly<DroppedSpans> {
    return this.processor.dropped;
  }

  /** Exports what is queued, within `timeoutMs`; what is left then is given up. */
  async shutdown(timeoutMs: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const limit = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), Math.max(0, timeoutMs));
      timer.unref();
    });
    const done = this.provider.shutdown().then(
      () => 'done' as const,
      () => 'done' as const,
    );
    const how = await Promise.race([done, limit]);
    clearTimeout(timer);
    if (how === 'timeout')
      this.opts.log.warn({ endpoint: this.opts.config.endpoint }, 'traces: pending spans not exported within the shutdown time');
  }
}
