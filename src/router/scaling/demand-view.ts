// One view of demand for every question about it: this instance (all its workers), and the whole system (this
// instance plus every peer replica). KEDA's scaler asks the system; GET /demand answers for the instance.
import type { WorkerLink } from '../util/ipc.js';
import { mergeWorkers, systemTotals, withinAge, type DemandSnapshot, type ModelTotals, type ReceivedSnapshot } from './demand-snapshot.js';
import type { FarewellOutcome, PeerDemand } from './peers.js';

export interface SystemDemand {
  readonly models: Readonly<Record<string, ModelTotals>>;
  /** router instances counted (this one included) */
  readonly instances: number;
}

export interface DemandView {
  /** this router instance: the sum over its worker processes */
  instance(): Promise<DemandSnapshot>;
  /** every router replica: this instance plus its peers */
  system(): Promise<SystemDemand>;
}

/** Concurrent and back-to-back questions about the system within this long share one round of peer requests, ms. */
export const SYSTEM_SHARE_MS = 250;

/**
 * The longest a replica's primary waits for its workers' parts (cluster IPC): well inside the time a peer gives the
 * replica to answer (--scaler-peer-timeout-ms), so that one slow worker (counted with its last part) does not make the
 * whole replica look dead to its peers.
 */
export function workerGatherMs(peerTimeoutMs: number): number {
  return Math.max(1, Math.floor(peerTimeoutMs / 4));
}

export const DEMAND_TOPICS = {
  instance: 'demand:instance',
  system: 'demand:system',
  local: 'demand:local',
  /** a peer's notice (POST /demand), handed to the primary */
  notice: 'demand:notice',
} as const;

export interface AggregateDemandOptions {
  readonly instance: string;
  /** this instance's process snapshots (one in a single process; one per worker, last known, in a primary) */
  readonly locals: () => Promise<ReceivedSnapshot[]>;
  readonly peers: PeerDemand | undefined;
  readonly graceMs: number;
  /** true once this instance is shutting down: its snapshots say `stopping` */
  readonly stopping?: () => boolean;
  /** how long one round of peer requests answers later questions too (SYSTEM_SHARE_MS) */
  readonly shareMs?: number;
  readonly now?: () => number;
}

/** The view computed here: in a single router process, or in the primary of --workers. */
export class AggregateDemand implements DemandView {
  private inflight: Promise<SystemDemand> | undefined;
  private recent: { at: number; value: SystemDemand } | undefined;
  private readonly now: () => number;

  constructor(private readonly opts: AggregateDemandOptions) {
    this.now = opts.now ?? Date.now;
  }

  async instance(): Promise<DemandSnapshot> {
    const locals = await this.opts.locals();
    const s = mergeWorkers(
      this.opts.instance,
      this.now(),
      locals.map((r) => r.snapshot),
    );
    return this.opts.stopping?.() ? { ...s, stopping: true } : s;
  }

  /**
   * Concurrent callers (several KEDA streams on one tick) share one round of peer requests, and, when there are
   * peers, so do callers within SYSTEM_SHARE_MS of its end (KEDA asks once per ScaledObject, back to back): the peers
   * are not asked once per model.
   */
  system(): Promise<SystemDemand> {
    const shareMs = this.opts.shareMs ?? SYSTEM_SHARE_MS;
    // with no peers there is nothing to spare (this instance's own part is cheap): every answer is fresh
    if (this.opts.peers && this.recent && this.now() - this.recent.at < shareMs) return Promise.resolve(this.recent.value);
    this.inflight ??= this.compute()
      .then((value) => {
        this.recent = { at: this.now(), value };
        return value;
      })
      .finally(() => {
        this.inflight = undefined;
      });
    return this.inflight;
  }

  /** A peer's notice (POST /demand). */
  async notice(snapshot: DemandSnapshot): Promise<void> {
    this.opts.peers?.notice(snapshot);
  }

  /** Tells the peers this instance is leaving, with its last snapshot; call once it has answered its requests. */
  async farewell(): Promise<FarewellOutcome | undefined> {
    if (!this.opts.peers) return undefined;
    const s = await this.instance();
    // a parsed snapshot has at least one process; an instance whose workers are all gone still speaks for itself
    return this.opts.peers.farewell({ ...s, workers: Math.max(1, s.workers), stopping: true });
  }

  private async compute(): Promise<SystemDemand> {
    const [locals, peers] = await Promise.all([this.opts.locals(), this.opts.peers?.poll() ?? Promise.resolve([])]);
    const now = this.now();
    const own: ReceivedSnapshot = {
      snapshot: mergeWorkers(
        this.opts.instance,
        now,
        locals.map((r) => r.snapshot),
      ),
      receivedAt: now,
    };
    const counted = [own, ...withinAge(peers, now, this.opts.graceMs)];
    return { models: Object.fromEntries(systemTotals(counted, now)), instances: counted.length };
  }
}

/** A worker's view: the primary computes it for the whole instance. */
export class RemoteDemand implements DemandView {
  constructor(
    private readonly link: WorkerLink,
    private readonly timeoutMs: number,
  ) {}

  async instance(): Promise<DemandSnapshot> {
    return (await this.link.ask(DEMAND_TOPICS.instance, this.timeoutMs)) as DemandSnapshot;
  }

  async system(): Promise<SystemDemand> {
    return (await this.link.ask(DEMAND_TOPICS.system, this.timeoutMs)) as SystemDemand;
  }

  async notice(snapshot: DemandSnapshot): Promise<void> {
    await this.link.ask(DEMAND_TOPICS.notice, this.timeoutMs, snapshot);
  }
}
