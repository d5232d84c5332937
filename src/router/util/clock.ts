// Time as a dependency: what schedules by time takes a Clock, so its unit tests drive time instead of waiting for it.

/** A pending timer. unref(): it does not keep the process alive; refresh(): it starts over with its duration. */
export interface ClockTimer {
  unref(): ClockTimer;
  refresh(): ClockTimer;
}

export interface Clock {
  /** ms since the epoch, as Date.now() */
  now(): number;
  /** as the global setTimeout; the one argument lets a hot caller pass its state instead of allocating a closure */
  setTimeout(fire: () => void, ms: number): ClockTimer;
  setTimeout<A>(fire: (arg: A) => void, ms: number, arg: A): ClockTimer;
  clearTimeout(timer: ClockTimer | undefined): void;
}

/** The process's own time: the globals, with nothing in between that allocates. */
export const realClock: Clock = {
  now: Date.now,
  setTimeout: (fire: (arg?: unknown) => void, ms: number, arg?: unknown): ClockTimer =>
    arg === undefined ? setTimeout(fire, ms) : setTimeout(fire, ms, arg),
  clearTimeout: (timer: ClockTimer | undefined): void => clearTimeout(timer as NodeJS.Timeout | undefined),
};
