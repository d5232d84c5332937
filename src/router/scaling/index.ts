// Scale from zero: the hold queue, demand per model, learned cold-start times and the KEDA scaler, wired together.
import { readFileSync } from 'node:fs';
import type { ModelCatalog } from '../catalog/catalog.js';
import type { ScalingConfig } from '../config/config.js';
import { StartupError } from '../core/startup-error.js';
import type { Logger } from '../util/log.js';
import { ColdStartLearner, type ColdStart } from './cold-start.js';
import { DemandTracker, type WakeAlarm } from './demand.js';
import type { DemandSnapshot } from './demand-snapshot.js';
import type { DemandView } from './demand-view.js';
import { HoldQueue } from './hold-queue.js';
// the gRPC server and its proto are loaded only by a router with a KEDA scaler port (a tenth of a second of CPU at start)
import type { KedaScaler, KedaTls, ModelLookup } from './keda.js';

/** What scaling reports as it happens (the operator's timeline, metrics). */
export interface ScalingObservers {
  readonly coldStart?: (c: ColdStart) => void;
  readonly wakeAlarm?: (a: WakeAlarm) => void;
  /** the KEDA scaler answered a call with an error (gRPC method, status name) */
  readonly kedaError?: (method: string, code: string) => void;
  /** requests waiting in flow control for a model now (they are demand: a saturated pool asks for more engines) */
  readonly queued?: (model: string) => number;
}

function readPem(path: string, flag: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new StartupError(`${flag} ${path}: ${(err as Error).message}`);
  }
}

/** The KEDA scaler's TLS files, read once at startup. */
export function loadKedaTls(cfg: ScalingConfig['kedaTls']): KedaTls | undefined {
  if (!cfg) return undefined;
  return {
    cert: readPem(cfg.certFile, '--keda-tls-cert'),
    key: readPem(cfg.keyFile, '--keda-tls-key'),
    ...(cfg.caFile === undefined ? {} : { ca: readPem(cfg.caFile, '--keda-tls-ca') }),
  };
}

export class Scaling {
  readonly hold: HoldQueue;
  readonly demand: DemandTracker;
  readonly coldStart: ColdStartLearner;
  private keda: KedaScaler | undefined;
  private unsubscribe: (() => void) | undefined;

  constructor(
    private readonly catalog: ModelCatalog,
    private readonly config: ScalingConfig,
    retryAfterDefault: number,
    private readonly log: Logger,
    /** the first request started waiting for a model (its endpoints should be probed now) */
    onWaiting?: (model: string) => void,
    private readonly observers: ScalingObservers = {},
  ) {
    this.hold = new HoldQueue(catalog, {
      onWaiting,
      waitMs: (model) => config.coldStartWaitPerModelMs.get(model) ?? config.coldStartWaitMs,
      maxPerModel: config.queueSize,
      releasePerEndpoint: config.releasePerEndpoint,
      onTimeout: (model) => this.demand.holdTimedOut(model),
    });
    this.demand = new DemandTracker(
      catalog,
      { graceMs: config.graceMs, wakeAlarmMs: config.wakeAlarmMs, onWakeAlarm: observers.wakeAlarm },
      log,
      (m) => this.hold.held(m),
      (m) => this.hold.oldestHeldAt(m),
      (m) => observers.queued?.(m) ?? 0,
    );
    this.coldStart = new ColdStartLearner(
      catalog,
      { defaultSeconds: retryAfterDefault, maxSeconds: config.maxRetryAfterSeconds },
      Date.now,
      observers.coldStart,
    );
  }

  /** Models that have demand series: every declared or served one (aliases count as their target). */
  models(): string[] {
    return this.catalog
      .models()
      .filter((m) => !m.aliasOf)
      .map((m) => m.id);
  }

  /** This process's own demand, for GET /demand and for the other processes that sum it. */
  snapshot(instance: string): DemandSnapshot {
    return this.demand.snapshot(instance, this.models());
  }

  /**
   * Starts the queue, the tracker and the learner; with --keda-scaler-port also the scaler, which answers from
   * `view` (every worker and replica). `synced` says whether discovery has listed once (before that, unknown is a guess).
   */
  async start(host: string, view: DemandView, synced: () => boolean): Promise<void> {
    this.hold.start();
    this.demand.start();
    this.coldStart.start();
    this.unsubscribe = this.catalog.onChange((e) => {
      if (e.type === 'declarations' || e.type === 'endpoint-removed') this.demand.prune(new Set(this.models()));
    });
    if (this.config.kedaScalerPort !== undefined) {
      const lookup = (m: string): ModelLookup => {
        const r = this.catalog.resolve(m);
        if (r.kind !== 'unknown') return { kind: 'known', model: r.model };
        return synced() ? { kind: 'unknown' } : { kind: 'not-synced' };
      };
      const { KedaScaler: Scaler } = await import('./keda.js');
      this.keda = new Scaler(
        { lookup, totals: async () => (await view.system()).models, graceMs: this.config.graceMs, onError: this.observers.kedaError },
        this.log,
      );
      await this.keda.start(host, this.config.kedaScalerPort, loadKedaTls(this.config.kedaTls));
    }
  }

  async stop(): Promise<void> {
    this.unsubscribe?.();
    this.hold.stop();
    this.demand.stop();
    this.coldStart.stop();
    await this.keda?.stop();
  }
}
