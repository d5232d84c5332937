// Scale from zero: the hold queue, demand per model, learned cold-start times and the KEDA scaler, wired together.
import type { ModelCatalog } from '../catalog/catalog.js';
import type { ScalingConfig } from '../config/config.js';
import type { Logger } from '../util/log.js';
import { ColdStartLearner } from './cold-start.js';
import { DemandTracker } from './demand.js';
import { HoldQueue } from './hold-queue.js';
import { KedaScaler } from './keda.js';

export class Scaling {
  readonly hold: HoldQueue;
  readonly demand: DemandTracker;
  readonly coldStart: ColdStartLearner;
  private keda: KedaScaler | undefined;

  constructor(
    private readonly catalog: ModelCatalog,
    private readonly config: ScalingConfig,
    retryAfterDefault: number,
    private readonly log: Logger,
  ) {
    this.hold = new HoldQueue(catalog, {
      waitMs: (model) => config.coldStartWaitPerModelMs.get(model) ?? config.coldStartWaitMs,
      maxPerModel: config.queueSize,
      releasePerEndpoint: config.releasePerEndpoint,
    });
    this.demand = new DemandTracker(catalog, { graceMs: config.graceMs, wakeAlarmMs: config.wakeAlarmMs }, log, (m) => this.hold.held(m));
    this.coldStart = new ColdStartLearner(catalog, { defaultSeconds: retryAfterDefault, maxSeconds: config.maxRetryAfterSeconds });
  }

  /** The KEDA scaler's port once started (undefined when it is off). */
  get kedaPort(): number | undefined {
    return this.keda?.port;
  }

  async start(host: string): Promise<void> {
    this.hold.start();
    this.demand.start();
    this.coldStart.start();
    if (this.config.kedaScalerPort !== undefined) {
      this.keda = new KedaScaler(
        {
          canonical: (m) => {
            const r = this.catalog.resolve(m);
            return r.kind === 'unknown' ? undefined : r.model;
          },
          active: (m) => this.demand.active(m),
          load: (m) => this.hold.held(m) + this.demand.inFlight(m),
        },
        this.log,
      );
      await this.keda.start(host, this.config.kedaScalerPort);
    }
  }

  async stop(): Promise<void> {
    this.hold.stop();
    this.demand.stop();
    this.coldStart.stop();
    await this.keda?.stop();
  }
}
