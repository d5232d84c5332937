// One attempt to forward a request to one engine, streaming the answer to the client chunk by chunk.
// It reports how the attempt ended so the caller can fail over (only while nothing reached the client).
import type { ClientGone } from '../core/client-gone.js';
import type { ResponseSink } from '../core/exchange.js';
import type { FailureKind } from '../core/forward.js';
import type { MissingAdapterAnswer } from '../core/lora.js';
import { adapterMissingAtHead, heldSaysMissing, mayHold } from './adapter-missing.js';
import { frameAnswer } from './answer-framing.js';
import { ClientWriter } from './client-writer.js';
import type { EngineClient, EngineHandler } from './engine-client.js';
import { downstreamResponseHeaders } from './headers.js';
import { completeEvents, streamErrorEvent } from './sse-events.js';
import type { RelayFault, StreamRelay } from './migration/relay.js';
import { armTotalTimer } from './total-deadline.js';

export { lastEventEnd } from './sse-events.js';

export type AttemptOutcome =
  /** the engine's whole response reached the client (any status) */
  | { readonly kind: 'done'; readonly status: number }
  /** nothing reached the client; another endpoint may be tried */
  | { readonly kind: 'retryable'; readonly failure: FailureKind; readonly detail: string }
  /** nothing reached the client, but trying elsewhere is wrong (a timeout: the engine may still be working; a protocol error: it answered, badly) */
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
  /** a request for a LoRA adapter: the engine's answer that it does not hold it is failure model-missing, not passed on */
  readonly adapterMissing?: MissingAdapterAnswer;
  readonly idleTimeoutMs: number;
  readonly headersTimeoutMs: number;
  /** the request's one "client gone" signal (made at admission): it ends the attempt whenever the client leaves */
  readonly gone: ClientGone;
  /** called once, when the first byte of the answer's body is handed to the client (time to first byte) */
  readonly onFirstByte?: () => void;
  /**
   * A stream that may be continued on another engine (src/router/proxy/migration): its events go through the relay,
   * and a stream the engine breaks is left open (outcome broken) for the migration runner to continue or end.
   */
  readonly relay?: StreamRelay;
}

class ClientGoneError extends Error {
  readonly code = 'LLM_ROUTER_CLIENT_GONE';
}
/**
 * The engine client's body timer ran out while the router held the engine's answer back because its client was not
 * reading (src/router/proxy/h1/connection.ts): the client stopped taking bytes for --idle-timeout. Not the engine's fault.
 */
export const CLIENT_STALLED_CODE = 'LLM_ROUTER_CLIENT_STALLED';
/** The engine's answer cannot be passed on as framed (found by the router's own checks, after the engine client's). */
export class UpstreamProtocolError extends Error {
  readonly code = 'LLM_ROUTER_UPSTREAM_PROTOCOL';
}
/** The relay found the engine's stream broken (an error event, a chunk that is not JSON): the engine's request is ended. */
class RelayFaultError extends Error {
  readonly code = 'LLM_ROUTER_STREAM_FAULT';
}

const CONNECT_CODES = new Set([
  'ECONNREFUSED',
  'UND_ERR_CONNECT_TIMEOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EADDRNOTAVAIL',
]);
/** a TLS handshake that failed (certificate not trusted, expired, for another name; protocol mismatch): no connection */
const TLS_CODE = /^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_|HOSTNAME_MISMATCH|ERR_OSSL_)/;
/** an answer that breaks HTTP/1.1's framing rules: ours (parser, handler) and undici's (llhttp's HPE_* codes, length mismatch) */
const PROTOCOL_CODES = new Set(['LLM_ROUTER_H1_PARSE', 'LLM_ROUTER_UPSTREAM_PROTOCOL', 'UND_ERR_RES_CONTENT_LENGTH_MISMATCH']);

export function classify(err: unknown): FailureKind {
  const code = (err as { code?: string }).code ?? '';
  if (CONNECT_CODES.has(code) || TLS_CODE.test(code)) return 'connect';
  if (code === 'UND_ERR_HEADERS_TIMEOUT') return 'headers-timeout';
  if (code === 'UND_ERR_BODY_TIMEOUT') return 'idle-timeout';
  if (code === 'LLM_ROUTER_TOTAL_TIMEOUT') return 'total-timeout';
  if (PROTOCOL_CODES.has(code) || code.startsWith('HPE_')) return 'protocol';
  if (code === 'ECONNRESET' || code === 'EPIPE' || code === 'UND_ERR_SOCKET' || code === 'UND_ERR_CLOSED') return 'reset';
  return 'other';
}

/** Streams one attempt. Resolves exactly once; never rejects. */
export function attempt(pool: EngineClient, req: AttemptRequest, res: ResponseSink, totalDeadline: number): Promise<AttemptOutcome> {
  // a client that has left already costs no engine request
  if (req.gone.gone) return Promise.resolve(CLIENT_GONE);
  return new Promise<AttemptOutcome>((resolve) => {
    const handler = new AttemptHandler(req, res, resolve);
    if (totalDeadline > 0) handler.limitTo(totalDeadline);
    pool.dispatch(
      {
        method: req.method,
        path: req.path,
        headers: req.headers,
        body: req.body,
        headersTimeout: req.headersTimeoutMs,
        bodyTimeout: req.idleTimeoutMs,
      },
      handler,
    );
  });
}

const CLIENT_GONE: AttemptOutcome = { kind: 'client-gone' };

/**
 * The engine client's view of one attempt. A class rather than closures: the request path allocates one object per attempt.
 *
 * The router frames what it writes to the client itself; the engine's Content-Length and Transfer-Encoding are never
 * copied. An event stream is chunked (the router may have to end it with an error event of its own). Another answer
 * with a Content-Length gets that length only because exactly that many bytes will be written: the bytes are counted,
 * and an engine that sends more or fewer fails the attempt. Anything else is chunked (close-delimited for an HTTP/1.0
 * client, which node:http decides). A non-stream head waits until its first body byte or the end of the answer, so an
 * answer refused at its very end (bytes beyond it in the same read) still gets a clean 502. Once the client has seen
 * a head, an answer that cannot be completed as framed ends with the connection closed, never with bytes appended.
 *
 * Body bytes go out without copying, with two exceptions that save a write each: a body of known length goes out with
 * end() when its last byte arrives, and the SSE events parsed from one socket read go out in one write.
 *
 * An event stream goes out whole events at a time: the bytes after the last complete event (an event the engine split
 * over several reads) wait for the rest of it. A client's parser dispatches an event only at its end anyway, so this
 * delays nothing it could use; and an engine that dies mid-event leaves nothing half-sent: the partial event is
 * dropped, as a spec-following parser drops one cut by the end of the stream, and the router's error event starts on
 * an event boundary.
 *
 * Its jobs live beside it: the framing of the answer (./answer-framing.ts), event boundaries and the router's error
 * event (./sse-events.ts), back-pressure and the first byte (./client-writer.ts, its base class), whether the engine
 * lacks the adapter (./adapter-missing.ts) and the total timer (./total-deadline.ts).
 */
class AttemptHandler extends ClientWriter implements EngineHandler {
  private settled = false;
  private abortFn: ((err?: Error) => void) | undefined = undefined;
  private status = 0;
  /** the client has seen the head */
  private committed = false;
  /** the head to write with the first body byte (non-stream answers) */
  private headPending: string[] | undefined = undefined;
  private discarding = false;
  /** an answer held whole until its body says whether the engine lacks the adapter (SGLang's 400) */
  private held: Buffer[] | undefined = undefined;
  private heldBytes = 0;
  /** an event stream (how the answer is framed: ./answer-framing.ts) */
  sse = false;
  /** 204 or 304: no body may follow */
  bodyless = false;
  /** bytes of the body still to write when the router declared a Content-Length, else -1 */
  remaining = -1;
  private totalTimer: NodeJS.Timeout | undefined = undefined;
  private ended = false;
  /** chunks of the current socket read, written together in a microtask */
  private pending: Buffer[] | undefined = undefined;
  /** an event stream: the bytes of its incomplete last event, not yet written (./sse-events.ts) */
  partial: Buffer | undefined = undefined;
  /** an event stream: what the client has been sent ends on an event boundary */
  atBoundary = true;
  /** what the relay found wrong with the engine's stream */
  private relayFault: Omit<RelayFault, 'before'> | undefined = undefined;
  private readonly onClientClose = (): void => this.clientClosed();
  private readonly flushPending = (): void => this.flush();

  constructor(
    private readonly req: AttemptRequest,
    res: ResponseSink,
    private readonly resolve: (outcome: AttemptOutcome) => void,
  ) {
    super(res, req.onFirstByte);
    req.gone.on(this.onClientClose);
  }

  limitTo(totalDeadline: number): void {
    this.totalTimer = armTotalTimer(totalDeadline, (err) => this.abortFn?.(err));
  }

  private finish(outcome: AttemptOutcome): void {
    if (this.settled) return;
    this.settled = true;
    if (this.totalTimer) clearTimeout(this.totalTimer);
    this.req.gone.off(this.onClientClose);
    this.stopDraining();
    this.resolve(outcome);
  }

  private clientClosed(): void {
    if (this.settled) return;
    // settled first: the engine client reports the abort to onError, which must not read it as an engine failure
    this.finish(CLIENT_GONE);
    this.abortFn?.(new ClientGoneError('client closed the connection'));
  }

  /** Ends the engine's request: the engine client destroys its connection and reports the error to onError. */
  private refuse(detail: string): false {
    this.abortFn?.(new UpstreamProtocolError(detail));
    return false;
  }

  private commit(): void {
    const head = this.headPending as string[];
    this.headPending = undefined;
    this.committed = true;
    this.res.writeHead(this.status, head);
  }

  onConnect(abort: (err?: Error) => void): void {
    this.abortFn = abort;
    if (this.settled) abort(new ClientGoneError('client closed the connection'));
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[], resume: () => void): boolean {
    if (statusCode < 200) return true;
    this.status = statusCode;
    if (this.req.relay?.continuing === true) return this.continuationHead(statusCode, rawHeaders, resume, this.req.relay);
    const adapterMissing = adapterMissingAtHead(this.req.adapterMissing, statusCode);
    if ((statusCode === 503 && this.req.retryOnEngine503) || adapterMissing === 'missing') {
      // drain the small error body so the connection stays reusable, then try elsewhere
      this.discarding = true;
      return true;
    }
    const head = downstreamResponseHeaders(rawHeaders, this.req.requestId);
    const refused = frameAnswer(statusCode, head, this);
    if (refused !== undefined) return this.refuse(refused);
    this.resumeFn = resume;
    const res = this.res;
    if (res.destroyed) return false;
    this.headPending = head.headers;
    if (adapterMissing === 'judge-body' && !this.sse) this.held = [];
    if (this.sse) {
      // the stream's head goes out now: time to first token is the client's to see
      this.commit();
      res.flushHeaders();
      this.req.relay?.opened();
    }
    return true;
  }

  /**
   * The head of an engine continuing a stream (migration): the client has its head already, so none goes out. An
   * answer that is not an event stream of status 200 cannot be passed on: drained, and this engine did not continue.
   */
  private continuationHead(statusCode: number, rawHeaders: Buffer[], resume: () => void, relay: StreamRelay): boolean {
    const head = downstreamResponseHeaders(rawHeaders, this.req.requestId);
    const refused = frameAnswer(statusCode, head, this);
    if (refused !== undefined) return this.refuse(refused);
    if (statusCode !== 200 || !this.sse) {
      this.sse = false;
      this.discarding = true;
      return true;
    }
    this.resumeFn = resume;
    if (this.res.destroyed) return false;
    this.committed = true;
    relay.opened();
    return true;
  }

  onData(chunk: Buffer): boolean {
    if (this.discarding || this.res.destroyed) return true;
    if (this.held !== undefined) {
      this.held.push(chunk);
      this.heldBytes += chunk.length;
      // longer than any "adapter not loaded" error: the client's own answer, passed on as it came
      return mayHold(this.heldBytes) || this.release();
    }
    if (this.bodyless) return this.refuse(`the engine sent a body on a ${this.status}`);
    if (this.headPending !== undefined) this.commit();
    if (this.remaining >= 0) {
      if (chunk.length > this.remaining) return this.refuse('the engine sent more bytes than its Content-Length');
      this.remaining -= chunk.length;
      if (!this.firstByte && chunk.length > 0) this.firstBodyByte();
      if (this.remaining === 0) {
        this.ended = true;
        this.res.end(chunk);
        return true;
      }
      return this.write(chunk);
    }
    if (this.pending) {
      this.pending.push(chunk);
    } else {
      this.pending = [chunk];
      queueMicrotask(this.flushPending);
    }
    return !this.paused;
  }

  private flush(): void {
    const chunks = this.pending;
    this.pending = undefined;
    if (!chunks || this.res.destroyed) return;
    const data = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks);
    if (this.sse) {
      // complete events go out; the bytes of an incomplete last one wait for the rest of it
      const events = completeEvents(this, data);
      if (events !== undefined) this.writeEvents(events);
    } else this.write(data);
  }

  /** Complete events go out, through the relay when the stream may be continued elsewhere. */
  private writeEvents(events: Buffer): void {
    const relay = this.req.relay;
    if (relay === undefined) {
      this.write(events);
      return;
    }
    // after a fault nothing more of this engine's stream goes out (an engine client whose abort reports later)
    if (this.relayFault !== undefined) return;
    const out = relay.take(events, this.atBoundary);
    if (Buffer.isBuffer(out)) {
      if (out.length > 0) this.write(out);
      return;
    }
    if (out.before !== undefined) this.write(out.before);
    // the engine's stream is broken though its connection is not: its request is ended (onError, unless it is complete)
    this.relayFault ??= { failure: out.failure, detail: out.detail };
    this.abortFn?.(new RelayFaultError(out.detail));
  }

  onComplete(): void {
    if (this.settled) return;
    if (this.held !== undefined) {
      if (heldSaysMissing(this.req.adapterMissing, this.status, this.held)) this.discarding = true;
      else this.release();
    }
    if (this.discarding) {
      this.finish(this.discarded());
      return;
    }
    if (this.remaining > 0) {
      // the engine client said the body is complete, yet fewer bytes than declared arrived: the head promised a length
      this.onError(new UpstreamProtocolError('the engine sent fewer bytes than its Content-Length'));
      return;
    }
    if (this.headPending !== undefined && !this.res.destroyed) this.commit();
    this.flush();
    if (this.settled) return;
    const relay = this.req.relay;
    if (relay !== undefined && this.sse && !this.res.destroyed) {
      // a stream that ended before its end (or within an event) is broken: left open for the migration runner
      const fault =
        this.relayFault ??
        (this.partial !== undefined && !relay.done
          ? { failure: 'protocol' as const, detail: 'the engine ended its stream within an event' }
          : relay.ended());
      if (fault !== undefined) {
        this.partial = undefined;
        this.finish({ kind: 'broken', status: this.status, failure: fault.failure, detail: fault.detail });
        return;
      }
    }
    if (!this.ended) {
      // an event stream that ended within an event: its last bytes go out as the engine sent them
      const rest = this.partial;
      this.partial = undefined;
      if (rest !== undefined && !this.firstByte) this.firstBodyByte();
      if (rest !== undefined) this.res.end(rest);
      else this.res.end();
    }
    this.finish({ kind: 'done', status: this.status });
  }

  /**
   * what an answer drained instead of passed on says: the engine is busy (503), or does not hold the adapter; for a
   * continuation, also an engine's 5xx, or its refusal (a 4xx, an answer that is no stream: not tried elsewhere)
   */
  private discardedFailure(): FailureKind {
    if (this.status === 503) return 'engine-busy';
    if (this.req.relay?.continuing !== true) return 'model-missing';
    if (this.status === 404 && this.req.adapterMissing !== undefined) return 'model-missing';
    return this.status >= 500 ? 'engine-5xx' : this.status >= 400 ? 'engine-4xx' : 'protocol';
  }

  private discarded(detail = `engine answered ${this.status}`): Extract<AttemptOutcome, { kind: 'retryable' | 'failed' }> {
    const failure = this.discardedFailure();
    return failure === 'engine-4xx' || failure === 'protocol'
      ? { kind: 'failed', failure, detail }
      : { kind: 'retryable', failure, detail };
  }

  /** Passes a held answer on through the usual checks, as if it had just arrived. */
  private release(): boolean {
    const chunks = this.held ?? [];
    this.held = undefined;
    let more = true;
    for (const chunk of chunks) more = this.onData(chunk);
    return more;
  }

  onError(err: Error): void {
    if (this.settled) return;
    if (err instanceof ClientGoneError) {
      this.finish(CLIENT_GONE);
      return;
    }
    const res = this.res;
    if ((err as { code?: string }).code === CLIENT_STALLED_CODE) {
      // the client took no byte for --idle-timeout: it is treated as gone, and the engine is not blamed
      this.finish(CLIENT_GONE);
      res.destroy();
      return;
    }
    const fault = err instanceof RelayFaultError ? this.relayFault : undefined;
    const failure = fault?.failure ?? classify(err);
    const detail = fault?.detail ?? `${(err as { code?: string }).code ?? err.name}: ${err.message}`;
    if (this.committed) {
      // the complete events read before the failure still go out (a relay's fault came from them: they went)
      if (this.sse && !res.destroyed && fault === undefined) this.flush();
      if (this.sse && this.req.relay !== undefined) {
        // the stream stays open: the migration runner continues it on another engine or ends it with the error event
        this.partial = undefined;
        this.finish({ kind: 'broken', status: this.status, failure, detail });
        return;
      }
      // settled before the client's response is ended or cut: a response whose destroy() says 'close' at once (the fast
      // path's) must not make this engine failure look like a client that left
      this.finish({ kind: 'broken', status: this.status, failure, detail });
      if (this.sse && !res.destroyed) {
        // the stream is chunked by the router: its own error event ends it cleanly, on an event boundary (the engine's
        // incomplete last event is dropped whole)
        const event = streamErrorEvent(this, failure);
        if (!this.firstByte) this.firstBodyByte();
        res.end(event);
      } else {
        // the client was promised a length or a body it will not get whole: close rather than add anything
        res.destroy();
      }
      return;
    }
    if (failure === 'protocol') this.finish({ kind: 'failed', failure, detail });
    else if (this.discarding) this.finish(this.discarded(detail));
    else if (failure === 'connect' || failure === 'reset' || failure === 'other') this.finish({ kind: 'retryable', failure, detail });
    else this.finish({ kind: 'failed', failure, detail });
  }
}
