// Assembles the router: catalog, discovery, prober, policy, forwarder and the HTTP server with its route table.
import cluster from 'node:cluster';
import { randomUUID } from 'node:crypto';
import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import { ModelCatalog } from '../catalog/catalog.js';
import { usesKvEvents, type RouterConfig } from '../config/config.js';
import { applyStaticSource } from '../discovery/static.js';
import { SyncTracker } from '../discovery/sync.js';
import { KubernetesSource, SOURCE as KUBERNETES } from '../discovery/kubernetes/source.js';
import { EngineStatsScraper } from '../health/engine-stats.js';
import { KvRouting } from './kv-routing.js';
import { Prober } from '../health/prober.js';
import { RouterMetrics } from '../metrics/metrics.js';
import { loadEngineTls } from '../config/engine-tls.js';
import { Forwarder } from '../proxy/forwarder.js';
import { PdForwarder } from '../proxy/pd/pd-forwarder.js';
import { AdapterManager } from '../adapters/manager.js';
import { EngineAdmin } from '../adapters/engine-admin.js';
import { UpstreamPools } from '../proxy/pools.js';
import { createPolicy, createPrefillPolicy } from '../routing/index.js';
import type { Logger } from '../util/log.js';
import { Scaling } from '../scaling/index.js';
import { DEMAND_TOPICS, RemoteDemand, type DemandView } from '../scaling/demand-view.js';
import { parseSnapshot, type DemandSnapshot } from '../scaling/demand-snapshot.js';
import { readBody } from '../server/body.js';
import { instanceDemand } from '../scaling/system.js';
import { WorkerLink } from '../util/ipc.js';
import { METRICS_TOPICS } from '../metrics/metrics.js';
import * as admin from '../server/admin.js';
import { errors, sendError } from '../server/errors.js';
import { presentedKey } from '../server/auth.js';
import { handleInference, ROUTED_PATHS, type InferenceDeps } from '../server/pipeline.js';
import { ApiKeys } from '../server/auth.js';
import type { ResponseSink } from '../core/exchange.js';
import { FastLane } from '../server/fast/lane.js';
import { createHttpServer, KEEP_ALIVE_TIMEOUT_MS } from '../server/http-server.js';
import { listen, type PortSetting } from '../util/listen.js';
import { ConcurrencyLimit, TokenBuckets } from '../server/limits.js';
import { createRequestListener, type Route } from '../server/routes.js';
import { Dashboard } from '../server/dashboard/index.js';
import { VERSION } from '../../version.js';

/** listen(2) backlog; Linux caps it at net.core.somaxconn (4096 by default on current kernels) */
const LISTEN_BACKLOG = 4096;

export class RouterApp {
  readonly catalog: ModelCatalog;
  readonly metrics: RouterMetrics;
  readonly sync = new SyncTracker();
  readonly scaling: Scaling;
  private readonly prober: Prober;
  private readonly engineStats: EngineStatsScraper;
  /** KV-cache events and request tokens, when kvaware can be asked for */
  private readonly kvRouting: KvRouting | undefined;
  /** LoRA adapters loaded on demand */
  private readonly adapters: AdapterManager;
  private readonly pools: UpstreamPools;
  private readonly server: http.Server;
  /** sees each connection first and hands what it does not answer to node:http (--fast-path) */
  private readonly fastLane: FastLane | undefined;
  /** /metrics and /engines on their own port (--admin-port), when set */
  private readonly adminServer: http.Server | undefined;
  private readonly keys: ApiKeys;
  private readonly concurrency: ConcurrencyLimit;
  private readonly startedAt = Date.now();
  private shuttingDown = false;
  private statsTimer: NodeJS.Timeout | undefined;
  private kubernetes: KubernetesSource | undefined;
  /** this instance's and the whole system's demand (GET /demand, the KEDA scaler) */
  private readonly demandView: DemandView & { notice(s: DemandSnapshot): Promise<void> };
  /** tells the peers this instance leaves (a single process; under --workers the primary does) */
  private readonly stopDemandView: () => Promise<void>;
  /** set in a worker of --workers: the line to the primary */
  private readonly link: WorkerLink | undefined;
  /** the operator's view: GET /dashboard and GET /events */
  private readonly dashboard: Dashboard;

  constructor(
    readonly config: RouterConfig,
    private readonly log: Logger,
    /** what sets the router's port, named when it is in use (the demo has its own flag and env) */
    private readonly portSetting: PortSetting = { flag: '--port', env: 'LLM_ROUTER_PORT' },
  ) {
    this.catalog = new ModelCatalog({ pdProtocol: config.pd.protocol });
    this.metrics = new RouterMetrics(this.catalog);
    // https engines: one trust for requests, probes and stats scrapes (files read once, here)
    const engineTls = loadEngineTls(config.engineTls);
    this.pools = new UpstreamPools({
      timeouts: config.timeouts,
      maxConnections: config.maxConnectionsPerEngine,
      tls: engineTls,
      kind: config.engineClient,
    });
    this.scaling = new Scaling(
      this.catalog,
      config.scaling,
      config.retryAfterSeconds,
      log.child({ component: 'scaling' }),
      (model) => this.prober.expedite(model),
      {
        coldStart: (c) => {
          this.metrics.coldStart(c.model, c.kind, c.ms / 1000);
          this.dashboard.coldStart(c);
        },
        wakeAlarm: (a) => this.dashboard.wakeAlarm(a),
        kedaError: (method, code) => this.metrics.scaler.kedaError(method, code),
      },
    );
    if (cluster.isWorker) {
      // the primary answers for the whole instance, from every worker's part
      const link = new WorkerLink({
        [DEMAND_TOPICS.local]: () => this.scaling.snapshot(`worker-${cluster.worker?.id ?? 0}`),
        [METRICS_TOPICS.local]: () => this.metrics.workerMetrics(),
      });
      this.link = link;
      const timeoutMs = 2 * config.scaling.peerTimeoutMs + 2_000;
      this.demandView = new RemoteDemand(link, timeoutMs);
      this.stopDemandView = async () => undefined;
      this.metrics.useClusterExposition(async () => (await link.ask(METRICS_TOPICS.combined, timeoutMs)) as string);
    } else {
      const instance = randomUUID();
      const own = instanceDemand(
        config,
        instance,
        async () => [{ snapshot: this.scaling.snapshot(instance), receivedAt: Date.now() }],
        log.child({ component: 'scaling' }),
        () => this.shuttingDown,
      );
      this.demandView = own.view;
      this.stopDemandView = own.stop;
      const peers = own.peers;
      if (peers) this.metrics.scaler.watchPeers(() => peers.status());
    }
    this.dashboard = new Dashboard({
      catalog: this.catalog,
      scaling: this.scaling,
      demand: this.demandView,
      instance: {
        version: VERSION,
        pid: process.pid,
        worker: cluster.worker?.id ?? null,
        workers: config.workers,
        startedAt: this.startedAt,
      },
      statsIntervalMs: config.engineStatsIntervalMs,
      log: log.child({ component: 'dashboard' }),
      ...(this.link ? { link: this.link } : {}),
    });
    this.metrics.watchScaling({
      held: (m) => this.scaling.hold.held(m),
      inFlight: (m) => this.scaling.demand.inFlight(m),
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
        tls: engineTls,
        onFailover: (model) => {
          this.metrics.failover(model);
          this.dashboard.failover(model);
        },
        onFailure: (endpoint, failure) => this.metrics.upstreamFailure(endpoint.url, failure),
        wanted: (models) => models.some((m) => this.scaling.hold.held(m) > 0),
      },
      log.child({ component: 'prober' }),
    );
    this.engineStats = new EngineStatsScraper(
      this.catalog,
      { intervalMs: config.engineStatsIntervalMs, apiKey: config.engineApiKey, tls: engineTls },
      log.child({ component: 'engine-stats' }),
    );
    this.kvRouting = usesKvEvents(config.routingLogic, config.allowRoutingHeader)
      ? new KvRouting(
          this.catalog,
          { kv: config.kv, engineApiKey: config.engineApiKey, engineTls },
          this.metrics.kv,
          log.child({ component: 'kv-events' }),
        )
      : undefined;
    const kvRouting = this.kvRouting;
    if (kvRouting) this.metrics.watchKv(kvRouting);
    const policyOptions = {
      ...(kvRouting ? { kv: { index: kvRouting.events.index, keys: kvRouting, observer: this.metrics.kv } } : {}),
      sessionKey: config.sessionKey,
      prefixBlockChars: config.prefixBlockChars,
      prefixBalanceEpsilon: config.prefixBalanceEpsilon,
      engineStatsIntervalMs: config.engineStatsIntervalMs,
      allowRoutingHeader: config.allowRoutingHeader,
    };
    const policy = createPolicy(config.routingLogic, policyOptions);
    const forwarder = new Forwarder(this.pools, policy, this.prober, this.catalog, config.timeouts, config.maxFailoverAttempts);
    const engineAuthorization = config.engineApiKey ? `Bearer ${config.engineApiKey}` : undefined;
    const pd = new PdForwarder(
      forwarder,
      this.pools,
      {
        // kvaware matches the prompt's KV where it is computed, the prefill engine; the decode engine goes by load
        decode: config.routingLogic === 'kvaware' ? createPolicy('least-load', policyOptions) : policy,
        prefill: createPrefillPolicy(config.routingLogic, policyOptions),
      },
      this.prober,
      this.catalog,
      this.metrics.pd,
      { pd: config.pd, timeouts: config.timeouts, engineAuthorization, forwardClientAuth: config.forwardClientAuth },
    );
    this.adapters = new AdapterManager(
      this.catalog,
      new EngineAdmin({ kind: config.engineKind, apiKey: config.engineApiKey, tls: engineTls, timeoutMs: config.timeouts.headersMs }),
      {
        loaded: (e) => {
          this.metrics.lora.loaded(e);
          this.dashboard.adapters.loaded(e);
        },
        unloaded: (e) => {
          this.metrics.lora.unloaded(e);
          this.dashboard.adapters.unloaded(e);
        },
        request: (adapter, waited) => this.metrics.lora.request(adapter, waited),
      },
      {
        defaultSlots: config.lora.maxLorasPerEngine,
        spillThreshold: config.lora.spillThreshold,
        cooldownMs: config.lora.loadCooldownMs,
        statsIntervalMs: config.engineStatsIntervalMs,
      },
      log.child({ component: 'adapters' }),
    );
    const sec = config.security;
    this.keys = new ApiKeys(sec.apiKeys, sec.apiKeysFile, log.child({ component: 'auth' }));
    this.concurrency = new ConcurrencyLimit(sec.maxConcurrentRequests);
    const buckets = sec.rateLimitRps > 0 ? new TokenBuckets(sec.rateLimitRps, sec.rateLimitBurst) : undefined;
    const deps: InferenceDeps = {
      catalog: this.catalog,
      forwarder,
      pd,
      adapters: this.adapters,
      metrics: this.metrics,
      log,
      maxBodyBytes: config.maxBodyBytes,
      scaling: this.scaling,
      sync: this.sync,
      syncWaitMs: config.syncWaitMs,
      engineAuthorization,
      forwardClientAuth: config.forwardClientAuth,
      admit: (req) => {
        if (buckets) {
          // per key when keys are in use, else per client address
          const wait = buckets.take(presentedKey(req.headers) ?? req.socket.remoteAddress ?? '');
          if (wait > 0) return errors.rateLimited(Math.max(1, Math.ceil(wait)));
        }
        return this.concurrency.acquire() ?? errors.overloaded();
      },
    };
    const probes: Route[] = [
      { method: 'GET', path: '/health', handler: (_req, res) => admin.health(res), public: true },
      {
        method: 'GET',
        path: '/ready',
        public: true,
        handler: (_req, res) =>
          admin.ready(res, { pendingSources: () => this.sync.pendingSources(), shuttingDown: () => this.shuttingDown }),
      },
    ];
    const adminRoutes: Route[] = [
      { method: 'GET', path: '/metrics', handler: (_req, res) => admin.metrics(res, this.metrics) },
      {
        method: 'GET',
        path: '/engines',
        handler: (_req, res) => admin.engines(res, this.catalog, config.engineStatsIntervalMs, kvRouting),
      },
      { method: 'GET', path: '/demand', handler: async (_req, res) => admin.sendJson(res, 200, await this.demandView.instance()) },
      {
        // a peer replica's notice, usually its last snapshot as it stops (src/router/scaling/peers.ts)
        method: 'POST',
        path: '/demand',
        handler: async (req, res) => {
          let snapshot: DemandSnapshot | undefined;
          try {
            snapshot = parseSnapshot(JSON.parse((await readBody(req, 4 * 1024 * 1024)).toString('utf8')));
          } catch {
            snapshot = undefined;
          }
          if (!snapshot) return admin.sendJson(res, 400, { error: { message: 'the body is not a demand snapshot' } });
          await this.demandView.notice(snapshot);
          res.writeHead(204).end();
        },
      },
      ...this.dashboard.routes(),
    ];
    const routes: Route[] = [
      ...ROUTED_PATHS.map(
        (p): Route => ({ method: 'POST', path: p, handler: (req, res, path) => handleInference(req, res, path, deps, req) }),
      ),
      { method: 'GET', path: '/v1/models', handler: (_req, res) => admin.listModels(res, this.catalog, this.startedAt) },
      ...probes,
      ...(sec.adminPort === undefined ? adminRoutes : []),
    ];
    const onError = (res: ResponseSink, err: unknown): void => this.internalError(res, err);
    this.server = createHttpServer(
      { ...sec, maxBodyBytes: config.maxBodyBytes },
      createRequestListener(routes, { keys: this.keys, onError }),
    );
    this.fastLane = config.fastPath
      ? new FastLane(
          this.server,
          {
            maxHeadBytes: sec.maxHeaderBytes,
            maxBodyBytes: config.maxBodyBytes,
            paths: new Set(ROUTED_PATHS),
            keepAliveTimeoutMs: KEEP_ALIVE_TIMEOUT_MS,
            clientTimeoutMs: sec.clientTimeoutMs,
          },
          (req, res, path, body) => {
            // the same gate and handler as the route table's inference routes
            if (this.keys.refuses(req.headers)) return sendError(res, errors.invalidApiKey());
            handleInference(req, res, path, deps, body).catch((err: unknown) => this.internalError(res, err));
          },
        )
      : undefined;
    const lane = this.fastLane;
    if (lane) this.metrics.watchFastPath(() => lane);
    // the admin port is meant for the cluster network only (Prometheus, operators): no API key there
    this.adminServer =
      sec.adminPort === undefined
        ? undefined
        : createHttpServer(sec, createRequestListener([...adminRoutes, ...probes], { keys: undefined, onError }));

    this.catalog.onChange((e) => {
      if (e.type === 'endpoint-removed' && !this.catalog.endpoints().some((x) => x.url === e.endpoint.url))
        this.pools.release(e.endpoint.url);
    });
  }

  private internalError(res: ResponseSink, err: unknown): void {
    this.log.error(
      { err: err instanceof Error ? { message: err.message, stack: err.stack } : String(err) },
      'unexpected error while serving a request',
    );
    if (!res.headersSent && !res.destroyed)
      sendError(res, {
        status: 500,
        code: 'internal_error',
        type: 'server_error',
        message: 'The router failed unexpectedly; see its logs.',
      });
    else res.destroy();
  }

  async start(): Promise<void> {
    for (const note of this.config.compatibilityNotes) this.log.info(note);
    if (this.config.engineTls.insecure)
      this.log.warn(
        '--engine-tls-insecure: the certificates of https engines are not verified; anyone on the path to them can read and change requests and answers',
      );
    // first, so that its timeline starts with the models as the sources declare them
    this.dashboard.start();
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
    this.kvRouting?.start();
    await this.scaling.start(this.config.host, this.demandView, () => this.sync.complete);
    // a deep accept queue: a burst of thousands of connections must not overflow it while the loop is busy
    // (overflowed SYNs come back only after the kernel's 1 s, 3 s, 7 s retries)
    await listen(this.server, { port: this.config.port, host: this.config.host, backlog: LISTEN_BACKLOG }, this.portSetting);
    if (this.adminServer) {
      const adminPort = this.config.security.adminPort ?? 0;
      await listen(
        this.adminServer,
        { port: adminPort, host: this.config.host, backlog: LISTEN_BACKLOG },
        { flag: '--admin-port', env: 'LLM_ROUTER_ADMIN_PORT' },
      );
    }
    if (this.config.logStatsIntervalMs > 0) {
      this.statsTimer = setInterval(() => this.logStats(), this.config.logStatsIntervalMs);
      this.statsTimer.unref();
    }
    this.log.info(
      {
        url: this.url,
        pid: process.pid,
        ...(this.adminServer ? { adminUrl: this.adminUrl } : {}),
        apiKeys: this.keys.enabled,
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
    return this.urlOf(this.port);
  }

  get adminUrl(): string | undefined {
    return this.adminServer ? this.urlOf((this.adminServer.address() as AddressInfo).port) : undefined;
  }

  private urlOf(port: number): string {
    const host = this.config.host === '0.0.0.0' || this.config.host === '::' ? '127.0.0.1' : this.config.host;
    return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
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

  /**
   * Graceful stop: /ready turns 503 at once and the router keeps serving for `drainMs` (load balancers notice),
   * then stops accepting connections and gives in-flight requests and streams up to `shutdownTimeoutMs` to finish.
   */
  async stop(opts: { drainMs?: number; shutdownTimeoutMs?: number } = {}): Promise<void> {
    const drainMs = opts.drainMs ?? this.config.security.drainMs;
    const graceMs = opts.shutdownTimeoutMs ?? this.config.security.shutdownTimeoutMs;
    this.shuttingDown = true;
    clearInterval(this.statsTimer);
    const stopStarted = Date.now();
    this.log.info(
      { inFlight: this.concurrency.inFlight, drainSeconds: drainMs / 1000, shutdownTimeoutSeconds: graceMs / 1000 },
      `draining: /ready answers 503; serving ${drainMs / 1000} s more, then waiting up to ${graceMs / 1000} s for the requests in flight`,
    );
    if (drainMs > 0) await new Promise((r) => setTimeout(r, drainMs));
    // requests still waiting for a cold start get their 503 now and retry on a replica that stays
    this.scaling.hold.stop();
    // event streams never end by themselves: the dashboards reconnect to a replica that stays
    this.dashboard.stop();
    this.kubernetes?.stop();
    // close() completes once every connection the server accepted has ended, answered by the fast path or not
    const servers = [this.server, ...(this.adminServer ? [this.adminServer] : [])];
    const closed = Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
    const front = this.fastLane ?? this.server;
    const connections = [front, ...(this.adminServer ? [this.adminServer] : [])];
    for (const s of connections) s.closeIdleConnections();
    // keep-alive connections that finish a response now are closed instead of kept
    const idle = setInterval(() => front.closeIdleConnections(), 100);
    const timer = setTimeout(() => {
      this.log.warn({ inFlight: this.concurrency.inFlight }, 'shutdown timeout: closing the connections still open');
      for (const s of connections) s.closeAllConnections();
    }, graceMs);
    await closed;
    clearTimeout(timer);
    clearInterval(idle);
    this.keys.stop();
    await this.scaling.stop();
    await this.stopDemandView();
    this.link?.stop();
    await this.prober.stop();
    await this.engineStats.stop();
    await this.kvRouting?.stop();
    await this.adapters.stop();
    await this.pools.closeAll();
    this.log.info({ seconds: Math.round((Date.now() - stopStarted) / 100) / 10 }, 'drained and stopped');
  }
}
