// The primary process of --workers: forks the workers that share the port, restarts one that dies while running,
// forwards SIGTERM/SIGINT, and answers for the whole instance what no single worker can: its demand (GET /demand and
// the KEDA scaler, peers included) and its metrics (every worker's, combined).
import cluster, { type Worker } from 'node:cluster';
import { randomUUID } from 'node:crypto';
import type { RouterConfig } from '../config/config.js';
import { aggregateExposition, METRICS_TOPICS, type WorkerMetrics } from '../metrics/metrics.js';
import { parseSnapshot, withinAge, type ReceivedSnapshot } from '../scaling/demand-snapshot.js';
import { DEMAND_TOPICS } from '../scaling/demand-view.js';
import { instanceDemand } from '../scaling/system.js';
import type { Logger } from '../util/log.js';
import { ClusterHub } from '../util/ipc.js';
import { ADAPTER_USE_TOPICS } from '../adapters/manager.js';

/** A worker that dies this soon after its start is not restarted: it would only crash again (bad config, port taken). */
const MIN_WORKER_LIFETIME_MS = 5_000;

export function runPrimary(config: RouterConfig, log: Logger): void {
  let stopping = false;
  let exitCode = 0;
  const startedAt = new Map<Worker, number>();
  const instance = randomUUID();
  const gatherMs = config.scaling.peerTimeoutMs;
  /** each worker's last snapshot: a worker that is slow to answer counts with it for the grace period */
  const lastDemand = new Map<number, ReceivedSnapshot>();
  let hub: ClusterHub | undefined;
  const locals = async (): Promise<ReceivedSnapshot[]> => {
    const parts = (await hub?.gather(DEMAND_TOPICS.local, gatherMs)) ?? new Map<number, unknown>();
    const now = Date.now();
    for (const [id, value] of parts) {
      const snapshot = parseSnapshot(value);
      if (snapshot) lastDemand.set(id, { snapshot, receivedAt: now });
    }
    return withinAge([...lastDemand.values()], now, config.scaling.graceMs);
  };
  const demand = instanceDemand(config, instance, locals, log.child({ component: 'scaling' }));
  hub = new ClusterHub({
    [DEMAND_TOPICS.instance]: () => demand.view.instance(),
    [DEMAND_TOPICS.system]: () => demand.view.system(),
    [METRICS_TOPICS.combined]: async () =>
      aggregateExposition([...((await hub?.gather(METRICS_TOPICS.local, 5_000)) ?? new Map()).values()] as WorkerMetrics[]),
    // every worker's adapter use, by worker id: a worker unloads nothing another one uses
    [ADAPTER_USE_TOPICS.all]: async () => Object.fromEntries((await hub?.gather(ADAPTER_USE_TOPICS.local, 2_000)) ?? new Map()),
  });

  const fork = (): void => {
    const worker = cluster.fork();
    startedAt.set(worker, Date.now());
  };
  cluster.on('exit', (worker, code, signal) => {
    const lived = Date.now() - (startedAt.get(worker) ?? 0);
    startedAt.delete(worker);
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
  const finish = (code: number): void => {
    hub?.stop();
    demand.stop();
    process.exit(code);
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
  log.info({ workers: config.workers, port: config.port, instance }, 'llm-router primary started its workers');
}
