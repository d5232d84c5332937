// The operator's view, assembled: the timeline and what feeds it, the state the page shows, GET /events and the page
// itself (GET /dashboard). RouterApp puts its routes in the admin route table, behind the same API-key rules as
// /engines, and hands it what the prober and scaling report.
import type { ModelCatalog } from '../../catalog/catalog.js';
import type { AdapterObserver } from '../../core/lora.js';
import type { MigrationOutcome } from '../../core/forward.js';
import type { ColdStart } from '../../scaling/cold-start.js';
import type { WakeAlarm } from '../../scaling/demand.js';
import type { DemandView } from '../../scaling/demand-view.js';
import type { Scaling } from '../../scaling/index.js';
import type { WorkerLink } from '../../util/ipc.js';
import type { Logger } from '../../util/log.js';
import type { Route } from '../routes.js';
import { DashboardPage } from './page.js';
import { TimelineRecorder } from './recorder.js';
import { EventStream, STREAM_DEFAULTS, type StreamOptions } from './stream.js';
import { sharedHappening, Timeline } from './timeline.js';
import { DashboardView, type InstanceInfo } from './view.js';
import { KvDecisionTally, type KvStatusReader } from './kv-view.js';

export interface DashboardOptions {
  readonly catalog: ModelCatalog;
  readonly scaling: Scaling;
  /** this instance's demand (every worker): the page's demand figures */
  readonly demandView: DemandView;
  readonly instance: InstanceInfo;
  readonly statsIntervalMs: number;
  readonly log: Logger;
  readonly stream?: StreamOptions;
  /** under --workers: the worker's line to the others, for what happens in one worker alone */
  readonly link?: Pick<WorkerLink, 'publish' | 'onRelay'>;
}

/** the IPC topic of relayed timeline events */
const TIMELINE_TOPIC = 'dashboard.timeline';

export class Dashboard {
  readonly timeline = new Timeline();
  private readonly recorder: TimelineRecorder;
  private readonly view: DashboardView;
  private readonly stream: EventStream;
  private readonly page = new DashboardPage();
  /** kvaware decisions per model, for the page (the policy reports to it next to the metrics) */
  readonly kvDecisions = new KvDecisionTally();
  private kvStreams: KvStatusReader | undefined;
  private flow: { saturation(model: string): number } | undefined;

  constructor(o: DashboardOptions) {
    // the recorder asks the view why a model changed state; it starts reporting only after the view exists
    const link = o.link;
    this.recorder = new TimelineRecorder(
      o.catalog,
      this.timeline,
      (model) => this.view.reason(model),
      Date.now,
      link ? (h) => link.publish(TIMELINE_TOPIC, h) : undefined,
    );
    link?.onRelay(TIMELINE_TOPIC, (value, worker) => {
      const h = sharedHappening(value);
      if (h) this.recorder.relayed(h, worker);
    });
    this.view = new DashboardView({
      catalog: o.catalog,
      scaling: o.scaling,
      demandView: o.demandView,
      recorder: this.recorder,
      instance: o.instance,
      statsIntervalMs: o.statsIntervalMs,
      kv: () => (this.kvStreams ? { streams: this.kvStreams, tally: this.kvDecisions } : undefined),
      flow: () => this.flow,
    });
    this.stream = new EventStream(this.view, this.timeline, o.log, o.stream ?? STREAM_DEFAULTS);
  }

  /** GET /dashboard (and its script and style sheet) and GET /events; a browser is asked for the API key if one is needed. */
  routes(): Route[] {
    return [
      ...this.page.paths.map((path): Route => ({ method: 'GET', path, browser: true, handler: (_req, res, p) => this.page.serve(res, p) })),
      { method: 'GET', path: '/dashboard/', browser: true, handler: (_req, res) => DashboardPage.redirectFromSlash(res) },
      { method: 'GET', path: '/events', browser: true, handler: (req, res) => this.stream.handle(req, res) },
    ];
  }

  /** kvaware is in use: the page shows the endpoints' KV-cache event streams and the models' decisions. */
  followKv(streams: KvStatusReader): void {
    this.kvStreams = streams;
  }

  /** --flow-control is on: the page shows each model pool's saturation beside what waits for it. */
  followFlow(flow: { saturation(model: string): number }): void {
    this.flow = flow;
  }

  start(): void {
    this.recorder.start();
    this.stream.start();
  }

  /** /events streams open now, and those dropped for reading too slowly since start (metrics) */
  get clients(): number {
    return this.stream.connected;
  }

  get dropped(): number {
    return this.stream.dropped;
  }

  /** Ends the event streams, so that shutdown does not wait for them. */
  stop(): void {
    this.stream.stop();
    this.recorder.stop();
  }

  coldStart(c: ColdStart): void {
    this.recorder.coldStart(c);
  }

  wakeAlarm(a: WakeAlarm): void {
    this.recorder.wakeAlarm(a);
  }

  failover(model: string): void {
    this.recorder.failover(model);
  }

  /** A stream broken mid-way (--migration-limit): continued elsewhere, or ended with the error event, on the timeline. */
  migration(model: string, outcome: MigrationOutcome): void {
    if (outcome === 'migrated') this.recorder.migration(model, true);
    else if (outcome === 'refused' || outcome === 'limit' || outcome === 'no-endpoint') this.recorder.migration(model, false);
  }

  /** Adapter loads and unloads go on the timeline. */
  readonly adapters: Pick<AdapterObserver, 'loaded' | 'unloaded'> = {
    loaded: (e) => this.recorder.adapterLoaded(e),
    unloaded: (e) => this.recorder.adapterUnloaded(e),
  };
}
