// The one small interface every P/D wire protocol is written against: the pair the router chose, and the hops it can
// make for it (a prefill call read whole, the decode call streamed to the client with failover, a prefill 4xx
// passed back). Each protocol is one function over it (vllm-nixl.ts, llm-d-sidecar.ts, sglang.ts).
import type { Endpoint } from '../../core/endpoint.js';
import type { ResponseSink } from '../../core/exchange.js';
import type { DecodeOnlyReason } from '../../core/pd.js';
import type { ForwardResult } from '../forwarder.js';
import type { CallOutcome, EngineCall } from './engine-call.js';

/** What a prefill call came to, once judged (and reported: metrics, passive health). */
export type PrefillVerdict =
  | { readonly kind: 'ok'; readonly answer: Extract<CallOutcome, { kind: 'answered' }> }
  /** a 4xx: the request itself is refused, and the client gets that answer */
  | { readonly kind: 'refused'; readonly answer: Extract<CallOutcome, { kind: 'answered' }> }
  /**
   * 5xx, a timeout, a refused connection, an answer that is not one; `elsewhere`: another prefill endpoint may well
   * answer (the connection was refused or reset, the engine was busy or does not hold the adapter), as the plain path
   * fails over on the same outcomes
   */
  | { readonly kind: 'failed'; readonly detail: string; readonly elsewhere?: boolean }
  | { readonly kind: 'client-gone' };

export interface PdPair {
  /** the client's response */
  readonly sink: ResponseSink;
  /** the request's body as the client sent it (an alias's model replaced, a kv_transfer_params of its own removed) */
  readonly body: Buffer;
  /** the route path, without query (/v1/chat/completions, /v1/completions, /v1/responses) */
  readonly path: string;
  readonly decode: Endpoint;
  readonly prefill: Endpoint;
  /** sglang: the prefill's bootstrap port (its pod's annotation, else --sglang-bootstrap-port) */
  readonly bootstrapPort: number;
  /** Starts the prefill call (read whole; aborted if the client leaves). */
  callPrefill(body: Buffer, onStatus?: (status: number) => void): EngineCall;
  /** Reports a prefill outcome (metrics, passive health) and says what it means; `expectKv`: a 2xx must carry kv_transfer_params. */
  judgePrefill(outcome: CallOutcome, expectKv: boolean): PrefillVerdict;
  /** The decode call, streamed to `sink` (default: the client), failing over to another decode endpoint before any byte. */
  forwardDecode(body: Buffer, extraHeaders?: readonly string[], sink?: ResponseSink): Promise<ForwardResult>;
  /** The client's body to the decode side alone, counted as a decode-only fallback. */
  decodeOnly(reason: DecodeOnlyReason): Promise<ForwardResult>;
  /** The same request paired with another ready prefill endpoint not tried yet for it (counted as a failover), if any. */
  otherPrefill(): PdPair | undefined;
  /** Writes a refused prefill's answer to the client as it came. */
  passBack(verdict: Extract<PrefillVerdict, { kind: 'refused' }>): ForwardResult;
}

/** One P/D protocol: runs a request through the pair and says how it ended. */
export type PdProtocolRunner = (pair: PdPair) => Promise<ForwardResult>;
