// The engine side of the router, built by RouterApp: the prober, the engine stats scraper, KV-cache routing, the
// routing policies with the plain and P/D forwarders, and the LoRA adapter manager. Each part is built by its own
// function, in the order RouterApp always built them (each subscribes to the catalog as it is made).
import cluster from 'node:cluster';
import { ADAPTER_USE_TOPICS, AdapterManager, parseAdapterUses, type AdapterUses } from '../adapters/manager.js';
import { EngineAdmin } from '../adapters/engine-admin.js';
import type { ModelCatalog } from '../catalog/catalog.js';
import { usesKvEvents, type RouterConfig } from '../config/config.js';
import type { EngineTls } from '../config/engine-tls.js';
import { EngineStatsScraper } from '../health/engine-stats.js';
import { Prober } from '../health/prober.js';
import type { RouterMetrics } from '../metrics/metrics.js';
import { Forwarder } from '../proxy/forwarder.js';
import { Migrations } from '../proxy/migration/migrate.js';
import { PdForwarder, type PdPolicies } from '../proxy/pd/pd-forwarder.js';
import type { UpstreamPools } from '../proxy/pools.js';
import { createPolicy, createPrefillPolicy } from '../routing/index.js';
import type { RoutingPolicy } from '../routing/policy.js';
import type { Scaling } from '../scaling/index.js';
import type { Dashboard } from '../server/dashboard/index.js';
import { observeAll } from '../server/dashboard/kv-view.js';
import type { WorkerLink } from '../util/ipc.js';
import type { Logger } from '../util/log.js';
import { KvRouting } from './kv-routing.js';

/** What the engine side is built from: RouterApp's parts made before it. */
export interface EngineSideParts {
  readonly config: RouterConfig;
  readonly log: Logger;
  readonly catalog: ModelCatalog;
  readonly metrics: RouterMetrics;
  readonly dashboard: Dashboard;
  readonly scaling: Scaling;
  readonly pools: UpstreamPools;
  /** https engines: one trust for requests, probes and stats scrapes */
  readonly engineTls: EngineTls;
  /** set in a worker of --workers: the line to the primary */
  readonly link: WorkerLink | undefined;
}

export interface EngineSide {
  readonly prober: Prober;
  readonly engineStats: EngineStatsScraper;
  /** KV-cache events and request tokens, when kvaware can be asked for */
  readonly kvRouting: KvRouting | undefined;
  readonly forwarder: Forwarder;
  readonly pd: PdForwarder;
  /** --migration-limit above 0: streams broken mid-way go on elsewhere */
  readonly migrations: Migrations | undefined;
  /** LoRA adapters loaded on demand */
  readonly adapters: AdapterManager;
  /** what the router sends engines as Authorization (--engine-api-key), if anything */
  readonly engineAuthorization: string | undefined;
  /** new routing settings (the config file changed): the policies are made again and used from the next request on */
  reroute(config: RoutingSettings): void;
}

/** What the routing policies are made from: the settings the config file may change while the router runs. */
export type RoutingSettings = Pick<
  RouterConfig,
  'routingLogic' | 'sessionKey' | 'prefixBlockChars' | 'prefixBalanceEpsilon' | 'allowRoutingHeader'
>;

export function buildEngineSide(parts: EngineSideParts): EngineSide {
  const prober = createProber(parts);
  const engineStats = new EngineStatsScraper(
    parts.catalog,
    { intervalMs: parts.config.engineStatsIntervalMs, apiKey: parts.config.engineApiKey, tls: parts.engineTls },
    parts.log.child({ component: 'engine-stats' }),
  );
  const kvRouting = createKvRouting(parts);
  const { forwarder, pd, engineAuthorization } = createForwarders(parts, prober, kvRouting);
  const migrations = createMigrations(parts);
  const adapters = createAdapterManager(parts);
  const reroute = (routing: RoutingSettings): void => {
    const policies = routingPolicies({ ...parts.config, ...routing }, parts, kvRouting);
    forwarder.setPolicy(policies.policy);
    pd.setPolicies(policies.pd);
  };
  return { prober, engineStats, kvRouting, forwarder, pd, migrations, adapters, engineAuthorization, reroute };
}

/** Active probes and passive health; failovers and failures go to the metrics (and failovers to the dashboard). */
function createProber({ config, log, catalog, metrics, dashboard, scaling, engineTls }: EngineSideParts): Prober {
  return new Prober(
    catalog,
    {
      kind: config.engineKind,
      probe: config.probe,
      apiKey: config.engineApiKey,
      passiveFailureThreshold: config.passiveFailureThreshold,
      tls: engineTls,
      onFailover: (model) => {
        metrics.failover(model);
        dashboard.failover(model);
      },
      onFailure: (endpoint, failure) => metrics.upstreamFailure(endpoint.url, failure),
      wanted: (models) => models.some((m) => scaling.hold.held(m) > 0),
    },
    log.child({ component: 'prober' }),
  );
}

/** KV-cache events and request tokens, only where kvaware can be asked for; watched by the metrics and the dashboard. */
function createKvRouting({ config, log, catalog, metrics, dashboard, engineTls }: EngineSideParts): KvRouting | undefined {
  const kvRouting = usesKvEvents(config.routingLogic, config.allowRoutingHeader)
    ? new KvRouting(
        catalog,
        { kv: config.kv, engineApiKey: config.engineApiKey, engineTls, kvawarePolicy: config.routingLogic === 'kvaware' },
        metrics.kv,
        log.child({ component: 'kv-events' }),
      )
    : undefined;
  if (kvRouting) {
    metrics.watchKv(kvRouting);
    dashboard.followKv(kvRouting);
  }
  return kvRouting;
}

/** The routing policy, and the P/D model's pair of policies (decode, prefill), as `config` says. */
function routingPolicies(
  config: RouterConfig,
  { metrics, dashboard }: Pick<EngineSideParts, 'metrics' | 'dashboard'>,
  kvRouting: KvRouting | undefined,
): { policy: RoutingPolicy; pd: PdPolicies } {
  const kvObserver = observeAll(metrics.kv, dashboard.kvDecisions);
  const policyOptions = {
    ...(kvRouting ? { kv: { index: kvRouting.events.index, keys: kvRouting, observer: kvObserver, pendingMs: config.kv.pendingMs } } : {}),
    sessionKey: config.sessionKey,
    prefixBlockChars: config.prefixBlockChars,
    prefixBalanceEpsilon: config.prefixBalanceEpsilon,
    engineStatsIntervalMs: config.engineStatsIntervalMs,
    allowRoutingHeader: config.allowRoutingHeader,
  };
  const policy = createPolicy(config.routingLogic, policyOptions);
  return {
    policy,
    pd: {
      // kvaware matches the prompt's KV where it is computed, the prefill engine; the decode engine goes by load
      decode: config.routingLogic === 'kvaware' ? createPolicy('least-load', policyOptions) : policy,
      prefill: createPrefillPolicy(config.routingLogic, policyOptions),
    },
  };
}

/** The routing policies, the plain forwarder, and the P/D forwarder over it. */
function createForwarders(
  parts: EngineSideParts,
  prober: Prober,
  kvRouting: KvRouting | undefined,
): Pick<EngineSide, 'forwarder' | 'pd' | 'engineAuthorization'> {
  const { config, catalog, metrics, pools } = parts;
  const policies = routingPolicies(config, parts, kvRouting);
  const forwarder = new Forwarder(pools, policies.policy, prober, catalog, config.timeouts, config.maxFailoverAttempts);
  const engineAuthorization = config.engineApiKey ? `Bearer ${config.engineApiKey}` : undefined;
  const pd = new PdForwarder(forwarder, pools, policies.pd, prober, catalog, metrics.pd, {
    pd: config.pd,
    timeouts: config.timeouts,
    engineAuthorization,
    forwardClientAuth: config.forwardClientAuth,
  });
  return { forwarder, pd, engineAuthorization };
}

/** Mid-stream migration, when --migration-limit is above 0; each one goes to the metrics and the dashboard. */
function createMigrations({ config, metrics, dashboard }: EngineSideParts): Migrations | undefined {
  if (config.migrationLimit === 0) return undefined;
  return new Migrations(
    // TGI's chat API has no continue_final_message: its chat streams are not continued
    { limit: config.migrationLimit, totalMs: config.timeouts.totalMs, chat: config.engineKind !== 'tgi' },
    {
      migration: (model, outcome) => {
        metrics.migration(model, outcome);
        dashboard.migration(model, outcome);
      },
    },
  );
}

/** LoRA adapters loaded on demand; loads and unloads go to the metrics and the dashboard. */
function createAdapterManager({ config, log, catalog, metrics, dashboard, engineTls, link }: EngineSideParts): AdapterManager {
  return new AdapterManager(
    catalog,
    new EngineAdmin({ kind: config.engineKind, apiKey: config.engineApiKey, tls: engineTls, timeoutMs: config.timeouts.headersMs }),
    {
      loaded: (e) => {
        metrics.lora.loaded(e);
        dashboard.adapters.loaded(e);
      },
      unloaded: (e) => {
        metrics.lora.unloaded(e);
        dashboard.adapters.unloaded(e);
      },
      request: (adapter, waited) => metrics.lora.request(adapter, waited),
    },
    {
      defaultSlots: config.lora.maxLorasPerEngine,
      spillThreshold: config.lora.spillThreshold,
      cooldownMs: config.lora.loadCooldownMs,
      statsIntervalMs: config.engineStatsIntervalMs,
      ...(link ? { otherWorkers: otherWorkersUses(link) } : {}),
    },
    log.child({ component: 'adapters' }),
  );
}

/** Under --workers: the adapter use of every other worker, asked of the primary (which gathers each worker's part). */
function otherWorkersUses(link: WorkerLink): () => Promise<readonly AdapterUses[]> {
  const own = String(cluster.worker?.id ?? 0);
  return async () => {
    const all = await link.ask(ADAPTER_USE_TOPICS.all, 5_000);
    const others = typeof all === 'object' && all !== null ? Object.entries(all).filter(([id]) => id !== own) : [];
    return parseAdapterUses(Object.fromEntries(others));
  };
}
