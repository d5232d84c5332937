// The request pipeline of the inference endpoints, as named stages that both inbound paths (node:http and the fast
// path) run: admit -> read body -> parse -> resolve -> hold (cold start) -> adapter (LoRA: load on demand) ->
// forward (pick, attempt, failover) -> answer.
// Each stage either hands its result on or has answered the client itself; the record ends every request once.
import type { FlowAdmission, FlowController, FlowTicket } from '../flow/controller.js';
import type { KeyEntry } from '../config/api-keys-file.js';
import { flowOf } from './flow-identity.js';
import type { RoutingNote } from '../routing/policy.js';
import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { ModelCatalog } from '../catalog/catalog.js';
import type { Endpoint } from '../core/endpoint.js';
import type { ForwardResult } from '../proxy/forwarder.js';
import type { AdapterRoute, Resolution } from '../core/model.js';
import { UNKNOWN_MODEL_LABEL, type RouterMetrics } from '../metrics/metrics.js';
import type { Forwarder } from '../proxy/forwarder.js';
import type { PdForwarder } from '../proxy/pd/pd-forwarder.js';
import type { MigrationLeg, MigrationNote, Migrations } from '../proxy/migration/migrate.js';
import { upstreamRequestHeaders } from '../proxy/headers.js';
import { rewriteModel, rewriteMultipartModel } from '../proxy/rewrite-model.js';
import { withoutKvTransferParams } from '../proxy/pd/bodies.js';
import { loggable, type Logger } from '../util/log.js';
import { nameIndexFor, similar } from '../util/suggest.js';
import { QueueFullError } from '../scaling/hold-queue.js';
import type { Scaling } from '../scaling/index.js';
import type { SyncTracker } from '../discovery/sync.js';
import type { AdapterManager } from '../adapters/manager.js';
import { BodyTooLargeError, discardBody, readBody } from './body.js';
import { errors, sendError, type RouterError } from './errors.js';
import { AUDIO_PATHS, bodyLimitFor, parseMultipart } from './multipart.js';
import { jsonDepth, MAX_JSON_DEPTH } from '../util/json-depth.js';
import type { InboundRequest, ResponseSink } from '../core/exchange.js';
import { ClientGone } from '../core/client-gone.js';
import type { RequestTracer, TraceSpan } from '../core/trace.js';
import {
  ADAPTER,
  ADAPTER_WAITED,
  BODY_BYTES,
  FLOW_OUTCOME,
  FLOW_PRIORITY,
  FLOW_TENANT,
  HOLD_OUTCOME,
  MODEL_STATE,
  MODEL_STATE_AFTER,
  OUTCOME,
  RESOLVED_MODEL,
  SPAN,
} from '../tracing/attributes.js';
import { endRequestSpan, requestParsed, startRequestSpan } from './request-span.js';

/** Paths routed by the JSON body's `model`. */
export const INFERENCE_PATHS: readonly string[] = [
  '/v1/chat/completions',
  '/v1/completions',
  '/v1/embeddings',
  '/v1/responses',
  '/v1/rerank',
  '/rerank',
  '/v1/score',
  '/score',
  '/tokenize',
  '/detokenize',
  '/v1/messages',
];

/** Every path handleInference answers: the JSON ones, and the audio ones whose model is a multipart/form-data field. */
export const ROUTED_PATHS: readonly string[] = [...INFERENCE_PATHS, ...AUDIO_PATHS];

export interface InferenceDeps {
  readonly catalog: ModelCatalog;
  readonly forwarder: Forwarder;
  /** --routing-logic: the access log's `policy` where the policy says nothing of its own (the config file may change it) */
  policyName: string;
  /** flow control (--flow-control): requests wait here while their model's engines are saturated; undefined when off */
  readonly flow?: FlowController;
  /** the accepted API key's entry of a request (its tenant and priorities), for flow control */
  readonly keyEntry?: (req: InboundRequest) => KeyEntry | undefined;
  /** requests of models served P/D (src/router/proxy/pd) */
  readonly pd: PdForwarder;
  /** --migration-limit above 0: streams whose engine fails mid-way go on elsewhere (src/router/proxy/migration) */
  readonly migrations?: Migrations;
  /** LoRA adapters loaded on demand (src/router/adapters) */
  readonly adapters: AdapterManager;
  readonly metrics: RouterMetrics;
  readonly log: Logger;
  /** --max-body-bytes: the audio routes' bodies (and a bound on every body) */
  readonly maxBodyBytes: number;
  /** --max-json-body-bytes: the JSON routes take the smaller of this and maxBodyBytes */
  readonly maxJsonBodyBytes?: number;
  readonly scaling: Scaling;
  /** discovery: an unknown model is only unknown once every source has listed */
  readonly sync: SyncTracker;
  readonly syncWaitMs: number;
  readonly engineAuthorization: string | undefined;
  readonly forwardClientAuth: boolean;
  /** --allow-client-kv-transfer-params: a client's kv_transfer_params reach engines of models not served P/D */
  readonly allowClientKvTransferParams: boolean;
  /** rate and concurrency limits: the function that frees an admitted request's slot, or the error to answer */
  readonly admit: (req: InboundRequest) => (() => void) | RouterError;
  /**
   * OpenTelemetry tracing (src/router/tracing), when on; without it no span is made anywhere on the request path. Set
   * once, before the router accepts requests (the SDK is loaded only when tracing is on).
   */
  tracer?: RequestTracer | undefined;
}

/** how much of a refused body is read and thrown away so the client sees the 413 */
const DISCARD_LIMIT_BYTES = 64 * 1024 * 1024;

const REQUEST_ID_OK = /^[\x21-\x7e]{1,200}$/;

function requestIdOf(req: InboundRequest): string {
  const given = req.headers['x-request-id'];
  return typeof given === 'string' && REQUEST_ID_OK.test(given) ? given : randomUUID();
}

interface Request {
  readonly body: Record<string, unknown>;
  readonly model: string;
  /** an audio request: its multipart/form-data boundary (an alias rewrites the model field, not JSON) */
  readonly boundary?: string;
}

type Parsed = ({ ok: true } & Request) | { ok: false; error: RouterError };

/**
 * Parses only what routing needs; the bytes are forwarded as they came. Nesting deeper than MAX_JSON_DEPTH is refused
 * before JSON.parse builds it (vLLM's server refuses what its parser cannot read; no API body nests that deep).
 */
export function parseInference(raw: Buffer): Parsed {
  if (jsonDepth(raw, MAX_JSON_DEPTH) > MAX_JSON_DEPTH)
    return { ok: false, error: errors.invalidJson(`it nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels`) };
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
  if (typeof model !== 'string' || model.length === 0)
    return { ok: false, error: errors.modelRequired('"model" must be a non-empty string') };
  return { ok: true, body, model };
}

function unresolvedError(r: Exclude<Resolution, { kind: 'routable' }>, retryAfter: number): RouterError {
  return r.kind === 'unknown'
    ? errors.modelNotFound(r.requested)
    : errors.modelUnavailable(r.requested, r.state, retryAfter, r.missing, r.why);
}

type Routable = Extract<Resolution, { kind: 'routable' }>;
type Known = Exclude<Resolution, { kind: 'unknown' }>;

/** The model whose engines serve a resolution: an adapter's base (demand, holds and Retry-After count there), else itself. */
function scaledModel(r: Known): string {
  return r.base ?? r.model;
}

/** what a request for a model (not an adapter) adds to its forward job: nothing, without allocating */
const NO_ADAPTER = {};

/** Paths an adapter of a generative model is always served on: an engine's 404 there means it does not hold the adapter. */
const ADAPTER_404_PATHS = new Set(['/v1/chat/completions', '/v1/completions', '/v1/responses']);

/** One request on its way through the stages: how it ends (metrics, access log, the admission slot) is recorded once. */
class InferenceRecord {
  private readonly started = performance.now();
  readonly requestId: string;
  /**
   * The client left: made here, at admission, from the answer's sink (already fired when that sink is closed), and
   * subscribed to by every stage that waits (sync wait, hold, adapter load, P/D, the engine attempt).
   */
  readonly gone: ClientGone;
  /** tracing on: the request's SERVER span, parent of its stages' spans; undefined with tracing off */
  readonly trace: TraceSpan | undefined;
  private firstByteSeen = false;
  /** the first body byte goes to the client now: llm_router_time_to_first_byte_seconds */
  readonly onFirstByte = (): void => {
    if (this.firstByteSeen) return;
    this.firstByteSeen = true;
    this.deps.metrics.firstByte(this.metricModel, (performance.now() - this.started) / 1000);
  };
  /** the canonical model for metrics: '' until the body named one, UNKNOWN_MODEL_LABEL for names no source knows */
  metricModel = '';
  /** the model name the access log gives when it is not metricModel: the name a 404 was for, made loggable */
  loggedModel: string | undefined;
  endpoint: Endpoint | undefined;
  /** how the policy chose the endpoint (filled by the policy as it picks) */
  readonly routing: RoutingNote = {};
  /** --migration-limit: the stream's migrations, or why a broken one was not continued */
  readonly migration: MigrationNote = { migrations: 0 };
  /** flow control's ticket: the request passed it (forwarding and its end are told) */
  flowTicket: FlowTicket | undefined;
  bodyBytes = 0;
  freeSlot: (() => void) | undefined;
  private readonly writtenBefore: number;

  constructor(
    readonly req: InboundRequest,
    readonly res: ResponseSink,
    readonly path: string,
    readonly deps: InferenceDeps,
  ) {
    this.requestId = requestIdOf(req);
    this.writtenBefore = req.socket.bytesWritten;
    this.gone = new ClientGone(res);
    this.trace = deps.tracer === undefined ? undefined : startRequestSpan(deps.tracer, req, path, this.requestId);
  }

  /** Answers with one of the router's own errors, and ends the request. */
  answer(err: RouterError): void {
    if (!this.res.destroyed && !this.res.headersSent) this.onFirstByte();
    sendError(this.res, err, { 'x-request-id': this.requestId });
    this.finish(err.status, err.code);
  }

  /** `code`: the stable code of an error the router answered itself */
  finish(status: number, code?: string): void {
    this.freeSlot?.();
    if (this.trace !== undefined) endRequestSpan(this.trace, status, code, this.metricModel);
    const ms = performance.now() - this.started;
    this.deps.metrics.answered(this.metricModel, status, ms / 1000, code);
    // the access log: what was asked of whom and how it ended; never the prompt, the answer or credentials
    if (this.deps.log.isLevelEnabled('info')) {
      this.deps.log.info(
        {
          requestId: this.requestId,
          path: this.path,
          model: this.loggedModel ?? this.metricModel,
          endpoint: this.endpoint?.url,
          ...routingFields(this.routing, this.endpoint !== undefined ? this.deps.policyName : undefined),
          ...migrationFields(this.migration),
          status,
          ms: Math.round(ms),
          bytesIn: this.bodyBytes,
          bytesOut: this.req.socket.bytesWritten - this.writtenBefore,
        },
        'request',
      );
    }
  }
}

/**
 * The access log's routing fields: the policy that decided (the configured one unless a policy said otherwise) and,
 * with kvaware, the blocks matched of the prompt's or why none; nothing for a request no endpoint was picked for.
 */
function routingFields(note: RoutingNote, configured: string | undefined): Record<string, string | number> {
  const policy = note.policy ?? configured;
  if (policy === undefined) return {};
  const out: Record<string, string | number> = { policy };
  if (note.matchedBlocks !== undefined) out.matchedBlocks = note.matchedBlocks;
  if (note.blocks !== undefined) out.blocks = note.blocks;
  if (note.fallback !== undefined) out.fallback = note.fallback;
  return out;
}

/** The access log's migration fields: the continuations a stream took, or why a broken one was not continued. */
function migrationFields(note: MigrationNote): Record<string, string | number> {
  if (note.notMigrated !== undefined)
    return note.migrations > 0 ? { migrations: note.migrations, notMigrated: note.notMigrated } : { notMigrated: note.notMigrated };
  return note.migrations > 0 ? { migrations: note.migrations } : {};
}

/** Stage admit: rate and concurrency limits, before any byte of the body is read. */
function admit(r: InferenceRecord, source: IncomingMessage | Buffer): boolean {
  const admitted = r.deps.admit(r.req);
  if (typeof admitted === 'function') {
    r.freeSlot = admitted;
    // a client that left before its request got here: the slot goes back at once
    if (r.gone.gone) {
      if (!Buffer.isBuffer(source)) source.resume();
      r.finish(499);
      return false;
    }
    return true;
  }
  if (!Buffer.isBuffer(source)) source.resume();
  r.answer(admitted);
  return false;
}

/**
 * Stage read body: bounded by --max-body-bytes (audio) or --max-json-body-bytes (JSON); the fast path has read it
 * already, within the same bound.
 */
async function readRequestBody(r: InferenceRecord, source: IncomingMessage | Buffer): Promise<Buffer | undefined> {
  const limit = bodyLimitFor(r.path, r.deps.maxBodyBytes, r.deps.maxJsonBodyBytes);
  if (Buffer.isBuffer(source)) {
    if (source.length <= limit) return source;
    r.answer(errors.bodyTooLarge(limit));
    return undefined;
  }
  const span = r.trace?.child(SPAN.readBody, 'internal');
  try {
    const body = await readBody(source, limit);
    span?.set(BODY_BYTES, body.length);
    return body;
  } catch (err) {
    span?.fail(err instanceof BodyTooLargeError ? 'body too large' : 'client left');
    if (err instanceof BodyTooLargeError) {
      // answer now, and keep reading (and dropping) what the client still sends, up to a bound, so that a client
      // that writes its whole body before reading gets the 413 instead of a reset connection
      void discardBody(source, DISCARD_LIMIT_BYTES).then((drained) => {
        if (!drained) source.socket.destroy();
      });
      r.answer(errors.bodyTooLarge(limit));
    } else {
      r.finish(499);
    }
    return undefined;
  } finally {
    span?.end();
  }
}

/** Stage parse: the JSON body and its `model`, nothing more. */
function parse(r: InferenceRecord, raw: Buffer): Request | undefined {
  r.bodyBytes = raw.length;
  const parsed = parseInference(raw);
  if (parsed.ok) {
    if (r.trace !== undefined) requestParsed(r.trace, parsed.model, parsed.body);
    return parsed;
  }
  r.answer(parsed.error);
  return undefined;
}

/** Stage parse, for the audio routes: the form fields of a multipart/form-data body; the file part is skipped. */
async function parseForm(r: InferenceRecord, raw: Buffer): Promise<Request | undefined> {
  r.bodyBytes = raw.length;
  const ct = r.req.headers['content-type'];
  const parsed = await parseMultipart(raw, Array.isArray(ct) ? ct[0] : ct);
  if (parsed.ok) {
    if (r.trace !== undefined) requestParsed(r.trace, parsed.model, parsed.body);
    return parsed;
  }
  r.answer(parsed.error);
  return undefined;
}

/** Stage resolve: the catalog's answer; "unknown" only once discovery has listed, and then 404. */
function resolveModel(r: InferenceRecord, requested: string): Promise<Known | undefined> {
  return r.trace === undefined ? resolveStage(r, requested) : resolveTraced(r, r.trace, requested);
}

/** tracing: the catalog's answer on the request's span (a lookup takes no time; only a wait for the sync has a span) */
async function resolveTraced(r: InferenceRecord, trace: TraceSpan, requested: string): Promise<Known | undefined> {
  const known = await resolveStage(r, requested);
  if (known !== undefined) trace.set(MODEL_STATE, known.kind === 'routable' ? 'ready' : known.state);
  return known;
}

async function resolveStage(r: InferenceRecord, requested: string): Promise<Known | undefined> {
  const { catalog, sync } = r.deps;
  let resolution = catalog.resolve(requested);
  if (resolution.kind === 'unknown' && !sync.complete) {
    // a router that just started has not listed the cluster yet: "unknown" would be a guess, and a fatal one
    const client = r.gone.race();
    const span = r.trace?.child(SPAN.syncWait, 'internal');
    const synced = await Promise.race([sync.whenSynced(r.deps.syncWaitMs, client.gone), client.gone]);
    client.cancel();
    if (span !== undefined) {
      span.set(OUTCOME, synced === 'gone' ? 'client-gone' : synced ? 'synced' : 'timeout');
      span.end();
    }
    if (synced === 'gone') {
      r.finish(499);
      return undefined;
    }
    if (!synced) {
      r.answer(errors.discoveryNotSynced(requested));
      return undefined;
    }
    resolution = catalog.resolve(requested);
  }
  if (resolution.kind === 'unknown') {
    // metrics keep one label for every unknown name; the access log says which name it was
    r.metricModel = UNKNOWN_MODEL_LABEL;
    r.loggedModel = loggable(requested);
    // the names' index is kept until the declared names change: a 404 costs a bounded search, not a scan of them all
    const views = catalog.models();
    r.answer(
      errors.modelNotFound(
        requested,
        similar(
          requested,
          nameIndexFor(views, () => views.map((m) => m.id)),
        ),
      ),
    );
    return undefined;
  }
  r.metricModel = resolution.model;
  // demand counts every request for a known model, whatever its answer: the autoscaler's signal (an adapter's is its base's)
  r.deps.metrics.demanded(scaledModel(resolution));
  r.deps.scaling.demand.arrived(scaledModel(resolution));
  // an adapter's requests are counted under its own name too (its demand series, its /demand entry)
  if (resolution.base !== undefined) {
    r.deps.metrics.demanded(resolution.model);
    r.deps.scaling.demand.adapterArrived(resolution.model);
  }
  return resolution;
}

/** Stage hold: with --cold-start-wait, a model with no ready endpoint is waited for in arrival order; else 503. */
async function holdUntilRoutable(r: InferenceRecord, resolution: Known, requested: string): Promise<Routable | undefined> {
  const { scaling, catalog } = r.deps;
  const model = scaledModel(resolution);
  let current: Resolution = resolution;
  if (r.gone.gone) {
    // it left during an earlier stage: it neither waits nor counts as held
    r.finish(499);
    return undefined;
  }
  // an engine that serves other models (a name mismatch) is no cold start: said at once, never waited for
  const renamed = current.kind === 'unavailable' && current.why?.servesInstead !== undefined;
  if (!renamed && (current.kind === 'unavailable' || scaling.hold.hasWaiters(model)) && scaling.hold.waitMs(model) > 0) {
    let held: ReturnType<typeof scaling.hold.hold>;
    try {
      held = scaling.hold.hold(model);
    } catch (err) {
      if (err instanceof QueueFullError) {
        r.answer(errors.queueFull(requested, scaling.coldStart.retryAfterSeconds(model)));
        return undefined;
      }
      throw err;
    }
    const leave = (): void => held.abort();
    r.gone.on(leave);
    const span = r.trace?.child(SPAN.hold, 'internal', {
      [RESOLVED_MODEL]: model,
      [MODEL_STATE]: current.kind === 'unavailable' ? current.state : 'ready',
    });
    const outcome = await held.outcome;
    r.gone.off(leave);
    if (span !== undefined) {
      span.set(HOLD_OUTCOME, outcome);
      const after = catalog.resolve(requested);
      span.set(MODEL_STATE_AFTER, after.kind === 'unavailable' ? after.state : after.kind === 'routable' ? 'ready' : 'unknown');
      span.end();
    }
    if (outcome === 'aborted') {
      r.finish(499);
      return undefined;
    }
    current = catalog.resolve(requested);
  }
  if (current.kind === 'routable') return current;
  r.answer(unresolvedError(current, scaling.coldStart.retryAfterSeconds(model)));
  return undefined;
}

/**
 * Stage flow: with --flow-control, a request for a saturated pool waits here, by priority and in turn between tenants,
 * or is refused (sheddable while saturated, over a cap, waited too long). Its ticket is kept on the record: the forward
 * stage says when forwarding begins, the request's end when it is over. False: the request was answered here.
 */
async function flowStage(r: InferenceRecord, target: Routable, bytes: number): Promise<boolean> {
  const { flow, keyEntry } = r.deps;
  if (flow === undefined) return true;
  const identity = flowOf(r.req.headers, keyEntry?.(r.req));
  if ('status' in identity) {
    r.answer(identity);
    return false;
  }
  const model = scaledModel(target);
  const decided = flow.admit(model, identity, bytes, r.gone);
  if (!(decided instanceof Promise)) return flowOutcome(r, model, decided);
  const span = r.trace?.child(SPAN.flow, 'internal', {
    [RESOLVED_MODEL]: model,
    [FLOW_TENANT]: identity.tenant,
    [FLOW_PRIORITY]: identity.priority,
  });
  const admission = await decided;
  if (span !== undefined) {
    span.set(FLOW_OUTCOME, admission.kind === 'refused' ? admission.reason : admission.kind === 'go' ? 'dispatched' : 'gone');
    span.end();
  }
  return flowOutcome(r, model, admission);
}

function flowOutcome(r: InferenceRecord, model: string, a: FlowAdmission): boolean {
  if (a.kind === 'go') {
    r.flowTicket = a.ticket;
    return true;
  }
  if (a.kind === 'gone') {
    r.finish(499);
    return false;
  }
  const after = a.retryAfterSeconds;
  r.answer(
    a.reason === 'overloaded'
      ? errors.shed(model, after)
      : a.reason === 'queue_full'
        ? errors.flowQueueFull(model, after)
        : a.reason === 'queue_timeout'
          ? errors.queueTimeout(model, after)
          : errors.flowStopped(model, after),
  );
  return false;
}

/** The candidates of `model` now: called again before each failover. */
function candidatesOf(deps: InferenceDeps, model: string): () => readonly Endpoint[] {
  return () => {
    const now = deps.catalog.resolve(model);
    return now.kind === 'routable' ? now.candidates : [];
  };
}

/**
 * Stage adapter: a ready endpoint of the adapter's base must hold it; when none does it is loaded first, and this
 * request waits for that load (with every other request for it). The answer: the adapter's resolution now.
 */
async function loadAdapter(
  r: InferenceRecord,
  target: Routable,
  requested: string,
): Promise<{ ready: Routable; waited: boolean } | undefined> {
  const { deps } = r;
  const route = target.adapter;
  if (route === undefined) return { ready: target, waited: false };
  const client = r.gone.race();
  const span = r.trace?.child(SPAN.adapter, 'internal', { [ADAPTER]: route.name });
  const preparing =
    span !== undefined ? deps.adapters.prepare(route, target.pd?.protocol, span) : deps.adapters.prepare(route, target.pd?.protocol);
  const prepared = await Promise.race([preparing, client.gone]);
  client.cancel();
  if (span !== undefined) {
    span.set(OUTCOME, prepared === 'gone' ? 'client-gone' : prepared.kind);
    if (prepared !== 'gone' && prepared.kind === 'ready') span.set(ADAPTER_WAITED, prepared.waited);
    else span.fail(prepared === 'gone' ? 'client left' : prepared.kind);
    span.end();
  }
  if (prepared === 'gone') {
    r.finish(499);
    return undefined;
  }
  if (prepared.kind === 'failed') {
    r.answer(errors.adapterLoadFailed(requested, prepared.status));
    return undefined;
  }
  const retryAfter = (): number => deps.scaling.coldStart.retryAfterSeconds(route.base);
  if (prepared.kind === 'unavailable') {
    r.answer(errors.adapterUnavailable(requested, prepared.detail, retryAfter()));
    return undefined;
  }
  // what the load changed (its endpoint holds it now), or what happened meanwhile (that endpoint went away)
  const now = deps.catalog.resolve(requested);
  if (now.kind !== 'routable') {
    r.answer(now.kind === 'unavailable' ? unresolvedError(now, retryAfter()) : errors.modelNotFound(requested));
    return undefined;
  }
  return { ready: now, waited: prepared.waited };
}

/**
 * Stages adapter and forward for a LoRA adapter: an engine that answers 404 for it no longer holds it (it restarted,
 * another router unloaded it); that is learned, and the adapter is made ready (loaded again) once more.
 */
async function forwardAdapter(r: InferenceRecord, target: Routable, request: Request, raw: Buffer): Promise<ForwardResult | undefined> {
  // from here to its answer the request keeps its adapter from being unloaded by this router
  const name = (target.adapter as AdapterRoute).name;
  const unclaim = r.deps.adapters.claim(name);
  let forwarded = false;
  let waited = false;
  try {
    let current = target;
    for (let round = 0; ; round++) {
      const loaded = await loadAdapter(r, current, request.model);
      if (!loaded) return undefined;
      forwarded = true;
      waited ||= loaded.waited;
      const result = await forwardToEngine(r, loaded.ready, request, raw);
      // the engine no longer holds it, or the endpoint that held it went away meanwhile: made ready once more
      const lost = result.kind === 'unanswered' && (result.failure === 'model-missing' || result.failure === 'no-endpoint');
      if (round > 0 || !lost || r.res.destroyed) return result;
      const again = r.deps.catalog.resolve(request.model);
      if (again.kind !== 'routable') return result;
      current = again;
    }
  } finally {
    unclaim();
    if (forwarded) r.deps.adapters.forwarded(name, waited);
  }
}

/**
 * Stage forward: the policy picks among the ready endpoints, the forwarder attempts and fails over; a model served P/D
 * goes through its pair instead (src/router/proxy/pd).
 */
async function forwardToEngine(r: InferenceRecord, target: Routable, request: Request, raw: Buffer): Promise<ForwardResult> {
  const { deps, req } = r;
  // an adapter is named as its engines' kind needs (SGLang: BASE:ADAPTER); the client's answer keeps the engine's name
  const sent = target.adapter ? deps.adapters.engineModel(target.adapter) : target.model;
  const rewrite = (): Buffer =>
    request.boundary !== undefined ? rewriteMultipartModel(raw, request.boundary, sent) : rewriteModel(raw, sent);
  const renamed = target.aliased || sent !== target.model ? rewrite() : raw;
  // kv_transfer_params name a host the engine connects to: a client's own go nowhere unless the operator allows them
  const body =
    !deps.allowClientKvTransferParams && Object.hasOwn(request.body, 'kv_transfer_params') ? withoutKvTransferParams(renamed) : renamed;
  const model = target.model;
  const scaled = scaledModel(target);
  // an adapter's requests are counted per endpoint (which adapters are idle), and an engine's 404 for it learned
  const adapter = target.adapter ? deps.adapters.ledger(target.adapter.name) : undefined;
  const adapterJob = adapter
    ? { adapter, ...(ADAPTER_404_PATHS.has(r.path) ? { adapterMissing: deps.adapters.missingAdapter() } : {}) }
    : NO_ADAPTER;
  deps.scaling.demand.begin(scaled);
  // no longer in transit for flow control: the forwarder counts it on its endpoint from here
  r.flowTicket?.forwarding();
  const candidates = candidatesOf(deps, model);
  /** one engine's leg of the request: the first (leg undefined unless it may migrate), or a migration's continuation */
  const send = (leg: MigrationLeg | undefined): Promise<ForwardResult> => {
    const sent = leg?.body ?? body;
    const route = { model, headers: req.headers, body: leg?.parsed ?? request.body, note: r.routing };
    const migration =
      leg === undefined ? {} : { relay: leg.relay, deadline: leg.deadline, ...(leg.exclude ? { exclude: leg.exclude } : {}) };
    if (target.pd !== undefined) {
      return deps.pd.forward(
        {
          model,
          protocol: target.pd.protocol,
          route,
          path: r.path,
          target: req.url ?? r.path,
          body: sent,
          rawHeaders: req.rawHeaders,
          requestId: r.requestId,
          gone: r.gone,
          onFirstByte: r.onFirstByte,
          candidates,
          prefill: leg?.relay.continuing === true ? prefillNow(deps, model, target.pd.prefill) : target.pd.prefill,
          ...(adapter ? { adapter, adapterMissing: deps.adapters.missingAdapter() } : {}),
          trace: r.trace,
          ...migration,
        },
        r.res,
      );
    }
    return deps.forwarder.forward(
      {
        route,
        candidates,
        method: 'POST',
        path: req.url ?? r.path,
        headers: upstreamRequestHeaders(req.rawHeaders, {
          requestId: r.requestId,
          contentLength: sent.length,
          engineAuthorization: deps.engineAuthorization,
          forwardClientAuth: deps.forwardClientAuth,
          dropTraceContext: r.trace !== undefined,
        }),
        body: sent,
        requestId: r.requestId,
        gone: r.gone,
        onFirstByte: r.onFirstByte,
        ...adapterJob,
        trace: r.trace,
        ...migration,
      },
      r.res,
    );
  };
  try {
    if (deps.migrations === undefined || request.boundary !== undefined) return await send(undefined);
    return await deps.migrations.forward(
      {
        model,
        path: r.path,
        parsed: request.body,
        body,
        candidates,
        res: r.res,
        note: r.migration,
        trace: r.trace,
        onFirstByte: r.onFirstByte,
      },
      send,
    );
  } finally {
    deps.scaling.demand.end(scaled);
  }
}

/** The ready prefill endpoints of a P/D model now (a migration's continuation goes through one again). */
function prefillNow(deps: InferenceDeps, model: string, before: readonly Endpoint[]): readonly Endpoint[] {
  const now = deps.catalog.resolve(model);
  return now.kind === 'routable' && now.pd !== undefined ? now.pd.prefill : before;
}

/** Stage answer: what the client gets when the engine's answer did not reach it. */
function answerResult(r: InferenceRecord, result: ForwardResult, requested: string, target: Routable): void {
  r.endpoint = result.endpoint;
  if (result.kind === 'answered' || result.kind === 'broken') return r.finish(result.status);
  if (result.kind === 'client-gone' || r.res.headersSent || r.res.destroyed) return r.finish(499);
  const model = target.model;
  const retryAfter = (): number => r.deps.scaling.coldStart.retryAfterSeconds(scaledModel(target));
  if (result.failure === 'headers-timeout') return r.answer(errors.upstreamTimeout('no response headers in time'));
  if (result.failure === 'total-timeout') return r.answer(errors.upstreamTimeout('total request time exceeded'));
  // the engine answered, but not in a form that can be passed on: whatever the endpoint's state is now
  if (result.failure === 'protocol') return r.answer(errors.upstreamProtocolError(requested));
  const now = r.deps.catalog.resolve(model);
  if (now.kind === 'unavailable') return r.answer(unresolvedError({ ...now, requested }, retryAfter()));
  // an adapter no source declares, and the one engine that listed it says it does not serve it: it is unknown now
  if (now.kind === 'unknown') return r.answer(errors.modelNotFound(requested));
  if (result.failure === 'model-missing') return r.answer(errors.adapterNotHeld(requested));
  if (result.failure === 'engine-busy') return r.answer(errors.modelUnavailable(requested, 'loading', retryAfter()));
  r.answer(errors.upstreamUnreachable(requested));
}

/**
 * Answers one inference request. `source` is where the body comes from: node:http's request stream, or the whole
 * body already read (the fast path reads it before calling).
 */
export async function handleInference(
  req: InboundRequest,
  res: ResponseSink,
  path: string,
  deps: InferenceDeps,
  source: IncomingMessage | Buffer,
): Promise<void> {
  const r = new InferenceRecord(req, res, path, deps);
  if (!admit(r, source)) return;
  const raw = await readRequestBody(r, source);
  if (raw === undefined) return;
  const request = AUDIO_PATHS.includes(path) ? await parseForm(r, raw) : parse(r, raw);
  if (!request) return;
  const resolution = await resolveModel(r, request.model);
  if (!resolution) return;
  const target = await holdUntilRoutable(r, resolution, request.model);
  if (!target) return;
  if (!(await flowStage(r, target, raw.length))) return;
  let result: ForwardResult | undefined;
  try {
    result = target.adapter === undefined ? await forwardToEngine(r, target, request, raw) : await forwardAdapter(r, target, request, raw);
  } finally {
    // its place on an engine is free: flow control may release the next
    r.flowTicket?.done();
  }
  if (!result) return;
  answerResult(r, result, request.model, target);
}
