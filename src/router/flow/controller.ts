// Flow control (--flow-control): when a model's pool of engines is saturated (saturation.ts), its requests wait in the
// router instead of in the engines' own first-come queues, and leave by priority and turn (flow-queue.ts) as room
// appears, so that priority and fairness between tenants decide, not the order of arrival.
//
// A request that finds its pool below saturation and nobody waiting passes at once (admit() answers synchronously,
// without a timer or a promise). Otherwise:
//  - sheddable (negative priority) while saturated: refused at once (429 `overloaded`);
//  - over the caps (requests or bytes, in all or in its model's band): refused (429 `queue_full`);
//  - else it waits: the pump releases the next request by band and turn whenever the pool is below saturation (on a
//    tick while anything waits, and when a request of the model ends); one whose time is up (`queueTimeoutMs`) is
//    refused (503 `queue_timeout`); one whose client leaves is taken out at once.
// Every request admitted counts as in transit to its pool until its forwarding begins (ticket.forwarding()), so a burst
// released between two scrapes is seen at once. Each router process queues what it receives; saturation comes from the
// engines' metrics every replica reads, so replicas release alike.
import type { Endpoint } from '../core/endpoint.js';
import type { ClientGone } from '../core/client-gone.js';
import type { FlowIdentity } from '../core/flow.js';
import { FlowQueue, type Waiting } from './flow-queue.js';
import { poolSaturation, type SaturationThresholds } from './saturation.js';
import { type Clock, type ClockTimer, realClock } from '../util/clock.js';

export type RefusalReason = 'overloaded' | 'queue_full' | 'queue_timeout' | 'shutdown';

/** What admit() decides: the request goes on (with its ticket), is refused, or its client left while it waited. */
export type FlowAdmission =
  | { readonly kind: 'go'; readonly ticket: FlowTicket; readonly waitedMs: number }
  | { readonly kind: 'refused'; readonly reason: RefusalReason; readonly retryAfterSeconds: number }
  | { readonly kind: 'gone' };

/** A request that went on: it says when its forwarding begins and when it ends. */
export interface FlowTicket {
  /** it is being forwarded: no longer in transit (idempotent) */
  forwarding(): void;
  /** it ended, however (idempotent) */
  done(): void;
}

/** What the metrics and the operator's view are told. */
export interface FlowObserver {
  /** a request left its queue: dispatched, timed out or its client gone, after `waitedMs` */
  left?(model: string, flow: FlowIdentity, outcome: 'dispatched' | 'timeout' | 'gone' | 'shutdown', waitedMs: number): void;
  refused?(model: string, flow: FlowIdentity, reason: RefusalReason): void;
}

export interface FlowControlOptions {
  readonly thresholds: SaturationThresholds;
  /** how long a request may wait, ms */
  readonly queueTimeoutMs: number;
  /** requests and body bytes waiting, all models together */
  readonly maxRequests: number;
  readonly maxBytes: number;
  /** requests and body bytes waiting per model and priority band */
  readonly bandMaxRequests: number;
  readonly bandMaxBytes: number;
  /** the ready endpoints of a model now */
  readonly candidates: (model: string) => readonly Endpoint[];
  /** how often waiting queues are looked at while anything waits, ms (default 20) */
  readonly tickMs?: number;
  readonly clock?: Clock;
  readonly observer?: FlowObserver;
}

/** The settings the config file may change while the router runs. */
export type FlowLimits = Pick<
  FlowControlOptions,
  'thresholds' | 'queueTimeoutMs' | 'maxRequests' | 'maxBytes' | 'bandMaxRequests' | 'bandMaxBytes'
>;

interface Queued extends Waiting {
  readonly model: string;
  readonly flow: FlowIdentity;
  readonly settle: (a: FlowAdmission) => void;
}

interface ModelFlows {
  readonly queue: FlowQueue<Queued>;
  /** admitted and not yet forwarding */
  inTransit: number;
}

const TICK = (c: FlowController): void => c.onTick();

/** Retry-After for a refusal: the pool is full now; a second is the scrape's and the engines' pace. */
const RETRY_AFTER_SECONDS = 1;

export class FlowController {
  private readonly models = new Map<string, ModelFlows>();
  private waitingRequests = 0;
  private waitingBytes = 0;
  private timer: ClockTimer | undefined;
  private stopped = false;
  private readonly clock: Clock;

  constructor(private opts: FlowControlOptions) {
    this.clock = opts.clock ?? realClock;
  }

  /**
   * New thresholds, caps and time-out (the config file changed), from the next decision on: a request already waiting
   * keeps its deadline, and one over a lower cap is not refused for it; the tick that runs while anything waits
   * releases by the new thresholds.
   */
  setLimits(limits: FlowLimits): void {
    this.opts = { ...this.opts, ...limits };
  }

  private now(): number {
    return this.clock.now();
  }

  /** The pool's saturation now (1 or more: saturated). */
  saturation(model: string): number {
    return poolSaturation(this.opts.candidates(model), this.models.get(model)?.inTransit ?? 0, this.now(), this.opts.thresholds);
  }

  /**
   * Whether the request goes on now, waits (a promise), or is refused. `bytes`: its body's size; `gone`: its client's
   * departure signal.
   */
  admit(model: string, flow: FlowIdentity, bytes: number, gone: ClientGone): FlowAdmission | Promise<FlowAdmission> {
    if (this.stopped) return { kind: 'refused', reason: 'shutdown', retryAfterSeconds: RETRY_AFTER_SECONDS };
    const m = this.entry(model);
    const saturated = this.saturation(model) >= 1;
    if (m.queue.count === 0 && !saturated) {
      m.inTransit++;
      return { kind: 'go', ticket: this.ticket(model, m), waitedMs: 0 };
    }
    if (saturated && flow.priority < 0) return this.refuse(model, flow, 'overloaded');
    const band = m.queue.band(flow.priority);
    if (
      this.waitingRequests + 1 > this.opts.maxRequests ||
      this.waitingBytes + bytes > this.opts.maxBytes ||
      (band?.count ?? 0) + 1 > this.opts.bandMaxRequests ||
      (band?.bytes ?? 0) + bytes > this.opts.bandMaxBytes
    )
      return this.refuse(model, flow, 'queue_full');
    if (gone.gone) return { kind: 'gone' };
    const at = this.now();
    return new Promise<FlowAdmission>((resolve) => {
      const leave = (): void => {
        if (m.queue.remove(q)) this.leftQueue(q, 'gone', { kind: 'gone' });
      };
      const q: Queued = {
        model,
        flow,
        tenant: flow.tenant,
        priority: flow.priority,
        bytes,
        enqueuedAt: at,
        deadline: at + this.opts.queueTimeoutMs,
        gone: false,
        settle: (a) => {
          gone.off(leave);
          resolve(a);
        },
      };
      m.queue.push(q);
      this.waitingRequests++;
      this.waitingBytes += bytes;
      gone.on(leave);
      this.ensureTicking();
      // room may have appeared since the check above (it runs synchronously, but a pump may be due)
      this.pump(model, m);
    });
  }

  /** Requests waiting for the model now (its demand: /demand and KEDA count them). */
  queued(model: string): number {
    return this.models.get(model)?.queue.count ?? 0;
  }

  /** Per model with anything waiting: its saturation and its bands (the metrics and the operator's view). */
  snapshot(): Array<{ model: string; saturation: number; bands: ReturnType<FlowQueue<Queued>['bandsNow']> }> {
    const out = [];
    for (const [model, m] of this.models) out.push({ model, saturation: this.saturation(model), bands: m.queue.bandsNow() });
    return out;
  }

  /** Answers everything waiting (503, so clients retry elsewhere) and admits nothing from now on. */
  stop(): void {
    this.stopped = true;
    this.clock.clearTimeout(this.timer);
    this.timer = undefined;
    for (const m of this.models.values())
      for (const q of m.queue.drain())
        this.leftQueue(q, 'shutdown', { kind: 'refused', reason: 'shutdown', retryAfterSeconds: RETRY_AFTER_SECONDS });
  }

  private entry(model: string): ModelFlows {
    let m = this.models.get(model);
    if (m === undefined) {
      m = { queue: new FlowQueue<Queued>(), inTransit: 0 };
      this.models.set(model, m);
    }
    return m;
  }

  private ticket(model: string, m: ModelFlows): FlowTicket {
    let forwarding = false;
    let done = false;
    return {
      forwarding: () => {
        if (forwarding) return;
        forwarding = true;
        m.inTransit--;
      },
      done: () => {
        if (done) return;
        done = true;
        if (!forwarding) {
          forwarding = true;
          m.inTransit--;
        }
        // its place on an engine is free: the next may go
        if (m.queue.count > 0) this.pump(model, m);
      },
    };
  }

  private refuse(model: string, flow: FlowIdentity, reason: RefusalReason): FlowAdmission {
    this.opts.observer?.refused?.(model, flow, reason);
    return { kind: 'refused', reason, retryAfterSeconds: RETRY_AFTER_SECONDS };
  }

  /** Releases waiting requests, next by band and turn, while the pool is below saturation. */
  private pump(model: string, m: ModelFlows): void {
    while (m.queue.count > 0 && this.saturation(model) < 1) {
      const q = m.queue.take();
      if (q === undefined) break;
      m.inTransit++;
      this.leftQueue(q, 'dispatched', { kind: 'go', ticket: this.ticket(model, m), waitedMs: this.now() - q.enqueuedAt });
    }
  }

  private leftQueue(q: Queued, outcome: 'dispatched' | 'timeout' | 'gone' | 'shutdown', admission: FlowAdmission): void {
    this.waitingRequests--;
    this.waitingBytes -= q.bytes;
    const waited = this.now() - q.enqueuedAt;
    this.opts.observer?.left?.(q.model, q.flow, outcome, waited);
    if (outcome === 'timeout') this.opts.observer?.refused?.(q.model, q.flow, 'queue_timeout');
    q.settle(admission);
  }

  /** the tick's timer fired (public for the timer's sake only) */
  onTick(): void {
    this.timer = undefined;
    const now = this.now();
    for (const [model, m] of this.models) {
      if (m.queue.count === 0) continue;
      for (const q of m.queue.expire(now))
        this.leftQueue(q, 'timeout', { kind: 'refused', reason: 'queue_timeout', retryAfterSeconds: RETRY_AFTER_SECONDS });
      this.pump(model, m);
    }
    if (this.waitingRequests > 0) this.ensureTicking();
  }

  private ensureTicking(): void {
    if (this.timer !== undefined || this.stopped) return;
    this.timer = this.clock.setTimeout(TICK, this.opts.tickMs ?? 20, this).unref();
  }
}
