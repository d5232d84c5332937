// A clock that moves only when a test says so: timers fire in due order as advance() passes their time, and promise
// work they start settles before the next one fires, so a test sees every step without waiting on real time.
import { setImmediate as turn } from 'node:timers/promises';
import type { Clock, ClockTimer } from '../../src/router/util/clock.js';

class FakeTimer implements ClockTimer {
  dueAt = 0;
  /** when it was (re)armed: timers due at the same moment fire in that order */
  seq = 0;
  /** cleared: as with Node's timers, refresh() no longer brings it back */
  cleared = false;

  constructor(
    private readonly clock: FakeClock,
    readonly fire: () => void,
    readonly ms: number,
  ) {}

  unref(): ClockTimer {
    return this;
  }

  refresh(): ClockTimer {
    if (!this.cleared) this.clock.arm(this);
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
      timer.cleared = true;
      this.timers.delete(timer);
    }
  }

  /** (re)starts a timer's duration from now */
  arm(timer: FakeTimer): void {
    timer.dueAt = this.at + timer.ms;
    timer.seq = this.seq++;
    this.timers.add(timer);
  }

  /** Moves time forward by `ms`, firing each timer as its time comes and letting the work it starts settle. */
  async advance(ms: number): Promise<void> {
    const until = this.at + ms;
    await settle();
    for (let next = this.next(); next !== undefined && next.dueAt <= until; next = this.next()) {
      this.at = next.dueAt;
      this.timers.delete(next);
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
