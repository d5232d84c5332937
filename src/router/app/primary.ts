// The primary process of --workers: forks the workers that share the port, restarts one that dies while running,
// forwards SIGTERM/SIGINT, and answers for the whole instance what no single worker can: its demand (GET /demand and
// the KEDA scaler, peers included) and its metrics (every worker's, combined). It outlives its workers, so it keeps
// the counts of a worker that is gone: the instance's counters never go backwards while it runs.
import cluster, { type Worker } from 'node:cluster';
import { randomUUID } from 'node:crypto';
import { usesKvEvents, type RouterSettings } from '../config/config.js';
import { ConfigMetrics } from '../metrics/config-metrics.js';
import { CONFIG_TOPICS, ConfigReloader, WORKER_SETTINGS_ENV } from './config-reload.js';
import { Registry } from 'prom-client';
import { aggregateExposition, METRICS_TOPICS, retainedCounters, type WorkerMetrics } from '../metrics/metrics.js';
import { ScalerMetrics } from '../metrics/scaler-metrics.js';
import { countersOnly, mergeWorkers, parseSnapshot, type DemandSnapshot, type ReceivedSnapshot } from '../scaling/demand-snapshot.js';
import { DEMAND_TOPICS, workerGatherMs } from '../scaling/demand-view.js';
import { farewellTimeoutMs } from '../scaling/peers.js';
import { createDemandView } from '../scaling/system.js';
import type { Logger } from '../util/log.js';
import { ClusterHub } from '../util/ipc.js';
import { ADAPTER_USE_TOPICS } from '../adapters/manager.js';

/** A worker that dies this soon after its start is not restarted: it would only crash again (bad config, port taken). */
const MIN_WORKER_LIFETIME_MS = 5_000;
/** how long a scrape waits for each worker's metrics; one that is later counts with its last counters */
const METRICS_GATHER_MS = 1_500;

export function runPrimary(
  settings: RouterSettings,
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
  log: Logger,
): void {
  const { config } = settings;
  let stopping = false;
  let exitCode = 0;
  const startedAt = new Map<Worker, number>();
  const instance = randomUUID();
  // well inside the time a peer gives this replica to answer: a slow worker counts with its last part instead
  const gatherMs = workerGatherMs(config.scaling.peerTimeoutMs);
  /** the primary's own series (peers, gathers), combined with the workers' */
  const registry = new Registry();
  const scalerMetrics = new ScalerMetrics(registry);
  /** workers that exited: a part of theirs that arrives late is not taken */
  const gone = new Set<number>();
  /** each live worker's last snapshot: a worker that is slow to answer counts with it for the grace period */
  const lastDemand = new Map<number, ReceivedSnapshot>();
  /** the arrivals (and last activity) of the workers that are gone; no held or in-flight requests */
  let retiredDemand: DemandSnapshot | undefined;
  /** each live worker's last metrics, and the counters of the workers that are gone */
  const lastMetrics = new Map<number, WorkerMetrics>();
  let retiredMetrics: WorkerMetrics = [];
  let hub: ClusterHub | undefined;
  const locals = async (): Promise<ReceivedSnapshot[]> => {
    const parts = (await hub?.gather(DEMAND_TOPICS.local, gatherMs)) ?? new Map<number, unknown>();
    const now = Date.now();
    for (const [id, value] of parts) {
      const snapshot = parseSnapshot(value);
      if (snapshot && !gone.has(id)) lastDemand.set(id, { snapshot, receivedAt: now });
    }
    // a worker silent for longer than the grace period keeps its counters, not its held and in-flight requests
    const live = [...lastDemand.values()].map((r) =>
      now - r.receivedAt <= config.scaling.graceMs ? r : { snapshot: countersOnly(r.snapshot), receivedAt: r.receivedAt },
    );
    return retiredDemand ? [...live, { snapshot: retiredDemand, receivedAt: now }] : live;
  };
  const retire = (id: number): void => {
    gone.add(id);
    const demandPart = lastDemand.get(id);
    lastDemand.delete(id);
    if (demandPart) {
      const merged = mergeWorkers('retired', Date.now(), [...(retiredDemand ? [retiredDemand] : []), countersOnly(demandPart.snapshot)]);
      // no process: the instance's worker count is its live workers'
      retiredDemand = { ...merged, workers: 0 };
    }
    const metricsPart = lastMetrics.get(id);
    lastMetrics.delete(id);
    if (metricsPart) retiredMetrics = retainedCounters([retiredMetrics, metricsPart]);
  };
  const demand = createDemandView(config, instance, locals, log.child({ component: 'scaling' }), () => stopping);
  if (demand.peers) {
    const peers = demand.peers;
    scalerMetrics.watchPeers(() => peers.status());
  }
  // the settings file is read here, once, and each version applied is handed to every worker (config-reload.ts)
  const reloader =
    settings.file === undefined
      ? undefined
      : new ConfigReloader({
          argv,
          env,
          settings,
          kvEvents: usesKvEvents(config.routingLogic, config.allowRoutingHeader),
          log: log.child({ component: 'config' }),
          metrics: new ConfigMetrics(registry),
          apply: (change) => hub?.broadcast(CONFIG_TOPICS.version, change.version),
        });
  hub = new ClusterHub(
    {
      [CONFIG_TOPICS.current]: async () => reloader?.current(),
      [DEMAND_TOPICS.instance]: () => demand.view.instance(),
      [DEMAND_TOPICS.system]: () => demand.view.system(),
      [DEMAND_TOPICS.notice]: async (value) => {
        const snapshot = parseSnapshot(value);
        if (snapshot) await demand.view.notice(snapshot);
      },
      [METRICS_TOPICS.combined]: async () => {
        // within the time the asking worker waits for the answer (2 x --scaler-peer-timeout-ms + 2 s)
        const parts = ((await hub?.gather(METRICS_TOPICS.local, METRICS_GATHER_MS)) ?? new Map()) as Map<number, WorkerMetrics>;
        for (const [id, part] of parts) if (!gone.has(id)) lastMetrics.set(id, part);
        // a live worker that did not answer in time: its counters as last seen (they only grow), not its gauges
        const silent = [...lastMetrics].filter(([id]) => !parts.has(id)).map(([, part]) => retainedCounters([part]));
        return aggregateExposition([...parts.values(), ...silent, retiredMetrics, (await registry.getMetricsAsJSON()) as WorkerMetrics]);
      },
      // every worker's adapter use, by worker id: a worker unloads nothing another one uses
      [ADAPTER_USE_TOPICS.all]: async () => Object.fromEntries((await hub?.gather(ADAPTER_USE_TOPICS.local, 2_000)) ?? new Map()),
    },
    (topic) => scalerMetrics.gatherMissed(topic),
  );

  const fork = (): void => {
    // a worker starts from the settings in force, never from the file as it is now (which may be refused, or change
    // a setting such as the port that this instance keeps until a restart)
    const worker = cluster.fork(reloader ? { [WORKER_SETTINGS_ENV]: JSON.stringify(reloader.current()) } : {});
    startedAt.set(worker, Date.now());
  };
  cluster.on('exit', (worker, code, signal) => {
    const lived = Date.now() - (startedAt.get(worker) ?? 0);
    startedAt.delete(worker);
    retire(worker.id);
    if (stopping) {
      if (startedAt.size === 0) finish(exitCode);
      return;
    }
    if (lived < MIN_WORKER_LIFETIME_MS) {
      log.fatal({ worker: worker.process.pid, code, signal }, 'a router worker exited right after its start; stopping');
      stop('worker-failed', 1);
      return;
    }
    log.error({ worker: worker.process.pid, code, signal }, 'a router worker exited; starting another');
    fork();
  });
  let finishing = false;
  const finish = (code: number): void => {
    if (finishing) return;
    finishing = true;
    reloader?.stop();
    hub?.stop();
    // every worker has answered its requests (or is gone): the peers hear that this instance leaves
    const bounded = new Promise<void>((resolve) => setTimeout(resolve, farewellTimeoutMs(config.scaling.peerTimeoutMs) + 1_000).unref());
    void Promise.race([demand.stop(), bounded]).finally(() => process.exit(code));
  };
  const stop = (signal: string, code = 0): void => {
    if (stopping) return;
    stopping = true;
    exitCode = code;
    log.info({ signal, workers: startedAt.size }, 'shutting down');
    for (const worker of startedAt.keys()) worker.process.kill('SIGTERM');
    if (startedAt.size === 0) finish(exitCode);
    // the workers drain and finish their streams in their own time; this only bounds a worker that hangs
    const workersMs = config.security.drainMs + config.security.shutdownTimeoutMs;
    setTimeout(() => finish(exitCode || 1), workersMs + 5_000).unref();
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  for (let i = 0; i < config.workers; i++) fork();
  reloader?.start();
  log.info({ workers: config.workers, port: config.port, instance }, 'llm-router primary started its workers');
}
