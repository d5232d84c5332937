// One call to an engine whose answer the router reads whole instead of streaming it to the client: the prefill
// call of a P/D request. It can be aborted (the client left, or the pair is given up) and never rejects.
import type { FailureKind } from '../../core/forward.js';
import { classify, UpstreamProtocolError } from '../attempt.js';
import { armTotalTimer } from '../total-deadline.js';
import type { EngineClient, EngineHandler } from '../engine-client.js';

/** a prefill answer is one token and some metadata; anything far larger is not one */
const MAX_ANSWER_BYTES = 8 * 1024 * 1024;

export type CallOutcome =
  | { readonly kind: 'answered'; readonly status: number; readonly headers: Buffer[]; readonly body: Buffer }
  | { readonly kind: 'failed'; readonly failure: FailureKind; readonly detail: string }
  | { readonly kind: 'aborted' };

export interface CallRequest {
  readonly path: string;
  readonly headers: readonly string[];
  readonly body: Buffer;
  readonly headersTimeoutMs: number;
  readonly idleTimeoutMs: number;
  /** ms since epoch when the whole request's time is over; 0 = none */
  readonly deadline: number;
  /** called with the status as soon as the head arrives (sglang opens the decode answer on a 2xx) */
  readonly onStatus?: (status: number) => void;
}

export interface EngineCall {
  readonly done: Promise<CallOutcome>;
  /** Ends the call now; `done` resolves to aborted unless it had settled. */
  abort(): void;
}

class Aborted extends Error {
  readonly code = 'LLM_ROUTER_ABORTED';
}

class BufferingHandler implements EngineHandler {
  private abortFn: ((err?: Error) => void) | undefined;
  private status = 0;
  private headers: Buffer[] = [];
  private readonly chunks: Buffer[] = [];
  private size = 0;
  private settled = false;
  private timer: NodeJS.Timeout | undefined;
  aborted = false;

  constructor(
    private readonly req: CallRequest,
    private readonly resolve: (o: CallOutcome) => void,
  ) {
    this.timer = armTotalTimer(req.deadline, (err) => this.abortFn?.(err));
  }

  abort(): void {
    if (this.settled) return;
    this.aborted = true;
    this.abortFn?.(new Aborted('the call was given up'));
    this.finish({ kind: 'aborted' });
  }

  private finish(o: CallOutcome): void {
    if (this.settled) return;
    this.settled = true;
    clearTimeout(this.timer);
    this.resolve(o);
  }

  onConnect(abort: (err?: Error) => void): void {
    this.abortFn = abort;
    if (this.aborted) abort(new Aborted('the call was given up'));
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[]): boolean {
    if (statusCode < 200) return true;
    this.status = statusCode;
    this.headers = rawHeaders;
    this.req.onStatus?.(statusCode);
    return true;
  }

  onData(chunk: Buffer): boolean {
    this.size += chunk.length;
    if (this.size > MAX_ANSWER_BYTES) {
      this.abortFn?.(new UpstreamProtocolError(`the answer is larger than ${MAX_ANSWER_BYTES} bytes`));
      return false;
    }
    this.chunks.push(chunk);
    return true;
  }

  onComplete(): void {
    this.finish({ kind: 'answered', status: this.status, headers: this.headers, body: Buffer.concat(this.chunks, this.size) });
  }

  onError(err: Error): void {
    if (err instanceof Aborted) return this.finish({ kind: 'aborted' });
    this.finish({ kind: 'failed', failure: classify(err), detail: `${(err as { code?: string }).code ?? err.name}: ${err.message}` });
  }
}

/** Sends one POST and reads its whole answer. */
export function callEngine(pool: EngineClient, req: CallRequest): EngineCall {
  let handler: BufferingHandler | undefined;
  const done = new Promise<CallOutcome>((resolve) => {
    handler = new BufferingHandler(req, resolve);
    pool.dispatch(
      {
        method: 'POST',
        path: req.path,
        headers: req.headers,
        body: req.body,
        headersTimeout: req.headersTimeoutMs,
        bodyTimeout: req.idleTimeoutMs,
      },
      handler,
    );
  });
  return { done, abort: () => handler?.abort() };
}
