// The HTTP side of the router, built by RouterApp: admission (API keys, rate and concurrency limits), what the
// inference pipeline is given, the route table (inference, /v1/models, probes, admin routes) and the servers (the
// main port with its fast path, and --admin-port).
import type http from 'node:http';
import type { AdapterManager } from '../adapters/manager.js';
import type { ModelCatalog } from '../catalog/catalog.js';
import type { RouterConfig, SecurityConfig } from '../config/config.js';
import type { ResponseSink } from '../core/exchange.js';
import type { SyncTracker } from '../discovery/sync.js';
import type { RouterMetrics } from '../metrics/metrics.js';
import type { Forwarder } from '../proxy/forwarder.js';
import type { PdForwarder } from '../proxy/pd/pd-forwarder.js';
import type { Migrations } from '../proxy/migration/migrate.js';
import { parseSnapshot, type DemandSnapshot } from '../scaling/demand-snapshot.js';
import type { Scaling } from '../scaling/index.js';
import * as admin from '../server/admin.js';
import { ApiKeys } from '../server/auth.js';
import { readBody } from '../server/body.js';
import { jsonDepth, MAX_JSON_DEPTH } from '../util/json-depth.js';
import { ClientIdentity } from '../server/client-address.js';
import type { Dashboard } from '../server/dashboard/index.js';
import { errors, sendError } from '../server/errors.js';
import { FastLane } from '../server/fast/lane.js';
import { createHttpServer, KEEP_ALIVE_TIMEOUT_MS } from '../server/http-server.js';
import { ConcurrencyLimit, TokenBuckets } from '../server/limits.js';
import { handleInference, ROUTED_PATHS, type InferenceDeps } from '../server/pipeline.js';
import { createRequestListener, type Route } from '../server/routes.js';
import type { Logger } from '../util/log.js';
import type { FlowController } from '../flow/controller.js';
import type { KvRouting } from './kv-routing.js';
import type { ScalingSide } from './scaling-side.js';

export interface AdmissionGate {
  readonly keys: ApiKeys;
  readonly concurrency: ConcurrencyLimit;
  /** the pipeline's admit stage: the rate limit, then a concurrency slot */
  readonly admit: InferenceDeps['admit'];
  /** new limits (the config file changed): the rate limit starts afresh when its rate or burst changed */
  update(limits: AdmissionLimits): void;
}

/** The admission settings the config file may change while the router runs. */
export type AdmissionLimits = Pick<SecurityConfig, 'rateLimitRps' | 'rateLimitBurst' | 'trustedProxies' | 'maxConcurrentRequests'>;

/** API keys, the per-client rate limit (--rate-limit-rps) and the concurrency limit (--max-concurrent-requests). */
export function buildAdmission(sec: SecurityConfig, log: Logger): AdmissionGate {
  const keys = new ApiKeys(sec.apiKeys, sec.apiKeysFile, log.child({ component: 'auth' }));
  const concurrency = new ConcurrencyLimit(sec.maxConcurrentRequests);
  const bucketsOf = (l: AdmissionLimits): TokenBuckets | undefined =>
    l.rateLimitRps > 0 ? new TokenBuckets(l.rateLimitRps, l.rateLimitBurst) : undefined;
  let limits: AdmissionLimits = sec;
  let buckets = bucketsOf(sec);
  let clients = new ClientIdentity(sec.trustedProxies, () => keys.enabled);
  return {
    keys,
    concurrency,
    admit: (req) => {
      if (buckets) {
        // per authenticated key when keys are in use, else per client address (never a key nobody checked)
        const wait = buckets.take(clients.bucketKey(req));
        if (wait > 0) return errors.rateLimited(Math.max(1, Math.ceil(wait)));
      }
      return concurrency.acquire() ?? errors.overloaded();
    },
    update: (next) => {
      if (next.rateLimitRps !== limits.rateLimitRps || next.rateLimitBurst !== limits.rateLimitBurst) buckets = bucketsOf(next);
      if (next.trustedProxies !== limits.trustedProxies) clients = new ClientIdentity(next.trustedProxies, () => keys.enabled);
      concurrency.max = next.maxConcurrentRequests;
      limits = next;
    },
  };
}

/** What the routes are answered from: RouterApp's parts. */
export interface RouteParts {
  readonly config: RouterConfig;
  readonly log: Logger;
  readonly catalog: ModelCatalog;
  readonly metrics: RouterMetrics;
  readonly sync: SyncTracker;
  readonly scaling: Scaling;
  readonly demandView: ScalingSide['demandView'];
  readonly dashboard: Dashboard;
  readonly kvRouting: KvRouting | undefined;
  readonly forwarder: Forwarder;
  readonly pd: PdForwarder;
  /** --migration-limit above 0 */
  readonly migrations: Migrations | undefined;
  readonly adapters: AdapterManager;
  readonly engineAuthorization: string | undefined;
  readonly admission: AdmissionGate;
  /** flow control (--flow-control), when on */
  readonly flow: FlowController | undefined;
  readonly startedAt: number;
  shuttingDown(): boolean;
}

/** What the inference pipeline is given (both inbound paths share it). */
export function inferenceDeps(p: RouteParts): InferenceDeps {
  const { config } = p;
  return {
    catalog: p.catalog,
    forwarder: p.forwarder,
    policyName: config.routingLogic,
    pd: p.pd,
    ...(p.migrations !== undefined ? { migrations: p.migrations } : {}),
    adapters: p.adapters,
    metrics: p.metrics,
    log: p.log,
    maxBodyBytes: config.maxBodyBytes,
    maxJsonBodyBytes: config.maxJsonBodyBytes,
    scaling: p.scaling,
    sync: p.sync,
    syncWaitMs: config.syncWaitMs,
    engineAuthorization: p.engineAuthorization,
    forwardClientAuth: config.forwardClientAuth,
    allowClientKvTransferParams: config.allowClientKvTransferParams,
    admit: p.admission.admit,
    ...(p.flow !== undefined ? { flow: p.flow, keyEntry: (req) => p.admission.keys.entryFor(req) } : {}),
    // set by RouterApp.start() when tracing is on (the SDK is loaded only then)
    tracer: undefined,
  };
}

export interface RouteTable {
  /** the main port's routes (the admin routes among them unless --admin-port is set) */
  readonly routes: Route[];
  /** /health and /ready, public on both ports */
  readonly probes: Route[];
  /** /metrics, /engines, /demand and the dashboard */
  readonly adminRoutes: Route[];
}

export function buildRouteTable(p: RouteParts, deps: InferenceDeps): RouteTable {
  const { config } = p;
  const probes: Route[] = [
    { method: 'GET', path: '/health', handler: (_req, res) => admin.health(res), public: true },
    {
      method: 'GET',
      path: '/ready',
      public: true,
      handler: (_req, res) => admin.ready(res, { pendingSources: () => p.sync.pendingSources(), shuttingDown: () => p.shuttingDown() }),
    },
  ];
  const adminRoutes: Route[] = [
    { method: 'GET', path: '/metrics', handler: (_req, res) => admin.metrics(res, p.metrics) },
    {
      method: 'GET',
      path: '/engines',
      handler: (_req, res) => admin.engines(res, p.catalog, config.engineStatsIntervalMs, p.kvRouting),
    },
    { method: 'GET', path: '/demand', handler: async (_req, res) => admin.sendJson(res, 200, await p.demandView.instance()) },
    {
      // a peer replica's notice, usually its last snapshot as it stops (src/router/scaling/peers.ts)
      method: 'POST',
      path: '/demand',
      handler: async (req, res) => {
        let snapshot: DemandSnapshot | undefined;
        try {
          const raw = await readBody(req, 4 * 1024 * 1024);
          snapshot = jsonDepth(raw, MAX_JSON_DEPTH) > MAX_JSON_DEPTH ? undefined : parseSnapshot(JSON.parse(raw.toString('utf8')));
        } catch {
          snapshot = undefined;
        }
        if (!snapshot) return admin.sendJson(res, 400, { error: { message: 'the body is not a demand snapshot' } });
        await p.demandView.notice(snapshot);
        res.writeHead(204).end();
      },
    },
    ...p.dashboard.routes(),
  ];
  const routes: Route[] = [
    ...ROUTED_PATHS.map(
      (path): Route => ({ method: 'POST', path, handler: (req, res, target) => handleInference(req, res, target, deps, req) }),
    ),
    { method: 'GET', path: '/v1/models', handler: (_req, res) => admin.listModels(res, p.catalog, p.startedAt, p.kvRouting) },
    ...probes,
    ...(config.security.adminPort === undefined ? adminRoutes : []),
  ];
  return { routes, probes, adminRoutes };
}

export interface Servers {
  readonly server: http.Server;
  /** sees each connection first and hands what it does not answer to node:http (--fast-path) */
  readonly fastLane: FastLane | undefined;
  /** /metrics and /engines on their own port (--admin-port), when set */
  readonly adminServer: http.Server | undefined;
}

/** The main server (its fast path in front when --fast-path) and the admin server (--admin-port). */
export function buildServers(
  p: RouteParts,
  deps: InferenceDeps,
  table: RouteTable,
  onError: (res: ResponseSink, err: unknown) => void,
): Servers {
  const { config } = p;
  const sec = config.security;
  const keys = p.admission.keys;
  const server = createHttpServer(
    { ...sec, maxBodyBytes: config.maxBodyBytes, maxJsonBodyBytes: config.maxJsonBodyBytes },
    createRequestListener(table.routes, { keys, onError }),
  );
  const fastLane = config.fastPath
    ? new FastLane(
        server,
        {
          maxHeadBytes: sec.maxHeaderBytes,
          maxBodyBytes: config.maxBodyBytes,
          maxJsonBodyBytes: config.maxJsonBodyBytes,
          paths: new Set(ROUTED_PATHS),
          keepAliveTimeoutMs: KEEP_ALIVE_TIMEOUT_MS,
          clientTimeoutMs: sec.clientTimeoutMs,
        },
        (req, res, path, body) => {
          // the same gate and handler as the route table's inference routes
          if (keys.refusesRequest(req)) return sendError(res, errors.invalidApiKey());
          handleInference(req, res, path, deps, body).catch((err: unknown) => onError(res, err));
        },
      )
    : undefined;
  const lane = fastLane;
  if (lane) p.metrics.watchFastPath(() => lane);
  // the admin port is meant for the cluster network only (Prometheus, operators): no API key there
  const adminServer =
    sec.adminPort === undefined
      ? undefined
      : createHttpServer(sec, createRequestListener([...table.adminRoutes, ...table.probes], { keys: undefined, onError }));
  return { server, fastLane, adminServer };
}
