// A clock that moves only when a test says so: timers fire in due order as advance() passes their time, and promise
// work they start settles before the next one fires, so a test sees every step without waiting on real time.
import { setImmediate as turn } from 'node:timers/promises';
import type { Clock, ClockTimer } from '../../src/router/util/clock.js';

class FakeTimer implements ClockTimer {
  dueAt = 0;
  /** arms order: timers due at the same moment fire in the order they were set */
  seq = 0;
  pending = false;

  constructor(
    private readonly clock: FakeClock,
    readonly fire: () => void,
    readonly ms: number,
  ) {}

  unref(): ClockTimer {
    return this;
  }

  refresh(): ClockTimer {
    this.clock.arm(this);
    return this;
  }
}

export class FakeClock implements Clock {
  private at: number;
  private seq = 0;
  private readonly timers = new Set<FakeTimer>();

  constructor(start = 1_000_000) {
    this.at = start;
  }

  now(): number {
    return this.at;
  }

  setTimeout(fire: () => void, ms: number): ClockTimer;
  setTimeout<A>(fire: (arg: A) => void, ms: number, arg: A): ClockTimer;
  setTimeout(fire: (arg?: unknown) => void, ms: number, arg?: unknown): ClockTimer {
    const timer = new FakeTimer(this, () => fire(arg), Math.max(0, ms));
    this.arm(timer);
    return timer;
  }

  clearTimeout(timer: ClockTimer | undefined): void {
    if (timer instanceof FakeTimer) {
      timer.pending = false;
      this.timers.delete(timer);
    }
  }

  /** (re)starts a timer's duration from now */
  arm(timer: FakeTimer): void {
    timer.dueAt = this.at + timer.ms;
    timer.seq = this.seq++;
    timer.pending = true;
    this.timers.add(timer);
  }

  /** ms until the next timer is due; undefined when none is pending */
  nextIn(): number | undefined {
    const next = this.next();
    return next === undefined ? undefined : next.dueAt - this.at;
  }

  /** Moves time forward by `ms`, firing each timer as its time comes and letting the work it starts settle. */
  async advance(ms: number): Promise<void> {
    const until = this.at + ms;
    await settle();
    for (let next = this.next(); next !== undefined && next.dueAt <= until; next = this.next()) {
      this.at = next.dueAt;
      this.timers.delete(next);
      next.pending = false;
      next.fire();
      await settle();
    }
    this.at = until;
  }

  private next(): FakeTimer | undefined {
    let best: FakeTimer | undefined;
    for (const t of this.timers) if (best === undefined || t.dueAt < best.dueAt || (t.dueAt === best.dueAt && t.seq < best.seq)) best = t;
    return best;
  }
}

/** Lets promise chains started by a timer run to their end (a few event-loop turns; no time passes on the clock). */
async function settle(): Promise<void> {
  for (let i = 0; i < 3; i++) await turn();
}
