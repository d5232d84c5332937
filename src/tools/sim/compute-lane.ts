// One engine's compute, as an engine without chunked prefill spends it (--prefill-stalls-decode): prefills run one
// after another, each as a step of its own, and a running stream's next token waits while one runs. That is what
// makes a long prompt raise every other stream's inter-token latency on an aggregated engine, and what a decode engine
// of a P/D pair, which never prefills, is spared. Times are milliseconds on any monotonic clock the caller keeps.

export class ComputeLane {
  private busyUntil = Number.NEGATIVE_INFINITY;
  /** decode steps that waited for a prefill, and how long they waited in all (ms) */
  stalls = 0;
  stalledMs = 0;

  resetStats(): void {
    this.stalls = 0;
    this.stalledMs = 0;
  }

  /** Reserves a prefill of `ms` after those already reserved; returns how long from `now` until it ends. */
  prefill(now: number, ms: number): number {
    const start = Math.max(now, this.busyUntil);
    this.busyUntil = start + ms;
    return this.busyUntil - now;
  }

  /** How long a decode step due at `now` waits for the prefill running then (0: none is), counted as a stall. */
  decodeWait(now: number): number {
    const wait = this.busyUntil - now;
    if (wait <= 0) return 0;
    this.stalls++;
    this.stalledMs += wait;
    return wait;
  }
}
