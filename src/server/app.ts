// Assembles the router: catalog, discovery, prober, policy, forwarder and the HTTP server with its route table.
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { once } from 'node:events';
import { ModelCatalog } from '../catalog/catalog.js';
import type { RouterConfig } from '../config/config.js';
import { applyStaticSource } from '../discovery/static.js';
import { SyncTracker } from '../discovery/sync.js';
import { KubernetesSource, SOURCE as KUBERNETES } from '../discovery/kubernetes/source.js';
import { EngineStatsScraper } from '../health/engine-stats.js';
import { Prober } from '../health/prober.js';
import { RouterMetrics } from '../metrics/metrics.js';
import { Forwarder } from '../proxy/forwarder.js';
import { UpstreamPools } from '../proxy/pools.js';
import { createPolicy } from '../routing/index.js';
import type { Logger } from '../util/log.js';
import { Scaling } from '../scaling/index.js';
import * as admin from './admin.js';
import { errors, sendError } from './errors.js';
import { handleInference, INFERENCE_PATHS, type InferenceDeps } from './openai.js';

type Handler = (req: IncomingMessage, res: ServerResponse, path: string) => void | Promise<void>;

export class RouterApp {
  readonly catalog = new ModelCatalog();
  readonly metrics: RouterMetrics;
  readonly sync = new SyncTracker();
  readonly scaling: Scaling;
  private readonly prober: Prober;
  private readonly engineStats: EngineStatsScraper;
  private readonly pools: UpstreamPools;
  private readonly server: http.Server;
  private readonly routes = new Map<string, Handler>();
  private readonly inferencePaths = new Set(INFERENCE_PATHS);
  private readonly startedAt = Date.now();
  private shuttingDown = false;
  private statsTimer: NodeJS.Timeout | undefined;
  private kubernetes: KubernetesSource | undefined;

  constructor(
    readonly config: RouterConfig,
    private readonly log: Logger,
  ) {
    this.metrics = new RouterMetrics(this.catalog);
    this.pools = new UpstreamPools(config.timeouts);
    this.scaling = new Scaling(this.catalog, config.scaling, config.retryAfterSeconds, log.child({ component: 'scaling' }));
    this.metrics.watchScaling({
      held: (m) => this.scaling.hold.held(m),
      oldestHeldSeconds: (m) => this.scaling.hold.oldestAgeSeconds(m),
      stalled: (m) => this.scaling.demand.stalled(m),
    });
    this.prober = new Prober(
      this.catalog,
      {
        kind: config.engineKind,
        probe: config.probe,
        apiKey: config.engineApiKey,
        passiveFailureThreshold: config.passiveFailureThreshold,
        onFailover: (model) => this.metrics.failover(model),
      },
      log.child({ component: 'prober' }),
    );
    this.engineStats = new EngineStatsScraper(
      this.catalog,
      { intervalMs: config.engineStatsIntervalMs, apiKey: config.engineApiKey },
      log.child({ component: 'engine-stats' }),
    );
    const policy = createPolicy(config.routingLogic, {
      sessionKey: config.sessionKey,
      prefixBlockChars: config.prefixBlockChars,
      prefixBalanceEpsilon: config.prefixBalanceEpsilon,
      engineStatsIntervalMs: config.engineStatsIntervalMs,
      allowRoutingHeader: config.allowRoutingHeader,
    });
    const forwarder = new Forwarder(this.pools, policy, this.prober, config.timeouts, config.maxFailoverAttempts);
    const deps: InferenceDeps = {
      catalog: this.catalog,
      forwarder,
      metrics: this.metrics,
      log,
      maxBodyBytes: config.maxBodyBytes,
      scaling: this.scaling,
      sync: this.sync,
      syncWaitMs: config.syncWaitMs,
      engineAuthorization: config.engineApiKey ? `Bearer ${config.engineApiKey}` : undefined,
      forwardClientAuth: config.forwardClientAuth,
    };
    for (const p of INFERENCE_PATHS) this.routes.set(`POST ${p}`, (req, res, path) => handleInference(req, res, path, deps));
    this.routes.set('GET /v1/models', (_req, res) => admin.listModels(res, this.catalog, this.startedAt));
    this.routes.set('GET /health', (_req, res) => admin.health(res));
    this.routes.set('GET /ready', (_req, res) =>
      admin.ready(res, { pendingSources: () => this.sync.pendingSources(), shuttingDown: () => this.shuttingDown }),
    );
    this.routes.set('GET /metrics', (_req, res) => admin.metrics(res, this.metrics));
    this.routes.set('GET /engines', (_req, res) => admin.engines(res, this.catalog, config.engineStatsIntervalMs));

    this.catalog.onChange((e) => {
      if (e.type === 'endpoint-removed' && !this.catalog.endpoints().some((x) => x.url === e.endpoint.url)) this.pools.release(e.endpoint.url);
    });
    this.server = http.createServer({ keepAliveTimeout: 65_000, requestTimeout: 0 }, (req, res) => this.dispatch(req, res));
  }

  private dispatch(req: IncomingMessage, res: ServerResponse): void {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    const handler = this.routes.get(`${req.method ?? 'GET'} ${path}`);
    if (!handler) {
      if (this.inferencePaths.has(path)) return sendError(res, errors.methodNotAllowed(req.method ?? '', path, 'POST'));
      if (path === '/v1/models' || path === '/health' || path === '/ready' || path === '/metrics' || path === '/engines') {
        return sendError(res, errors.methodNotAllowed(req.method ?? '', path, 'GET'));
      }
      req.resume();
      return sendError(res, errors.notFound(path));
    }
    try {
      const done = handler(req, res, path);
      if (done) done.catch((err: unknown) => this.internalError(res, err));
    } catch (err) {
      this.internalError(res, err);
    }
  }

  private internalError(res: ServerResponse, err: unknown): void {
    this.log.error({ err: err instanceof Error ? { message: err.message, stack: err.stack } : String(err) }, 'unexpected error while serving a request');
    if (!res.headersSent && !res.destroyed) sendError(res, { status: 500, code: 'internal_error', type: 'server_error', message: 'The router failed unexpectedly; see its logs.' });
    else res.destroy();
  }

  async start(): Promise<void> {
    for (const note of this.config.compatibilityNotes) this.log.info(note);
    this.sync.register('static');
    applyStaticSource(this.catalog, this.config);
    this.sync.synced('static');
    if (this.config.kubernetes) {
      this.sync.register(KUBERNETES);
      this.kubernetes = new KubernetesSource(
        this.catalog,
        this.config.kubernetes,
        this.log.child({ component: 'kubernetes' }),
        () => {
          this.sync.synced(KUBERNETES);
          this.log.info({ namespace: this.kubernetes?.namespace, health: this.kubernetes?.health() }, 'kubernetes discovery synced');
        },
        { error: (resource, reason) => this.metrics.discoveryError(resource, reason) },
      );
      this.metrics.watchDiscovery(() => this.kubernetes?.health() ?? {});
      this.kubernetes.start();
    }
    this.prober.start();
    this.engineStats.start();
    await this.scaling.start(this.config.host);
    this.server.listen(this.config.port, this.config.host);
    await once(this.server, 'listening');
    if (this.config.logStatsIntervalMs > 0) {
      this.statsTimer = setInterval(() => this.logStats(), this.config.logStatsIntervalMs);
      this.statsTimer.unref();
    }
    this.log.info(
      {
        url: this.url,
        models: this.catalog.models().map((m) => `${m.id}:${m.status}`),
        endpoints: this.catalog.endpoints().length,
        routing: this.config.routingLogic,
      },
      'llm-router listening',
    );
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  get url(): string {
    const host = this.config.host === '0.0.0.0' || this.config.host === '::' ? '127.0.0.1' : this.config.host;
    return `http://${host.includes(':') ? `[${host}]` : host}:${this.port}`;
  }

  private logStats(): void {
    this.log.info(
      {
        models: this.catalog.models().map((m) => ({ model: m.id, status: m.status, ready: m.readyEndpoints, endpoints: m.endpoints })),
        inFlight: this.catalog.endpoints().reduce((n, e) => n + e.inFlight, 0),
      },
      'stats',
    );
  }

  /** Readiness turns 503 at once; new connections stop; in-flight requests get up to `graceMs` to finish. */
  async stop(graceMs = 10_000): Promise<void> {
    this.shuttingDown = true;
    clearInterval(this.statsTimer);
    this.kubernetes?.stop();
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeIdleConnections();
    const timer = setTimeout(() => this.server.closeAllConnections(), graceMs);
    await closed;
    clearTimeout(timer);
    await this.scaling.stop();
    await this.prober.stop();
    await this.engineStats.stop();
    await this.pools.closeAll();
  }
}
