// One attempt to forward a request to one engine, streaming the answer to the client chunk by chunk.
// It reports how the attempt ended so the caller can fail over (only while nothing reached the client).
import type { ServerResponse } from 'node:http';
import type { Dispatcher } from 'undici';
import { downstreamResponseHeaders } from './headers.js';

export type FailureKind = 'connect' | 'reset' | 'engine-5xx' | 'engine-busy' | 'headers-timeout' | 'idle-timeout' | 'total-timeout' | 'other';

export type AttemptOutcome =
  /** the engine's whole response reached the client (any status) */
  | { readonly kind: 'done'; readonly status: number }
  /** nothing reached the client; another endpoint may be tried */
  | { readonly kind: 'retryable'; readonly failure: FailureKind; readonly detail: string }
  /** nothing reached the client, but trying elsewhere is wrong (a timeout: the engine may still be working) */
  | { readonly kind: 'failed'; readonly failure: FailureKind; readonly detail: string }
  /** the response had started; it was ended with an error event (SSE) or cut */
  | { readonly kind: 'broken'; readonly status: number; readonly failure: FailureKind; readonly detail: string }
  | { readonly kind: 'client-gone' };

export interface AttemptRequest {
  readonly method: string;
  readonly path: string;
  readonly headers: string[];
  readonly body: Buffer;
  readonly requestId: string;
  /** whether an engine 503 (loading / back-pressure) should be retried elsewhere instead of passed through */
  readonly retryOnEngine503: boolean;
  readonly idleTimeoutMs: number;
  readonly headersTimeoutMs: number;
}

export class TotalTimeoutError extends Error {
  readonly code = 'LLM_ROUTER_TOTAL_TIMEOUT';
}
class ClientGoneError extends Error {
  readonly code = 'LLM_ROUTER_CLIENT_GONE';
}

const CONNECT_CODES = new Set(['ECONNREFUSED', 'UND_ERR_CONNECT_TIMEOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'EADDRNOTAVAIL']);

export function classify(err: unknown): FailureKind {
  const code = (err as { code?: string }).code ?? '';
  if (CONNECT_CODES.has(code)) return 'connect';
  if (code === 'UND_ERR_HEADERS_TIMEOUT') return 'headers-timeout';
  if (code === 'UND_ERR_BODY_TIMEOUT') return 'idle-timeout';
  if (code === 'LLM_ROUTER_TOTAL_TIMEOUT') return 'total-timeout';
  if (code === 'ECONNRESET' || code === 'EPIPE' || code === 'UND_ERR_SOCKET' || code === 'UND_ERR_CLOSED') return 'reset';
  return 'other';
}

function sseError(message: string, code: string): string {
  return `data: ${JSON.stringify({ error: { message, type: 'server_error', param: null, code } })}\n\n`;
}

/** Streams one attempt. Resolves exactly once; never rejects. */
export function attempt(dispatcher: Dispatcher, req: AttemptRequest, res: ServerResponse, totalDeadline: number): Promise<AttemptOutcome> {
  return new Promise<AttemptOutcome>((resolve) => {
    let settled = false;
    let abort: ((err?: Error) => void) | undefined;
    let status = 0;
    let committed = false;
    let discarding = false;
    let sse = false;
    let totalTimer: NodeJS.Timeout | undefined;

    const finish = (outcome: AttemptOutcome): void => {
      if (settled) return;
      settled = true;
      if (totalTimer) clearTimeout(totalTimer);
      res.off('close', onClientClose);
      resolve(outcome);
    };
    const onClientClose = (): void => {
      if (res.writableFinished) return;
      abort?.(new ClientGoneError('client closed the connection'));
      finish({ kind: 'client-gone' });
    };
    res.on('close', onClientClose);
    if (totalDeadline > 0) {
      const left = totalDeadline - Date.now();
      totalTimer = setTimeout(() => abort?.(new TotalTimeoutError('total request time exceeded')), Math.max(left, 1));
    }

    const handler: Dispatcher.DispatchHandler = {
      onConnect(abortFn: (err?: Error) => void) {
        abort = abortFn;
        if (settled) abortFn(new ClientGoneError('client closed the connection'));
      },
      onHeaders(statusCode: number, rawHeaders: Buffer[], resume: () => void) {
        if (statusCode < 200) return true;
        status = statusCode;
        if (statusCode === 503 && req.retryOnEngine503) {
          // drain the small error body so the connection stays reusable, then try elsewhere
          discarding = true;
          return true;
        }
        const head = downstreamResponseHeaders(rawHeaders, req.requestId);
        sse = head.contentType.startsWith('text/event-stream');
        committed = true;
        if (res.destroyed) return false;
        res.writeHead(statusCode, head.headers);
        if (sse) res.flushHeaders();
        res.on('drain', resume);
        return true;
      },
      onData(chunk: Buffer) {
        if (discarding || res.destroyed) return true;
        return res.write(chunk);
      },
      onComplete() {
        if (discarding) {
          finish({ kind: 'retryable', failure: 'engine-busy', detail: 'engine answered 503' });
          return;
        }
        res.end();
        finish({ kind: 'done', status });
      },
      onError(err: Error) {
        if (settled) return;
        if (err instanceof ClientGoneError) {
          finish({ kind: 'client-gone' });
          return;
        }
        const failure = classify(err);
        const detail = `${(err as { code?: string }).code ?? err.name}: ${err.message}`;
        if (committed) {
          if (sse && !res.destroyed) {
            const timeout = failure === 'idle-timeout' || failure === 'total-timeout';
            res.end(sseError(timeout ? 'The engine stopped sending in time; the stream was ended.' : 'The engine failed mid-stream; the stream was ended.', timeout ? 'upstream_timeout' : 'upstream_stream_error'));
          } else {
            res.destroy();
          }
          finish({ kind: 'broken', status, failure, detail });
          return;
        }
        if (discarding || failure === 'connect' || failure === 'reset' || failure === 'other') finish({ kind: 'retryable', failure: discarding ? 'engine-busy' : failure, detail });
        else finish({ kind: 'failed', failure, detail });
      },
    } as Dispatcher.DispatchHandler;

    dispatcherDispatch(dispatcher, req, handler);
  });
}

function dispatcherDispatch(dispatcher: Dispatcher, req: AttemptRequest, handler: Dispatcher.DispatchHandler): void {
  dispatcher.dispatch(
    {
      method: req.method as Dispatcher.HttpMethod,
      path: req.path,
      headers: req.headers,
      body: req.body,
      headersTimeout: req.headersTimeoutMs,
      bodyTimeout: req.idleTimeoutMs,
    },
    handler,
  );
}
