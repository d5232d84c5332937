// OpenAI-compatible inference endpoints: read the body, find the model, ask the catalog, pick, forward.
import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { ModelCatalog } from '../catalog/catalog.js';
import type { Endpoint } from '../core/endpoint.js';
import type { Resolution } from '../core/model.js';
import { UNKNOWN_MODEL_LABEL, type RouterMetrics } from '../metrics/metrics.js';
import type { Forwarder } from '../proxy/forwarder.js';
import { upstreamRequestHeaders } from '../proxy/headers.js';
import { rewriteModel } from '../proxy/rewrite-model.js';
import type { Logger } from '../util/log.js';
import { QueueFullError } from '../scaling/hold-queue.js';
import type { Scaling } from '../scaling/index.js';
import type { SyncTracker } from '../discovery/sync.js';
import { BodyTooLargeError, discardBody, readBody } from './body.js';
import { errors, sendError, type RouterError } from './errors.js';
import type { InboundRequest, ResponseSink } from '../core/exchange.js';

/** Paths routed by the JSON body's `model`. */
export const INFERENCE_PATHS: readonly string[] = [
  '/v1/chat/completions', '/v1/completions', '/v1/embeddings', '/v1/responses', '/v1/rerank', '/rerank',
  '/v1/score', '/score', '/tokenize', '/detokenize', '/v1/messages',
];

export interface InferenceDeps {
  readonly catalog: ModelCatalog;
  readonly forwarder: Forwarder;
  readonly metrics: RouterMetrics;
  readonly log: Logger;
  readonly maxBodyBytes: number;
  readonly scaling: Scaling;
  /** discovery: an unknown model is only unknown once every source has listed */
  readonly sync: SyncTracker;
  readonly syncWaitMs: number;
  readonly engineAuthorization: string | undefined;
  readonly forwardClientAuth: boolean;
  /** rate and concurrency limits: a release function for an admitted request, or the error to answer */
  readonly admit: (req: InboundRequest) => (() => void) | RouterError;
}

/** how much of a refused body is read and thrown away so the client sees the 413 */
const DISCARD_LIMIT_BYTES = 64 * 1024 * 1024;

const REQUEST_ID_OK = /^[\x21-\x7e]{1,200}$/;

export function requestIdOf(req: InboundRequest): string {
  const given = req.headers['x-request-id'];
  return typeof given === 'string' && REQUEST_ID_OK.test(given) ? given : randomUUID();
}

type Parsed = { ok: true; body: Record<string, unknown>; model: string } | { ok: false; error: RouterError };

/** Parses only what routing needs; the bytes are forwarded as they came. */
export function parseInference(raw: Buffer): Parsed {
  let value: unknown;
  try {
    value = JSON.parse(raw.toString('utf8'));
  } catch (err) {
    return { ok: false, error: errors.invalidJson(raw.length === 0 ? 'the body is empty' : (err as Error).message) };
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    return { ok: false, error: errors.invalidJson(`got ${value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value}`) };
  }
  const body = value as Record<string, unknown>;
  const model = body.model;
  if (model === undefined || model === null) return { ok: false, error: errors.modelRequired() };
  if (typeof model !== 'string' || model.length === 0) return { ok: false, error: errors.modelRequired('"model" must be a non-empty string') };
  return { ok: true, body, model };
}

function unresolvedError(r: Exclude<Resolution, { kind: 'routable' }>, retryAfter: number): RouterError {
  return r.kind === 'unknown' ? errors.modelNotFound(r.requested) : errors.modelUnavailable(r.requested, r.state, retryAfter);
}

/**
 * Answers one inference request. `source` is where the body comes from: node:http's request stream, or the whole
 * body already read (the fast path reads it before calling).
 */
export async function handleInference(req: InboundRequest, res: ResponseSink, path: string, deps: InferenceDeps, source: IncomingMessage | Buffer): Promise<void> {
  const started = performance.now();
  const requestId = requestIdOf(req);
  let metricModel = '';
  let endpoint: Endpoint | undefined;
  let bodyBytes = 0;
  let release: (() => void) | undefined;
  const socket = req.socket;
  const writtenBefore = socket.bytesWritten;
  const answer = (err: RouterError): void => {
    sendError(res, err, { 'x-request-id': requestId });
    finish(err.status);
  };
  const finish = (status: number): void => {
    release?.();
    const ms = performance.now() - started;
    deps.metrics.answered(metricModel, status, ms / 1000);
    // the access log: what was asked of whom and how it ended; never the prompt, the answer or credentials
    if (deps.log.isLevelEnabled('info')) {
      deps.log.info(
        { requestId, path, model: metricModel, endpoint: endpoint?.url, status, ms: Math.round(ms), bytesIn: bodyBytes, bytesOut: socket.bytesWritten - writtenBefore },
        'request',
      );
    }
  };

  const admitted = deps.admit(req);
  if (typeof admitted !== 'function') {
    if (!Buffer.isBuffer(source)) source.resume();
    answer(admitted);
    return;
  }
  release = admitted;

  let raw: Buffer;
  if (Buffer.isBuffer(source)) raw = source;
  else {
    try {
      raw = await readBody(source, deps.maxBodyBytes);
    } catch (err) {
      if (err instanceof BodyTooLargeError) {
        // answer now, and keep reading (and dropping) what the client still sends, up to a bound, so that a client
        // that writes its whole body before reading gets the 413 instead of a reset connection
        void discardBody(source, DISCARD_LIMIT_BYTES).then((drained) => {
          if (!drained) source.socket.destroy();
        });
        answer(errors.bodyTooLarge(deps.maxBodyBytes));
      } else {
        finish(499);
      }
      return;
    }
  }
  bodyBytes = raw.length;
  const parsed = parseInference(raw);
  if (!parsed.ok) {
    answer(parsed.error);
    return;
  }
  let resolution = deps.catalog.resolve(parsed.model);
  if (resolution.kind === 'unknown' && !deps.sync.complete) {
    // a router that just started has not listed the cluster yet: "unknown" would be a guess, and a fatal one
    if (!(await deps.sync.whenSynced(deps.syncWaitMs))) return answer(errors.discoveryNotSynced(parsed.model));
    resolution = deps.catalog.resolve(parsed.model);
  }
  if (resolution.kind === 'unknown') {
    metricModel = UNKNOWN_MODEL_LABEL;
    answer(unresolvedError(resolution, 0));
    return;
  }
  metricModel = resolution.model;
  deps.metrics.demanded(resolution.model);
  const scaling = deps.scaling;
  scaling.demand.arrived(resolution.model);
  const retryAfter = (): number => scaling.coldStart.retryAfterSeconds(resolution.model);
  let current: Resolution = resolution;
  if ((current.kind === 'unavailable' || scaling.hold.hasWaiters(resolution.model)) && scaling.hold.waitMs(resolution.model) > 0) {
    // cold start: wait for an endpoint in arrival order instead of a fast 503, so the client keeps its request
    let held: ReturnType<typeof scaling.hold.hold>;
    try {
      held = scaling.hold.hold(resolution.model);
    } catch (err) {
      if (err instanceof QueueFullError) return answer(errors.queueFull(parsed.model, retryAfter()));
      throw err;
    }
    const leave = (): void => held.abort();
    res.once('close', leave);
    const outcome = await held.outcome;
    res.off('close', leave);
    if (outcome === 'aborted') return finish(499);
    current = deps.catalog.resolve(parsed.model);
  }
  if (current.kind !== 'routable') return answer(unresolvedError(current, retryAfter()));

  const body = current.aliased ? rewriteModel(raw, current.model) : raw;
  const model = current.model;
  scaling.demand.begin(model);
  const result = await deps.forwarder.forward(
    {
      route: { model, headers: req.headers, body: parsed.body },
      candidates: () => {
        const now = deps.catalog.resolve(model);
        return now.kind === 'routable' ? now.candidates : [];
      },
      method: 'POST',
      path: req.url ?? path,
      headers: upstreamRequestHeaders(req.rawHeaders, {
        requestId,
        contentLength: body.length,
        engineAuthorization: deps.engineAuthorization,
        forwardClientAuth: deps.forwardClientAuth,
      }),
      body,
      requestId,
    },
    res,
  ).finally(() => scaling.demand.end(model));
  endpoint = result.endpoint;
  switch (result.kind) {
    case 'answered':
      finish(result.status);
      return;
    case 'broken':
      finish(result.status);
      return;
    case 'client-gone':
      finish(499);
      return;
    case 'unanswered': {
      if (res.headersSent || res.destroyed) {
        finish(499);
        return;
      }
      if (result.failure === 'headers-timeout') return answer(errors.upstreamTimeout('no response headers in time'));
      if (result.failure === 'total-timeout') return answer(errors.upstreamTimeout('total request time exceeded'));
      // the engine answered, but not in a form that can be passed on: whatever the endpoint's state is now
      if (result.failure === 'protocol') return answer(errors.upstreamProtocolError(parsed.model));
      const now = deps.catalog.resolve(model);
      if (now.kind === 'unavailable') return answer(unresolvedError({ ...now, requested: parsed.model }, retryAfter()));
      if (result.failure === 'engine-busy') return answer(errors.modelUnavailable(parsed.model, 'loading', retryAfter()));
      return answer(errors.upstreamUnreachable(parsed.model));
    }
  }
}
