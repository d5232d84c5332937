// One view of demand for every question about it: this instance (all its workers), and the whole system (this
// instance plus every peer replica). KEDA's scaler asks the system; GET /demand answers for the instance.
import type { WorkerLink } from '../util/ipc.js';
import { mergeWorkers, systemTotals, withinAge, type DemandSnapshot, type ModelTotals, type ReceivedSnapshot } from './demand-snapshot.js';
import type { PeerDemand } from './peers.js';

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

export const DEMAND_TOPICS = { instance: 'demand:instance', system: 'demand:system', local: 'demand:local' } as const;

export interface AggregateDemandOptions {
  readonly instance: string;
  /** this instance's process snapshots (one in a single process; one per worker, last known, in a primary) */
  readonly locals: () => Promise<ReceivedSnapshot[]>;
  readonly peers: PeerDemand | undefined;
  readonly graceMs: number;
  readonly now?: () => number;
}

/** The view computed here: in a single router process, or in the primary of --workers. */
export class AggregateDemand implements DemandView {
  private inflight: Promise<SystemDemand> | undefined;
  private readonly now: () => number;

  constructor(private readonly opts: AggregateDemandOptions) {
    this.now = opts.now ?? Date.now;
  }

  async instance(): Promise<DemandSnapshot> {
    const locals = await this.opts.locals();
    return mergeWorkers(
      this.opts.instance,
      this.now(),
      locals.map((r) => r.snapshot),
    );
  }

  /** Concurrent callers (several KEDA streams on one tick) share one round of peer requests. */
  system(): Promise<SystemDemand> {
    this.inflight ??= this.compute().finally(() => {
      this.inflight = undefined;
    });
    return this.inflight;
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
}
