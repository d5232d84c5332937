// What an operator needs to trust the KEDA scaler's sum: whether each peer replica answers and how old its last
// snapshot is, gathers from the --workers processes that missed a worker, and the errors the scaler answered KEDA with.
// Under --workers the peer and gather series come from the primary process (which asks the peers and gathers), the
// scaler errors from the workers (where KEDA's calls land); the primary sums them all into one exposition.
import { Counter, Gauge, type Registry } from 'prom-client';

/** One peer URL as the scaler last saw it (src/router/scaling/peers.ts gives these). */
export interface PeerStatus {
  readonly url: string;
  /** its last GET /demand answered with a snapshot */
  readonly up: boolean;
  /** seconds since it last answered with one; undefined when it never did */
  readonly ageSeconds: number | undefined;
}

export class ScalerMetrics {
  private readonly ipcMissed: Counter<'topic'>;
  private readonly kedaErrors: Counter<'method' | 'code'>;
  private peers: () => readonly PeerStatus[] = () => [];

  constructor(registry: Registry) {
    const registers = [registry];
    const metrics = this;
    // one series per peer URL listed now (the Ready router pods, or --scaler-peers): bounded by the replicas
    new Gauge({
      name: 'llm_router_scaler_peer_up',
      help: "1 when the peer replica's last GET /demand (asked when the KEDA scaler needs the sum) answered with a snapshot, else 0",
      labelNames: ['peer'],
      aggregator: 'max',
      registers,
      collect() {
        this.reset();
        for (const p of metrics.peers()) this.set({ peer: p.url }, p.up ? 1 : 0);
      },
    });
    new Gauge({
      name: 'llm_router_scaler_peer_snapshot_age_seconds',
      help: 'Seconds since the peer replica last answered GET /demand with a snapshot (absent until it has); past --scale-to-zero-grace-seconds it no longer counts',
      labelNames: ['peer'],
      aggregator: 'max',
      registers,
      collect() {
        this.reset();
        for (const p of metrics.peers()) if (p.ageSeconds !== undefined) this.set({ peer: p.url }, p.ageSeconds);
      },
    });
    this.ipcMissed = new Counter({
      name: 'llm_router_ipc_gather_missed_total',
      help: 'Under --workers, gathers by the primary process that ended without some worker part (a worker slow to answer; its last part counts instead), by topic',
      labelNames: ['topic'],
      registers,
    });
    this.kedaErrors = new Counter({
      name: 'llm_router_keda_scaler_errors_total',
      help: 'KEDA external scaler calls answered with an error, by gRPC method and status code (NOT_FOUND: a model no router knows; UNAVAILABLE: demand could not be computed)',
      labelNames: ['method', 'code'],
      registers,
    });
  }

  /** The peers' state at scrape time (src/router/scaling/peers.ts). */
  watchPeers(status: () => readonly PeerStatus[]): void {
    this.peers = status;
  }

  gatherMissed(topic: string): void {
    this.ipcMissed.inc({ topic });
  }

  kedaError(method: string, code: string): void {
    this.kedaErrors.inc({ method, code });
  }
}
