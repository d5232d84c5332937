// The demo's simulated autoscaler: what KEDA does in a cluster, in one loop. A model at zero gets an engine when
// the router sees demand for it (the engine then loads for a few seconds), and goes back to zero after idling.
import type { ModelCatalog } from '../../router/catalog/catalog.js';
import type { Scaling } from '../../router/scaling/index.js';
import type { Logger } from '../../router/util/log.js';

export interface DemoEngine {
  readonly url: string;
  stop(): void;
}

export interface AutoscalerOptions {
  readonly model: string;
  /** starts one engine for the model; it may take a while to load */
  readonly startEngine: () => Promise<DemoEngine>;
  readonly tickMs?: number;
}

const SOURCE = 'demo-autoscaler';

export class DemoAutoscaler {
  private engine: DemoEngine | undefined;
  private starting = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly catalog: ModelCatalog,
    private readonly scaling: Scaling,
    private readonly opts: AutoscalerOptions,
    private readonly log: Logger,
  ) {}

  start(): void {
    this.publish();
    this.timer = setInterval(() => void this.tick(), this.opts.tickMs ?? 200);
  }

  stop(): void {
    clearInterval(this.timer);
    this.engine?.stop();
  }

  /** The Deployment's view: the model is always declared; replicas are wanted while an engine runs. */
  private publish(): void {
    this.catalog.setDeclarations(SOURCE, [{ model: this.opts.model, replicasWanted: this.engine !== undefined || this.starting }]);
    this.catalog.setEndpoints(SOURCE, this.engine ? [{ id: this.engine.url, url: this.engine.url, models: [this.opts.model] }] : []);
  }

  private async tick(): Promise<void> {
    const model = this.opts.model;
    if (!this.engine) {
      if (this.starting || this.scaling.hold.held(model) === 0) return;
      this.starting = true;
      this.publish();
      this.log.info({ model }, 'demo autoscaler: demand for a model at zero, starting an engine (0 -> 1)');
      try {
        this.engine = await this.opts.startEngine();
      } finally {
        this.starting = false;
        this.publish();
      }
      return;
    }
    // active: requests held or in flight, or one arrived within --scale-to-zero-grace-seconds
    if (this.scaling.demand.active(model)) return;
    this.log.info({ model }, 'demo autoscaler: idle, back to zero (1 -> 0)');
    this.engine.stop();
    this.engine = undefined;
    this.publish();
  }
}
