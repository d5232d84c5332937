// Assembles the router: catalog, discovery, prober, policy, forwarder and the HTTP server with its route table.
import cluster from 'node:cluster';
import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { AdapterManager } from '../adapters/manager.js';
import { ModelCatalog } from '../catalog/catalog.js';
import type { FlowConfig, RouterConfig } from '../config/config.js';
import type { TracingConfig } from '../config/tracing-config.js';
import { loadEngineTls } from '../config/engine-tls.js';
import type { ResponseSink } from '../core/exchange.js';
import { loadKubernetesClient } from '../discovery/kubernetes/client.js';
import { KubernetesSource, SOURCE as KUBERNETES } from '../discovery/kubernetes/source.js';
import { applyStaticSource } from '../discovery/static.js';
import { SyncTracker } from '../discovery/sync.js';
import type { EngineStatsScraper } from '../health/engine-stats.js';
import type { Prober } from '../health/prober.js';
import { RouterMetrics } from '../metrics/metrics.js';
import { UpstreamPools } from '../proxy/pools.js';
import type { DemandSnapshot } from '../scaling/demand-snapshot.js';
import type { DemandView } from '../scaling/demand-view.js';
import type { Scaling } from '../scaling/index.js';
import type { ApiKeys } from '../server/auth.js';
import { Dashboard } from '../server/dashboard/index.js';
import { sendError } from '../server/errors.js';
import type { FastLane } from '../server/fast/lane.js';
import type { ConcurrencyLimit } from '../server/limits.js';
import { bracketHost } from '../util/host.js';
import type { WorkerLink } from '../util/ipc.js';
import { listen, type PortSetting } from '../util/listen.js';
import type { Logger } from '../util/log.js';
import { VERSION } from '../../version.js';
import { buildEngineSide } from './engine-side.js';
import { buildAdmission, buildRouteTable, buildServers, inferenceDeps, type RouteParts } from './http-side.js';
import type { KvRouting } from './kv-routing.js';
import { buildScalingSide } from './scaling-side.js';
import type { InferenceDeps } from '../server/pipeline.js';
import type { Tracing } from '../tracing/tracing.js';
import { FlowController } from '../flow/controller.js';
import { ConfigFollower, ConfigReloader, type ConfigChange } from './config-reload.js';
import type { RouterSettings } from '../config/config.js';
import { ConfigMetrics } from '../metrics/config-metrics.js';
import type { AdmissionGate } from './http-side.js';
import type { EngineSide } from './engine-side.js';
import { applyLive, flowLimits } from './live-apply.js';

/** Flow control over the catalog's ready endpoints, told to the metrics. */
function buildFlowControl(config: FlowConfig, catalog: ModelCatalog, metrics: RouterMetrics): FlowController {
  const flow = new FlowController({
    ...flowLimits(config),
    candidates: (model) => {
      const r = catalog.resolve(model);
      return r.kind === 'routable' ? r.candidates : [];
    },
    observer: {
      left: (model, f, _outcome, ms) => metrics.flow.waited(model, f.priority, f.tenant, ms),
      refused: (model, _f, reason) => metrics.flow.refused(model, reason),
    },
  });
  metrics.watchFlow(flow);
  return flow;
}

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
  /** OpenTelemetry tracing (--otel-endpoint, OTEL_EXPORTER_OTLP_*), when on; made by start() */
  private tracing: Tracing | undefined;
  /** the inference pipeline's deps, shared by both inbound paths: start() gives them the tracer when tracing is on */
  private readonly deps: InferenceDeps;
  /** flow control (--flow-control): requests wait here while their model's engines are saturated */
  private readonly flow: FlowController | undefined;
  /** admission: API keys, rate and concurrency limits */
  private readonly admission: AdmissionGate;
  /** new routing settings: the policies made again */
  private readonly reroute: EngineSide['reroute'];
  /** the settings file followed (this process reads it), or the primary's versions followed (a worker) */
  private configSource: { stop(): void } | undefined;

  constructor(
    /** the configuration in force: the start-up's, then each version of the settings file applied */
    public config: RouterConfig,
    private readonly log: Logger,
    /** what sets the router's port, named when it is in use (the demo has its own flag and env) */
    private readonly portSetting: PortSetting = { flag: '--port', env: 'LLM_ROUTER_PORT' },
  ) {
    this.catalog = new ModelCatalog({ pdProtocol: config.pd.protocol });
    this.metrics = new RouterMetrics(this.catalog);
    this.flow = config.flow === undefined ? undefined : buildFlowControl(config.flow, this.catalog, this.metrics);
    // https engines: one trust for requests, probes and stats scrapes (files read once, here)
    const engineTls = loadEngineTls(config.engineTls);
    this.pools = new UpstreamPools({
      timeouts: config.timeouts,
      maxConnections: config.maxConnectionsPerEngine,
      tls: engineTls,
      kind: config.engineClient,
    });

    // scaling: scale from zero and the demand view (src/router/app/scaling-side.ts)
    const scalingSide = buildScalingSide(config, log, this.catalog, this.metrics, {
      expedite: (model) => this.prober.expedite(model),
      queued: (model) => this.flow?.queued(model) ?? 0,
      dashboard: () => this.dashboard,
      adapters: () => this.adapters,
      shuttingDown: () => this.shuttingDown,
    });
    this.scaling = scalingSide.scaling;
    this.link = scalingSide.link;
    this.demandView = scalingSide.demandView;
    this.stopDemandView = scalingSide.stopDemandView;

    this.dashboard = this.createDashboard();
    if (this.flow !== undefined) this.dashboard.followFlow(this.flow);

    // the engine side: prober, stats, KV routing, policies and forwarders, adapters (src/router/app/engine-side.ts)
    const engine = buildEngineSide({
      config,
      log,
      catalog: this.catalog,
      metrics: this.metrics,
      dashboard: this.dashboard,
      scaling: this.scaling,
      pools: this.pools,
      engineTls,
      link: this.link,
    });
    this.prober = engine.prober;
    this.engineStats = engine.engineStats;
    this.kvRouting = engine.kvRouting;
    this.adapters = engine.adapters;
    this.reroute = engine.reroute;

    // the HTTP side: admission, routes, servers (src/router/app/http-side.ts)
    const admission = buildAdmission(config.security, log);
    this.admission = admission;
    this.keys = admission.keys;
    // flow control's wait metric names the configured tenants; every other tenant is `other`
    this.metrics.flow.watchTenants((tenant) => admission.keys.tenants.has(tenant));
    this.concurrency = admission.concurrency;
    const parts: RouteParts = {
      config,
      log,
      catalog: this.catalog,
      metrics: this.metrics,
      sync: this.sync,
      scaling: this.scaling,
      demandView: this.demandView,
      dashboard: this.dashboard,
      kvRouting: this.kvRouting,
      forwarder: engine.forwarder,
      pd: engine.pd,
      migrations: engine.migrations,
      adapters: this.adapters,
      engineAuthorization: engine.engineAuthorization,
      admission,
      flow: this.flow,
      startedAt: this.startedAt,
      shuttingDown: () => this.shuttingDown,
    };
    const deps = inferenceDeps(parts);
    this.deps = deps;
    const servers = buildServers(parts, deps, buildRouteTable(parts, deps), (res, err) => this.internalError(res, err));
    this.server = servers.server;
    this.fastLane = servers.fastLane;
    this.adminServer = servers.adminServer;

    this.catalog.onChange((e) => {
      if (e.type === 'endpoint-removed' && !this.catalog.endpoints().some((x) => x.url === e.endpoint.url))
        this.pools.close(e.endpoint.url);
    });
  }

  /** The operator's view, watched by the metrics (its streams) with the pools; scaling gauges wired here too. */
  private createDashboard(): Dashboard {
    const dashboard = new Dashboard({
      catalog: this.catalog,
      scaling: this.scaling,
      demandView: this.demandView,
      instance: {
        version: VERSION,
        pid: process.pid,
        worker: cluster.worker?.id ?? null,
        workers: this.config.workers,
        startedAt: this.startedAt,
      },
      statsIntervalMs: this.config.engineStatsIntervalMs,
      log: this.log.child({ component: 'dashboard' }),
      ...(this.link ? { link: this.link } : {}),
    });
    this.metrics.connections.watch({ pools: this.pools, dashboard });
    this.metrics.watchScaling({
      held: (m) => this.scaling.hold.held(m),
      inFlight: (m) => this.scaling.demand.inFlight(m),
      oldestHeldSeconds: (m) => this.scaling.hold.oldestAgeSeconds(m),
      stalled: (m) => this.scaling.demand.stalled(m),
    });
    return dashboard;
  }

  /**
   * Tracing on: the OpenTelemetry SDK is loaded now, and only now (it takes a noticeable share of a start-up and of
   * memory, which a router without tracing does not pay); one exporter per process, each --workers worker with its
   * own service.instance.id. The pipeline gets its tracer before the first request is accepted.
   */
  private async startTracing(config: TracingConfig): Promise<void> {
    const { Tracing } = await import('../tracing/tracing.js');
    const tracing = new Tracing({
      config,
      version: VERSION,
      worker: cluster.worker?.id ?? null,
      log: this.log.child({ component: 'tracing' }),
    });
    this.tracing = tracing;
    this.deps.tracer = tracing;
    this.metrics.watchSpanDrops(() => tracing.dropped);
    this.log.info(
      { endpoint: config.endpoint, protocol: config.protocol, serviceName: tracing.serviceName, instanceId: tracing.instanceId },
      'tracing: spans are exported over OTLP',
    );
  }

  /**
   * Follows the settings file (--config, --dynamic-config-yaml/json) from now on: this process reads it, or under
   * --workers a worker runs the versions its primary reads (config-reload.ts). Without a file, nothing.
   */
  followConfig(settings: RouterSettings, argv: readonly string[], env: Readonly<Record<string, string | undefined>>): void {
    if (settings.file === undefined || this.configSource !== undefined) return;
    const kvEvents = this.kvRouting !== undefined;
    const apply = (change: ConfigChange): void => this.applyConfig(change.config, change.live);
    if (this.link !== undefined) {
      const follower = new ConfigFollower(settings, this.link, { env, kvEvents, log: this.log.child({ component: 'config' }), apply });
      follower.start();
      this.configSource = { stop: () => undefined };
      return;
    }
    const reloader = new ConfigReloader({
      argv,
      env,
      settings,
      kvEvents,
      log: this.log.child({ component: 'config' }),
      metrics: new ConfigMetrics(this.metrics.registry),
      apply,
    });
    reloader.start();
    this.configSource = reloader;
  }

  /** Runs `config` from now on, of which the settings in `live` changed (the others are as they were). */
  applyConfig(config: RouterConfig, live: ReadonlySet<string>): void {
    this.config = config;
    applyLive({ catalog: this.catalog, reroute: this.reroute, deps: this.deps, admission: this.admission, flow: this.flow }, config, live);
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
    if (this.config.tracing) await this.startTracing(this.config.tracing);
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
      await loadKubernetesClient();
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
    this.kvRouting?.start(() => this.sync.complete);
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
    return `http://${bracketHost(host)}:${port}`;
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
    this.configSource?.stop();
    const stopStarted = Date.now();
    this.log.info(
      { inFlight: this.concurrency.inFlight, drainSeconds: drainMs / 1000, shutdownTimeoutSeconds: graceMs / 1000 },
      `draining: /ready answers 503; serving ${drainMs / 1000} s more, then waiting up to ${graceMs / 1000} s for the requests in flight`,
    );
    if (drainMs > 0) await new Promise((r) => setTimeout(r, drainMs));
    // requests still waiting for a cold start get their 503 now and retry on a replica that stays
    this.scaling.hold.stop();
    this.flow?.stop();
    // event streams never end by themselves: the dashboards reconnect to a replica that stays
    this.dashboard.stop();
    this.kubernetes?.stop();
    // close() completes once every connection the server accepted has ended, answered by the fast path or not
    const servers = [this.server, ...(this.adminServer ? [this.adminServer] : [])];
    const closed = Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
    const front = this.fastLane ?? this.server;
    const connections = [front, ...(this.adminServer ? [this.adminServer] : [])];
    for (const s of connections) s.closeIdleConnections();
    // keep-alive connections that finish a response now are closed instead of kept (the admin port's too: a dashboard's
    // stream ended just above leaves its connection idle a moment later)
    const idle = setInterval(() => {
      for (const s of connections) s.closeIdleConnections();
    }, 100);
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
    // the spans of the requests just answered go out now, within what is left of the shutdown time (at least 1 s)
    await this.tracing?.shutdown(Math.max(1000, stopStarted + drainMs + graceMs - Date.now()));
    this.log.info({ seconds: Math.round((Date.now() - stopStarted) / 100) / 10 }, 'drained and stopped');
  }
}
