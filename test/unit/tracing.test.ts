// Issue 26: the tracing settings (vllm_router's --otel-* flags over the OTEL_* variables) and the bounded export queue.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace-base';
import { loadRouterConfig } from '../../src/router/config/config.js';
import { REFUSED_FLAGS, ROUTER_FLAGS } from '../../src/router/config/router-flags.js';
import { BoundedSpanProcessor } from '../../src/router/tracing/bounded-export.js';
import { upstreamRequestHeaders } from '../../src/router/proxy/headers.js';

test("vllm_router's three --otel-* flags are taken, not refused", () => {
  for (const name of ['otel-endpoint', 'otel-service-name', 'otel-secure']) {
    assert.ok(!REFUSED_FLAGS.has(name), `--${name} is refused`);
    const spec = ROUTER_FLAGS.find((f) => f.name === name);
    assert.ok(spec && 'vllmRouter' in spec, `--${name} is in the table, marked as vllm_router's`);
  }
});

test('tracing is off unless an endpoint is configured', () => {
  assert.equal(loadRouterConfig([], {}).tracing, undefined);
  const c = loadRouterConfig(['--otel-service-name', 'x', '--otel-secure'], {});
  assert.equal(c.tracing, undefined);
  assert.ok(c.compatibilityNotes.some((n) => n.includes('no effect without an endpoint')));
});

test('--otel-endpoint HOST:PORT is OTLP over gRPC, insecure unless --otel-secure', () => {
  assert.deepEqual(loadRouterConfig(['--otel-endpoint', 'localhost:4317'], {}).tracing, {
    protocol: 'grpc',
    url: 'http://localhost:4317',
    endpoint: 'localhost:4317',
    serviceName: undefined,
  });
  const secure = loadRouterConfig(['--otel-endpoint', 'collector.obs:4317', '--otel-secure', '--otel-service-name', 'r1'], {});
  assert.equal(secure.tracing?.url, 'https://collector.obs:4317');
  assert.equal(secure.tracing?.serviceName, 'r1');
  assert.equal(loadRouterConfig(['--otel-endpoint', '[::1]:4317'], {}).tracing?.url, 'http://[::1]:4317');
  // the router's own variables work as for every flag
  assert.equal(loadRouterConfig([], { LLM_ROUTER_OTEL_ENDPOINT: 'c:4317' }).tracing?.url, 'http://c:4317');
});

test('an http(s) URL: gRPC, or OTLP/HTTP protobuf when it ends in /v1/traces', () => {
  assert.equal(loadRouterConfig(['--otel-endpoint', 'https://c:4317'], {}).tracing?.protocol, 'grpc');
  const http = loadRouterConfig(['--otel-endpoint', 'http://c:4318/v1/traces'], {}).tracing;
  assert.equal(http?.protocol, 'http/protobuf');
  assert.equal(http?.url, 'http://c:4318/v1/traces');
  assert.throws(() => loadRouterConfig(['--otel-endpoint', 'http://c:4317', '--otel-secure'], {}), /contradicts/);
  assert.throws(() => loadRouterConfig(['--otel-endpoint', 'ftp://c:4317'], {}), /http or https/);
  assert.throws(() => loadRouterConfig(['--otel-endpoint', 'no-port'], {}), /HOST:PORT/);
});

test('without the flag, the standard OTEL_EXPORTER_OTLP_* variables turn tracing on; the SDK reads them itself; the flag wins', () => {
  const env = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4317' };
  assert.deepEqual(loadRouterConfig([], env).tracing, {
    protocol: 'grpc',
    url: undefined,
    endpoint: 'http://collector:4317',
    serviceName: undefined,
  });
  assert.equal(loadRouterConfig([], { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4318/v1/traces' }).tracing?.protocol, 'http/protobuf');
  assert.equal(
    loadRouterConfig([], { ...env, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf' }).tracing?.protocol,
    'http/protobuf',
    'a protocol named in the environment is used',
  );
  assert.throws(() => loadRouterConfig([], { ...env, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' }), /grpc or http\/protobuf/);
  assert.equal(loadRouterConfig(['--otel-endpoint', 'flag:4317'], env).tracing?.url, 'http://flag:4317');
  assert.equal(loadRouterConfig([], { OTEL_EXPORTER_OTLP_ENDPOINT: '  ' }).tracing, undefined, 'a blank variable is unset');
});

test("with tracing on, the client's traceparent and tracestate stay behind; off, they pass as before", () => {
  const raw = ['Traceparent', '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', 'tracestate', 'k=v', 'x-other', '1'];
  const opts = { requestId: 'r', contentLength: 2, engineAuthorization: undefined, forwardClientAuth: false };
  const on = upstreamRequestHeaders(raw, { ...opts, dropTraceContext: true });
  assert.ok(!on.some((h) => /^trace(parent|state)$/i.test(h)));
  assert.ok(on.includes('x-other'));
  const off = upstreamRequestHeaders(raw, opts);
  assert.ok(off.includes('Traceparent') && off.includes('tracestate'));
});

/** An exporter that holds every batch until told how it went. */
class HeldExporter implements SpanExporter {
  readonly batches: { spans: number; done: (r: ExportResult) => void }[] = [];
  /** Once set, batches (held and new) are taken at once, so the processor can shut down. */
  releaseAll = false;
  export(spans: ReadableSpan[], done: (r: ExportResult) => void): void {
    if (this.releaseAll) done({ code: ExportResultCode.SUCCESS });
    else this.batches.push({ spans: spans.length, done });
  }
  async shutdown(): Promise<void> {}
}

test('the export queue is bounded: spans beyond it are dropped and counted, and so are batches the collector did not take', async () => {
  const exporter = new HeldExporter();
  const processor = new BoundedSpanProcessor(exporter, {
    maxQueueSize: 3,
    maxExportBatchSize: 2,
    scheduledDelayMillis: 10,
    exportTimeoutMillis: 60_000,
  });
  const span = {
    spanContext: () => ({ traceId: '1'.repeat(32), spanId: '2'.repeat(16), traceFlags: 1 }),
    resource: { asyncAttributesPending: false },
  } as unknown as ReadableSpan;
  for (let i = 0; i < 5; i++) processor.onEnd(span);
  assert.equal(processor.dropped.queueFull, 2, 'three wait; two found the queue full');
  await new Promise((r) => setTimeout(r, 50));
  assert.ok(exporter.batches.length >= 1);
  const first = exporter.batches[0] as (typeof exporter.batches)[number];
  first.done({ code: ExportResultCode.FAILED, error: new Error('collector down') });
  assert.equal(processor.dropped.exportFailed, first.spans);
  // the failed batch's spans left the queue: there is room again
  processor.onEnd(span);
  assert.equal(processor.dropped.queueFull, 2);
  // a batch still held would keep its 60 s export timer (and this test process) alive: take the rest and shut down
  exporter.releaseAll = true;
  for (const b of exporter.batches.splice(1)) b.done({ code: ExportResultCode.SUCCESS });
  await processor.shutdown();
});
