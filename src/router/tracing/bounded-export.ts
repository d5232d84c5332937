// Spans leave the process in batches (the SDK's BatchSpanProcessor) through a queue that never grows past its bound and
// never makes a request wait: a span that finds the queue full is dropped, and so is a batch the collector did not
// take (down, refusing, too slow). Both are counted (llm_router_otel_spans_dropped_total{reason}).
import type { Context } from '@opentelemetry/api';
import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import { BatchSpanProcessor, type ReadableSpan, type Span, type SpanExporter, type SpanProcessor } from '@opentelemetry/sdk-trace-base';

export interface DroppedSpans {
  /** spans that found the queue full */
  queueFull: number;
  /** spans of batches the collector did not take */
  exportFailed: number;
}

/** The exporter, with each batch's result counted: spans not taken are dropped, and the queue has room for more. */
class CountingExporter implements SpanExporter {
  constructor(
    private readonly inner: SpanExporter,
    private readonly settled: (spans: number, result: ExportResult) => void,
  ) {}

  export(spans: ReadableSpan[], resultCallback: (result: ExportResult) => void): void {
    let once = false;
    this.inner.export(spans, (result) => {
      if (once) return;
      once = true;
      this.settled(spans.length, result);
      resultCallback(result);
    });
  }

  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.inner.forceFlush?.() ?? Promise.resolve();
  }
}

export interface BoundedOptions {
  /** spans waiting for export at most (OTEL_BSP_MAX_QUEUE_SIZE, default 2048) */
  readonly maxQueueSize: number;
  readonly maxExportBatchSize: number;
  readonly scheduledDelayMillis: number;
  readonly exportTimeoutMillis: number;
  /** a batch the collector did not take (for a rate-limited log line) */
  readonly onExportFailed?: (spans: number, error: Error | undefined) => void;
}

/**
 * A BatchSpanProcessor behind a count of the spans handed to it and not yet settled (queued or being exported): past
 * `maxQueueSize` a span is dropped here, so the batch processor's own queue, which drops without telling, never fills.
 */
export class BoundedSpanProcessor implements SpanProcessor {
  readonly dropped: DroppedSpans = { queueFull: 0, exportFailed: 0 };
  private pending = 0;
  private readonly batch: BatchSpanProcessor;

  constructor(
    exporter: SpanExporter,
    private readonly opts: BoundedOptions,
  ) {
    const counting = new CountingExporter(exporter, (n, result) => {
      this.pending = Math.max(0, this.pending - n);
      if (result.code === ExportResultCode.SUCCESS) return;
      this.dropped.exportFailed += n;
      opts.onExportFailed?.(n, result.error);
    });
    this.batch = new BatchSpanProcessor(counting, {
      maxQueueSize: opts.maxQueueSize,
      maxExportBatchSize: Math.min(opts.maxExportBatchSize, opts.maxQueueSize),
      scheduledDelayMillis: opts.scheduledDelayMillis,
      exportTimeoutMillis: opts.exportTimeoutMillis,
    });
  }

  onStart(_span: Span, _parentContext: Context): void {}

  onEnd(span: ReadableSpan): void {
    if (this.pending >= this.opts.maxQueueSize) {
      this.dropped.queueFull++;
      return;
    }
    this.pending++;
    this.batch.onEnd(span);
  }

  forceFlush(): Promise<void> {
    return this.batch.forceFlush();
  }

  shutdown(): Promise<void> {
    return this.batch.shutdown();
  }
}
