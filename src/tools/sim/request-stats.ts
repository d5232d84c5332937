// Request statistics: the resettable /_sim/stats counters, the Prometheus totals that never reset,
// and the per-request tracking that decides whether an inference request completed, failed or was aborted.
import { createHash } from 'node:crypto';
import type http from 'node:http';
import type { SlotQueue } from './queue.js';
import type { RecordedRequest, RecordedTraceparent, SimStats } from './types.js';

/** requests GET /_sim/requests keeps, newest last */
const RECORDED_REQUESTS = 32;
const UNRECORDED_HEADERS = new Set(['authorization', 'x-api-key', 'cookie']);
/** W3C trace contexts GET /_sim/traceparents keeps, newest last */
const RECORDED_TRACEPARENTS = 256;

/** One inference request in flight: what to undo when it ends, and whether a fault (not the client) cut it. */
export interface Exchange {
  readonly cleanup: Array<() => void>;
  resetBySim: boolean;
  /** the LoRA adapter the request names, when it names one: it needs room for it in the batch */
  adapter?: string;
}

export interface SuccessRecord {
  readonly finishReason: string;
  readonly prompt: number;
  readonly generated: number;
}

function emptyStats(): SimStats {
  return {
    received: 0,
    completed: 0,
    failed: 0,
    aborted: 0,
    running: 0,
    waiting: 0,
    byPath: {},
    byModel: {},
    pd: { prefilled: 0, transferred: 0, remote: 0, local: 0, malformed: 0, transferFailed: 0 },
  };
}

/** Destroys the request's socket as a fault does; the request then counts as failed, not aborted. */
export function resetSocket(res: http.ServerResponse, exchange: Exchange): void {
  exchange.resetBySim = true;
  res.socket?.destroy();
}

export class RequestStats {
  counters: SimStats = emptyStats();
  /** the last inference requests received, as they came */
  recent: RecordedRequest[] = [];
  /** the W3C trace context of the last requests that carried one, on any path but /_sim/ (GET /_sim/traceparents) */
  traceparents: RecordedTraceparent[] = [];
  // Prometheus counters are never reset: a reset would look like an engine restart to a scraper
  readonly successByReason: Record<string, number> = {};
  promptTokenTotal = 0;
  generationTokenTotal = 0;

  /** The counters with the queue's running and waiting numbers, as copies the caller may keep. */
  snapshot(queue: SlotQueue): SimStats {
    return {
      ...this.counters,
      running: queue.running,
      waiting: queue.waiting,
      byPath: { ...this.counters.byPath },
      byModel: { ...this.counters.byModel },
      pd: { ...this.counters.pd },
    };
  }

  reset(): void {
    this.counters = emptyStats();
    this.recent = [];
    this.traceparents = [];
  }

  /** Keeps the traceparent (and tracestate) a request came with, if any. */
  recordTraceparent(method: string, path: string, headers: http.IncomingHttpHeaders): void {
    const traceparent = headers.traceparent;
    if (typeof traceparent !== 'string') return;
    const tracestate = headers.tracestate;
    this.traceparents.push({
      method,
      path,
      traceparent,
      ...(typeof tracestate === 'string' ? { tracestate } : {}),
      at: Date.now(),
    });
    if (this.traceparents.length > RECORDED_TRACEPARENTS) this.traceparents.shift();
  }

  /** Keeps one received request for GET /_sim/requests. */
  record(
    path: string,
    headers: http.IncomingHttpHeaders,
    raw: Buffer,
    /** a body streamed by (the audio routes): its digest and length; `raw` is then empty when it was large */
    digest?: { sha256: string; bytes: number },
  ): void {
    const kept: Record<string, string> = {};
    for (const [name, value] of Object.entries(headers))
      if (value !== undefined && !UNRECORDED_HEADERS.has(name)) kept[name] = Array.isArray(value) ? value.join(', ') : value;
    this.recent.push({
      path,
      headers: kept,
      bodyBase64: raw.toString('base64'),
      bodySha256: digest?.sha256 ?? createHash('sha256').update(raw).digest('hex'),
      bodyBytes: digest?.bytes ?? raw.length,
    });
    if (this.recent.length > RECORDED_REQUESTS) this.recent.shift();
  }

  /** Counts the request once it ends: completed, failed, or aborted by its client. */
  track(res: http.ServerResponse): Exchange {
    const exchange: Exchange = { cleanup: [], resetBySim: false };
    res.on('close', () => {
      for (const undo of exchange.cleanup) undo();
      if (res.writableFinished) {
        if (res.statusCode < 400) this.counters.completed++;
        else this.counters.failed++;
      } else if (exchange.resetBySim) this.counters.failed++;
      else this.counters.aborted++;
    });
    return exchange;
  }

  recordSuccess({ finishReason, prompt, generated }: SuccessRecord): void {
    this.successByReason[finishReason] = (this.successByReason[finishReason] ?? 0) + 1;
    this.promptTokenTotal += prompt;
    this.generationTokenTotal += generated;
  }
}
