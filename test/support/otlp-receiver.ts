// An OTLP/gRPC trace receiver for tests (what an OpenTelemetry Collector's otlp receiver does, minus everything else):
// opentelemetry.proto.collector.trace.v1.TraceService/Export from the OpenTelemetry protocol's own .proto files
// (test/fixtures/otlp), served with @grpc/grpc-js on 127.0.0.1, plaintext or TLS. It keeps every span it receives, each
// with its resource's service.name and service.instance.id, ids as hex and times as bigint nanoseconds.
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

export type AttrValue = string | number | boolean;

export interface ReceivedSpan {
  readonly traceId: string;
  readonly spanId: string;
  /** '' for a root span */
  readonly parentSpanId: string;
  readonly name: string;
  /** 1 internal, 2 server, 3 client (OTLP's SpanKind) */
  readonly kind: number;
  readonly startNs: bigint;
  readonly endNs: bigint;
  readonly attributes: Readonly<Record<string, AttrValue>>;
  readonly events: readonly { readonly name: string; readonly attributes: Readonly<Record<string, AttrValue>> }[];
  /** 0 unset, 1 ok, 2 error */
  readonly statusCode: number;
  readonly statusMessage: string;
  readonly resource: Readonly<Record<string, AttrValue>>;
}

export const SPAN_KIND = { internal: 1, server: 2, client: 3 } as const;

export interface OtlpReceiver {
  readonly port: number;
  /** HOST:PORT, for --otel-endpoint */
  readonly address: string;
  readonly spans: ReceivedSpan[];
  /** Export calls received */
  readonly exports: number;
  stop(): Promise<void>;
}

interface AnyValue {
  value?: string;
  stringValue?: string;
  boolValue?: boolean;
  intValue?: string;
  doubleValue?: number;
}
interface KeyValue {
  key: string;
  value?: AnyValue;
}
interface WireSpan {
  traceId: Buffer;
  spanId: Buffer;
  parentSpanId: Buffer;
  name: string;
  kind: string | number;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes: KeyValue[];
  events: { name: string; attributes: KeyValue[] }[];
  status?: { code: string | number; message: string };
}
interface ExportRequest {
  resourceSpans: { resource?: { attributes: KeyValue[] }; scopeSpans: { spans: WireSpan[] }[] }[];
}

const PROTO_ROOT = fileURLToPath(new URL('../fixtures/otlp/', import.meta.url));

function anyValue(v: AnyValue | undefined): AttrValue {
  if (!v) return '';
  if (v.stringValue !== undefined && (v.value === undefined || v.value === 'stringValue')) return v.stringValue;
  if (v.value === 'boolValue') return v.boolValue === true;
  if (v.value === 'intValue') return Number(v.intValue);
  if (v.value === 'doubleValue') return Number(v.doubleValue);
  return v.stringValue ?? '';
}

function attrs(list: readonly KeyValue[] | undefined): Record<string, AttrValue> {
  const out: Record<string, AttrValue> = {};
  for (const kv of list ?? []) out[kv.key] = anyValue(kv.value);
  return out;
}

const KINDS: Record<string, number> = {
  SPAN_KIND_UNSPECIFIED: 0,
  SPAN_KIND_INTERNAL: 1,
  SPAN_KIND_SERVER: 2,
  SPAN_KIND_CLIENT: 3,
  SPAN_KIND_PRODUCER: 4,
  SPAN_KIND_CONSUMER: 5,
};
const STATUS: Record<string, number> = { STATUS_CODE_UNSET: 0, STATUS_CODE_OK: 1, STATUS_CODE_ERROR: 2 };

/** Starts a receiver on 127.0.0.1 and a free port; TLS with `tls` (a certificate the client must trust). */
export async function startOtlpReceiver(opts: { tls?: { cert: string; key: string } } = {}): Promise<OtlpReceiver> {
  const def = protoLoader.loadSync('opentelemetry/proto/collector/trace/v1/trace_service.proto', {
    includeDirs: [PROTO_ROOT],
    keepCase: false,
    longs: String,
    enums: String,
    bytes: Buffer,
    defaults: true,
    oneofs: true,
  });
  const pkg = grpc.loadPackageDefinition(def) as unknown as {
    opentelemetry: { proto: { collector: { trace: { v1: { TraceService: { service: grpc.ServiceDefinition } } } } } };
  };
  const spans: ReceivedSpan[] = [];
  let exports = 0;
  const server = new grpc.Server();
  server.addService(pkg.opentelemetry.proto.collector.trace.v1.TraceService.service, {
    Export: (call: grpc.ServerUnaryCall<ExportRequest, unknown>, callback: grpc.sendUnaryData<unknown>) => {
      exports++;
      for (const rs of call.request.resourceSpans) {
        const resource = attrs(rs.resource?.attributes);
        for (const ss of rs.scopeSpans)
          for (const s of ss.spans)
            spans.push({
              traceId: s.traceId.toString('hex'),
              spanId: s.spanId.toString('hex'),
              parentSpanId: s.parentSpanId.toString('hex'),
              name: s.name,
              kind: typeof s.kind === 'number' ? s.kind : (KINDS[s.kind] ?? 0),
              startNs: BigInt(s.startTimeUnixNano),
              endNs: BigInt(s.endTimeUnixNano),
              attributes: attrs(s.attributes),
              events: s.events.map((e) => ({ name: e.name, attributes: attrs(e.attributes) })),
              statusCode: typeof s.status?.code === 'number' ? s.status.code : (STATUS[s.status?.code ?? ''] ?? 0),
              statusMessage: s.status?.message ?? '',
              resource,
            });
      }
      callback(null, {});
    },
  });
  const credentials = opts.tls
    ? grpc.ServerCredentials.createSsl(null, [{ cert_chain: Buffer.from(opts.tls.cert), private_key: Buffer.from(opts.tls.key) }], false)
    : grpc.ServerCredentials.createInsecure();
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', credentials, (err, p) => (err ? reject(err) : resolve(p))),
  );
  return {
    port,
    address: `127.0.0.1:${port}`,
    spans,
    get exports() {
      return exports;
    },
    stop: () =>
      new Promise<void>((resolve) => {
        server.tryShutdown(() => resolve());
        setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, 2_000).unref();
      }),
  };
}

/** Every string the spans hold: names, attribute and event values, status messages (to search for a marker). */
export function spanStrings(spans: readonly ReceivedSpan[]): string[] {
  const out: string[] = [];
  for (const s of spans) {
    out.push(s.name, s.statusMessage);
    for (const [k, v] of Object.entries(s.attributes)) out.push(k, String(v));
    for (const e of s.events) {
      out.push(e.name);
      for (const [k, v] of Object.entries(e.attributes)) out.push(k, String(v));
    }
    for (const [k, v] of Object.entries(s.resource)) out.push(k, String(v));
  }
  return out;
}

/** A W3C traceparent's parts. */
export function parseTraceparent(tp: string): { traceId: string; spanId: string; sampled: boolean } {
  const [, traceId, spanId, flags] = tp.split('-');
  return { traceId: traceId ?? '', spanId: spanId ?? '', sampled: ((Number.parseInt(flags ?? '0', 16) || 0) & 1) === 1 };
}
