// The cold-start hold queue: a request for a declared model with no ready endpoint waits (FIFO, bounded per model)
// for one to become ready instead of getting a fast 503 — so clients keep sending and autoscalers see the demand.
// Released requests are spread over endpoints as they come up: each ready endpoint takes at most
// `releasePerEndpoint` requests in flight from the queue; a request whose wait is over goes to a ready model anyway.
import type { CatalogEvent, ModelCatalog } from '../catalog/catalog.js';

export type HoldOutcome = 'ready' | 'timeout' | 'aborted';

export interface HoldQueueOptions {
  /** how long a request for this model may wait, ms; 0 = do not hold */
  readonly waitMs: (model: string) => number;
  readonly maxPerModel: number;
  readonly releasePerEndpoint: number;
  /** how often waiting queues are re-checked (endpoint capacity and deadlines) */
  readonly tickMs?: number;
  readonly now?: () => number;
  /** a waiter's time ran out with no ready endpoint (it is answered 503) */
  readonly onTimeout?: (model: string) => void;
  /** the first request started waiting for a model that had none waiting */
  readonly onWaiting?: (model: string) => void;
}

interface Waiter {
  readonly arrivedAt: number;
  readonly deadline: number;
  readonly resolve: (outcome: HoldOutcome) => void;
  done: boolean;
}

export class QueueFullError extends Error {}

export class HoldQueue {
  private readonly queues = new Map<string, Waiter[]>();
  /** released this tick but not yet counted in an endpoint's in-flight */
  private readonly inTransit = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private unsubscribe: (() => void) | undefined;
  private readonly now: () => number;

  constructor(
    private readonly catalog: ModelCatalog,
    private readonly opts: HoldQueueOptions,
  ) {
    this.now = opts.now ?? Date.now;
  }

  start(): void {
    this.unsubscribe = this.catalog.onChange((e: CatalogEvent) => {
      if (e.type === 'endpoint-state' || e.type === 'endpoint-added' || e.type === 'declarations') this.pumpAll();
    });
  }

  /** Ends every wait (503 to each client, so it retries on another replica) and holds nothing from now on. */
  stop(): void {
    this.stopped = true;
    this.unsubscribe?.();
    clearInterval(this.timer);
    this.timer = undefined;
    for (const [model, q] of this.queues) {
      for (const w of q) this.settle(w, 'timeout');
      this.queues.delete(model);
    }
  }

  waitMs(model: string): number {
    return this.opts.waitMs(model);
  }

  /** Requests waiting for the model now. */
  held(model: string): number {
    return this.queues.get(model)?.length ?? 0;
  }

  /** Age of the oldest waiting request, seconds (0 when none). */
  oldestAgeSeconds(model: string): number {
    const first = this.oldestHeldAt(model);
    return first === null ? 0 : (this.now() - first) / 1000;
  }

  /** When the oldest waiting request arrived (ms since epoch), or null when none waits. */
  oldestHeldAt(model: string): number | null {
    return this.queues.get(model)?.[0]?.arrivedAt ?? null;
  }

  /** True when a new request for the model must queue behind earlier ones (keeps arrival order). */
  hasWaiters(model: string): boolean {
    return (this.queues.get(model)?.length ?? 0) > 0;
  }

  /**
   * Waits until the model can take this request, the wait is over, or `abort` is called.
   * Throws QueueFullError when the model's queue is full.
   */
  hold(model: string): { outcome: Promise<HoldOutcome>; abort: () => void } {
    if (this.stopped) return { outcome: Promise.resolve('timeout'), abort: () => undefined };
    let q = this.queues.get(model);
    if (!q) {
      q = [];
      this.queues.set(model, q);
    }
    if (q.length >= this.opts.maxPerModel) throw new QueueFullError(`${q.length} requests are already waiting for ${model}`);
    const now = this.now();
    let waiter!: Waiter;
    const outcome = new Promise<HoldOutcome>((resolve) => {
      waiter = { arrivedAt: now, deadline: now + this.opts.waitMs(model), resolve, done: false };
    });
    q.push(waiter);
    this.ensureTimer();
    this.pump(model);
    if (q.length === 1 && !waiter.done) this.opts.onWaiting?.(model);
    return {
      outcome,
      abort: () => {
        if (waiter.done) return;
        this.remove(model, waiter);
        this.settle(waiter, 'aborted');
      },
    };
  }

  private settle(w: Waiter, outcome: HoldOutcome): void {
    if (w.done) return;
    w.done = true;
    w.resolve(outcome);
  }

  private remove(model: string, w: Waiter): void {
    const q = this.queues.get(model);
    if (!q) return;
    const i = q.indexOf(w);
    if (i >= 0) q.splice(i, 1);
    if (q.length === 0) this.queues.delete(model);
  }

  private ensureTimer(): void {
    if (this.timer) return;
    this.timer = setInterval(() => this.pumpAll(), this.opts.tickMs ?? 50);
    this.timer.unref();
  }

  private pumpAll(): void {
    for (const model of [...this.queues.keys()]) this.pump(model);
    if (this.queues.size === 0 && this.timer) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }

  /** Releases waiters in arrival order while ready endpoints have room; ends the waits that are over. */
  private pump(model: string): void {
    const q = this.queues.get(model);
    if (!q || q.length === 0) return;
    const now = this.now();
    const r = this.catalog.resolve(model);
    let room = 0;
    if (r.kind === 'routable') {
      for (const e of r.candidates) room += Math.max(0, this.opts.releasePerEndpoint - e.inFlight);
      room -= this.inTransit.get(model) ?? 0;
    }
    let released = 0;
    const keep: Waiter[] = [];
    for (const w of q) {
      if (w.done) continue;
      if (r.kind === 'routable' && room > 0) {
        room--;
        released++;
        this.settle(w, 'ready');
      } else if (now >= w.deadline) {
        // the wait is over: a ready model takes it anyway (capacity is the engine's business), otherwise 503
        if (r.kind === 'routable') this.settle(w, 'ready');
        else {
          this.settle(w, 'timeout');
          this.opts.onTimeout?.(model);
        }
      } else keep.push(w);
    }
    if (keep.length === 0) this.queues.delete(model);
    else this.queues.set(model, keep);
    if (released > 0) {
      this.inTransit.set(model, (this.inTransit.get(model) ?? 0) + released);
      setImmediate(() => {
        const left = (this.inTransit.get(model) ?? 0) - released;
        if (left > 0) this.inTransit.set(model, left);
        else this.inTransit.delete(model);
      });
    }
  }
}
