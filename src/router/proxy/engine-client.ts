// What the request path needs of an engine client: one keep-alive pool per engine origin that carries one request per
// connection, caps its connections and queues requests beyond the cap, speaks http or https, and reports a response
// through the handler interface of undici's Dispatcher (onConnect, onHeaders, onData, onComplete, onError).
import type { EngineTls } from '../config/engine-tls.js';
import type { EngineClientStats } from '../core/engine.js';

export interface EngineDispatchOptions {
  /** e.g. 'POST', 'GET' */
  readonly method: string;
  /** request-target, e.g. '/v1/chat/completions?x=1' */
  readonly path: string;
  /** flat [name, value, name, value...]; already filtered, includes content-length when there is a body; no host */
  readonly headers: readonly string[];
  readonly body: Buffer | undefined;
  /** ms from the request being written until the response head is complete; 0 = none */
  readonly headersTimeout: number;
  /** ms of silence allowed between response body reads; 0 = none */
  readonly bodyTimeout: number;
}

export interface EngineHandler {
  /** called synchronously inside dispatch(), before any other callback */
  onConnect(abort: (err?: Error) => void): void;
  /** 1xx heads may be reported too, then the final head; false = pause reading until resume() */
  onHeaders(statusCode: number, rawHeaders: Buffer[], resume: () => void): boolean;
  /** body bytes, already de-chunked; false = pause reading until resume() */
  onData(chunk: Buffer): boolean;
  /** the whole body arrived */
  onComplete(trailers: unknown): void;
  /** at most once, and never after onComplete */
  onError(err: Error): void;
}

export interface EngineClient {
  dispatch(options: EngineDispatchOptions, handler: EngineHandler): void;
  stats(): EngineClientStats;
  /** No new dispatches; resolves when in-flight requests have finished and every socket is closed. */
  close(): Promise<void>;
  /** Aborts everything now (in-flight handlers get onError) and closes every socket. */
  destroy(): Promise<void>;
}

export interface EngineClientOptions {
  /** 0 = no timeout of our own */
  readonly connectTimeoutMs: number;
  /** idle sockets are closed after this; 0 = sockets are not kept idle */
  readonly keepAliveTimeoutMs: number;
  /** connections per engine at most; requests beyond them wait in arrival order for one to be free; 0 = no cap */
  readonly maxConnections: number;
  /** for https origins: what to trust, and the client certificate */
  readonly tls: EngineTls;
}
