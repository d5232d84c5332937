// The scaling side of the router, built by RouterApp: scale from zero (hold queue, demand, cold starts, the KEDA
// scaler) and the view of demand it answers from: this instance's and its peers' in a single process, or the
// primary's (which combines every worker's) in a worker of --workers.
import cluster from 'node:cluster';
import { randomUUID } from 'node:crypto';
import type { AdapterManager } from '../adapters/manager.js';
import { ADAPTER_USE_TOPICS } from '../adapters/manager.js';
import type { ModelCatalog } from '../catalog/catalog.js';
import type { RouterConfig } from '../config/config.js';
import { METRICS_TOPICS, type RouterMetrics } from '../metrics/metrics.js';
import type { DemandSnapshot } from '../scaling/demand-snapshot.js';
import { DEMAND_TOPICS, RemoteDemand, type DemandView } from '../scaling/demand-view.js';
import { Scaling } from '../scaling/index.js';
import { createDemandView } from '../scaling/system.js';
import type { Dashboard } from '../server/dashboard/index.js';
import { WorkerLink } from '../util/ipc.js';
import type { Logger } from '../util/log.js';

/** Parts of RouterApp made after the scaling side, reached when they are first needed (never while it is built). */
export interface LaterParts {
  expedite(model: string): void;
  /** requests waiting in flow control for the model (0 without --flow-control) */
  queued(model: string): number;
  dashboard(): Dashboard;
  adapters(): AdapterManager;
  shuttingDown(): boolean;
}

export interface ScalingSide {
  readonly scaling: Scaling;
  /** set in a worker of --workers: the line to the primary */
  readonly link: WorkerLink | undefined;
  /** this instance's and the whole system's demand (GET /demand, the KEDA scaler) */
  readonly demandView: DemandView & { notice(s: DemandSnapshot): Promise<void> };
  /** tells the peers this instance leaves (a single process; under --workers the primary does) */
  readonly stopDemandView: () => Promise<void>;
}

export function buildScalingSide(
  config: RouterConfig,
  log: Logger,
  catalog: ModelCatalog,
  metrics: RouterMetrics,
  later: LaterParts,
): ScalingSide {
  const scaling = new Scaling(
    catalog,
    config.scaling,
    config.retryAfterSeconds,
    log.child({ component: 'scaling' }),
    (model) => later.expedite(model),
    {
      coldStart: (c) => {
        metrics.coldStart(c.model, c.kind, c.ms / 1000);
        later.dashboard().coldStart(c);
      },
      wakeAlarm: (a) => later.dashboard().wakeAlarm(a),
      kedaError: (method, code) => metrics.scaler.kedaError(method, code),
      queued: (model) => later.queued(model),
    },
  );
  return {
    scaling,
    ...(cluster.isWorker ? workerDemand(config, scaling, metrics, later) : ownDemandView(config, log, scaling, metrics, later)),
  };
}

/** In a worker of --workers: the primary answers for the whole instance, from every worker's part. */
function workerDemand(config: RouterConfig, scaling: Scaling, metrics: RouterMetrics, later: LaterParts): Omit<ScalingSide, 'scaling'> {
  const link = new WorkerLink({
    [DEMAND_TOPICS.local]: () => scaling.snapshot(`worker-${cluster.worker?.id ?? 0}`),
    [METRICS_TOPICS.local]: () => metrics.workerMetrics(),
    [ADAPTER_USE_TOPICS.local]: () => later.adapters().localUses(),
  });
  const timeoutMs = 2 * config.scaling.peerTimeoutMs + 2_000;
  const demandView = new RemoteDemand(link, timeoutMs);
  metrics.useClusterExposition(async () => (await link.ask(METRICS_TOPICS.combined, timeoutMs)) as string);
  return { link, demandView, stopDemandView: async () => undefined };
}

/** A single process: this instance's demand, its peers' (--scaler-peers, or found in Kubernetes) summed in. */
function ownDemandView(
  config: RouterConfig,
  log: Logger,
  scaling: Scaling,
  metrics: RouterMetrics,
  later: LaterParts,
): Omit<ScalingSide, 'scaling'> {
  const instance = randomUUID();
  const own = createDemandView(
    config,
    instance,
    async () => [{ snapshot: scaling.snapshot(instance), receivedAt: Date.now() }],
    log.child({ component: 'scaling' }),
    () => later.shuttingDown(),
  );
  const peers = own.peers;
  if (peers) metrics.scaler.watchPeers(() => peers.status());
  return { link: undefined, demandView: own.view, stopDemandView: own.stop };
}
