// Tracing's own health: spans that never reached the collector. Read from the tracing pipeline at scrape time
// (src/router/tracing/bounded-export.ts counts them); 0 while tracing is off.
import { Counter, type Registry } from 'prom-client';

export interface SpanDrops {
  /** spans that found the export queue full */
  readonly queueFull: number;
  /** spans of batches the collector did not take (down, refusing, too slow) */
  readonly exportFailed: number;
}

export function registerSpanDrops(registry: Registry, drops: () => SpanDrops | undefined): void {
  new Counter({
    name: 'llm_router_otel_spans_dropped_total',
    help: 'Trace spans dropped instead of exported: reason="queue_full" (the bounded export queue was full), reason="export_failed" (the collector did not take their batch)',
    labelNames: ['reason'],
    registers: [registry],
    collect() {
      this.reset();
      const d = drops();
      this.inc({ reason: 'queue_full' }, d?.queueFull ?? 0);
      this.inc({ reason: 'export_failed' }, d?.exportFailed ?? 0);
    },
  });
}
