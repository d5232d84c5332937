// The CLIENT span of one call to an engine (tracing on): an attempt of the forwarder, or a P/D prefill call. It names
// the endpoint, its role and the attempt's number, carries its context to the engine (the caller adds
// `span.propagation()` to the call's headers), and records the time to the first byte the client got and how the call
// ended. Never the body, the prompt or a header's value.
import type { Endpoint } from '../core/endpoint.js';
import type { EndpointRole } from '../core/pd.js';
import type { TraceSpan } from '../core/trace.js';
import {
  ATTEMPT,
  ENDPOINT,
  ERROR_TYPE,
  FAILURE,
  HTTP_REQUEST_METHOD,
  HTTP_RESPONSE_STATUS_CODE,
  OUTCOME,
  ROLE,
  SERVER_ADDRESS,
  SERVER_PORT,
  TIME_TO_FIRST_BYTE_MS,
  URL_PATH,
} from '../tracing/attributes.js';
import type { AttemptOutcome } from './attempt.js';
import type { CallOutcome } from './pd/engine-call.js';

export interface EngineSpan {
  readonly span: TraceSpan;
  readonly started: number;
  /** `inner` (the request's own first-byte callback), with the time to this attempt's first byte recorded first */
  onFirstByte(inner: (() => void) | undefined): () => void;
}

function hostAndPort(url: string): { host: string; port: number } | undefined {
  try {
    const u = new URL(url);
    return { host: u.hostname, port: Number(u.port) || (u.protocol === 'https:' ? 443 : 80) };
  } catch {
    return undefined;
  }
}

export function engineSpan(
  parent: TraceSpan,
  name: string,
  endpoint: Endpoint,
  role: EndpointRole,
  attempt: number,
  method: string,
  target: string,
): EngineSpan {
  const at = hostAndPort(endpoint.url);
  const query = target.indexOf('?');
  const span = parent.child(name, 'client', {
    [ENDPOINT]: endpoint.url,
    [ROLE]: role,
    [ATTEMPT]: attempt,
    [HTTP_REQUEST_METHOD]: method,
    [URL_PATH]: query < 0 ? target : target.slice(0, query),
    ...(at ? { [SERVER_ADDRESS]: at.host, [SERVER_PORT]: at.port } : {}),
  });
  const started = performance.now();
  return {
    span,
    started,
    onFirstByte: (inner) => () => {
      span.set(TIME_TO_FIRST_BYTE_MS, Math.round((performance.now() - started) * 10) / 10);
      inner?.();
    },
  };
}

/** Ends an attempt's span with its outcome (done, retryable, failed, broken, client-gone). */
export function endEngineSpan(s: EngineSpan, outcome: AttemptOutcome): void {
  const { span } = s;
  span.set(OUTCOME, outcome.kind);
  if (outcome.kind === 'done' || outcome.kind === 'broken') span.set(HTTP_RESPONSE_STATUS_CODE, outcome.status);
  if (outcome.kind === 'retryable' || outcome.kind === 'failed' || outcome.kind === 'broken') {
    span.set(FAILURE, outcome.failure);
    span.set(ERROR_TYPE, outcome.failure);
    span.fail(outcome.failure);
  } else if (outcome.kind === 'done' && outcome.status >= 500) {
    span.set(ERROR_TYPE, String(outcome.status));
    span.fail(`engine answered ${outcome.status}`);
  }
  span.end();
}

/** Ends a P/D prefill call's span with its outcome. */
export function endCallSpan(s: EngineSpan, outcome: CallOutcome): void {
  const { span } = s;
  span.set(OUTCOME, outcome.kind);
  if (outcome.kind === 'answered') {
    span.set(HTTP_RESPONSE_STATUS_CODE, outcome.status);
    span.set(TIME_TO_FIRST_BYTE_MS, Math.round((performance.now() - s.started) * 10) / 10);
    if (outcome.status >= 500) {
      span.set(ERROR_TYPE, String(outcome.status));
      span.fail(`prefill answered ${outcome.status}`);
    }
  } else if (outcome.kind === 'failed') {
    span.set(FAILURE, outcome.failure);
    span.set(ERROR_TYPE, outcome.failure);
    span.fail(outcome.failure);
  }
  span.end();
}
