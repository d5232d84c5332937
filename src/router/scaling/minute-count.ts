// Arrivals over the last minute, as the router records them: 60 one-second buckets in a ring, so a count is right
// whenever it is asked (the dashboard opened after the traffic, GET /demand) and costs a few operations per arrival.

const BUCKETS = 60;

export class MinuteCount {
  private readonly counts = new Uint32Array(BUCKETS);
  /** the second (ms since epoch / 1000, floored) each bucket counts; -1: none yet */
  private readonly seconds = new Float64Array(BUCKETS).fill(-1);

  /** One arrival at `now` (ms since epoch). */
  add(now: number): void {
    const second = Math.floor(now / 1000);
    const i = second % BUCKETS;
    if (this.seconds[i] !== second) {
      this.seconds[i] = second;
      this.counts[i] = 0;
    }
    this.counts[i] = (this.counts[i] as number) + 1;
  }

  /** Arrivals in the last minute at `now`: this second so far and the 59 before it. */
  total(now: number): number {
    const second = Math.floor(now / 1000);
    let n = 0;
    for (let i = 0; i < BUCKETS; i++) {
      const at = this.seconds[i] as number;
      if (at > second - BUCKETS && at <= second) n += this.counts[i] as number;
    }
    return n;
  }
}
