// The demo's simulated autoscaler: what KEDA does in a cluster, in one loop. It reads the router as a real autoscaler
// does, over HTTP (GET /demand, the answer the KEDA scaler sums over replicas): a model at zero gets an engine when
// requests for it are held (the engine then loads for a few seconds), and goes back to zero once it has been idle for
// the grace period. What it changes is the cluster's side: the model's workload and its engine's endpoint.
import { request } from 'undici';
import type { ModelCatalog } from '../../router/catalog/catalog.js';
import type { Logger } from '../../router/util/log.js';

export interface DemoEngine {
  readonly url: string;
  stop(): void;
}

export interface AutoscalerOptions {
  readonly model: string;
  /** starts one engine for the model; it may take a while to load */
  readonly startEngine: () => Promise<DemoEngine>;
  /** idle this long (no request held, in flight, arriving or ending) and the model goes back to zero */
  readonly graceMs: number;
  readonly tickMs?: number;
}

/** One model's entry of GET /demand. */
interface ModelDemand {
  readonly held?: number;
  readonly inFlight?: number;
  readonly lastArrivalAt?: number | null;
  readonly lastEndAt?: number | null;
}

const SOURCE = 'demo-autoscaler';

export class DemoAutoscaler {
  private engine: DemoEngine | undefined;
  private starting = false;
  private timer: NodeJS.Timeout | undefined;
  private ticking = false;

  constructor(
    /** the cluster: where the model's workload and its engine's pod are declared */
    private readonly cluster: ModelCatalog,
    private readonly opts: AutoscalerOptions,
    private readonly log: Logger,
  ) {}

  /** Declares the model's workload (at zero), as the cluster does before any router looks. */
  declare(): void {
    this.publish();
  }

  /** Starts asking the router's GET /demand every tick. */
  watch(routerUrl: string): void {
    this.timer = setInterval(() => void this.tick(`${routerUrl}/demand`), this.opts.tickMs ?? 200);
  }

  stop(): void {
    clearInterval(this.timer);
    this.engine?.stop();
  }

  /** The Deployment's view: the model is always declared; replicas are wanted while an engine runs. */
  private publish(): void {
    this.cluster.setDeclarations(SOURCE, [{ model: this.opts.model, replicasWanted: this.engine !== undefined || this.starting }]);
    this.cluster.setEndpoints(SOURCE, this.engine ? [{ id: this.engine.url, url: this.engine.url, models: [this.opts.model] }] : []);
  }

  private async tick(demandUrl: string): Promise<void> {
    if (this.ticking) return;
    this.ticking = true;
    try {
      const demand = await this.demand(demandUrl);
      if (demand === undefined) return;
      await this.scale(demand.at, demand.model);
    } finally {
      this.ticking = false;
    }
  }

  private async demand(url: string): Promise<{ at: number; model: ModelDemand } | undefined> {
    try {
      const res = await request(url, { headersTimeout: 2_000, bodyTimeout: 2_000 });
      if (res.statusCode !== 200) {
        await res.body.dump();
        return undefined;
      }
      const body = (await res.body.json()) as { at?: number; models?: Record<string, ModelDemand> };
      return { at: body.at ?? Date.now(), model: body.models?.[this.opts.model] ?? {} };
    } catch {
      // the router is starting or stopping: ask again next tick
      return undefined;
    }
  }

  private async scale(at: number, d: ModelDemand): Promise<void> {
    const model = this.opts.model;
    if (!this.engine) {
      if (this.starting || (d.held ?? 0) === 0) return;
      this.starting = true;
      this.publish();
      this.log.info({ model }, 'demo autoscaler: requests held for a model at zero, starting an engine (0 -> 1)');
      try {
        this.engine = await this.opts.startEngine();
      } finally {
        this.starting = false;
        this.publish();
      }
      return;
    }
    const last = Math.max(d.lastArrivalAt ?? 0, d.lastEndAt ?? 0);
    if ((d.held ?? 0) > 0 || (d.inFlight ?? 0) > 0 || at - last < this.opts.graceMs) return;
    this.log.info({ model }, 'demo autoscaler: idle, back to zero (1 -> 0)');
    this.engine.stop();
    this.engine = undefined;
    this.publish();
  }
}
