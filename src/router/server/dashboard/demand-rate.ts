// Requests per minute per model, from successive samples of the instance's arrival counters (GET /demand's
// `arrivals`, summed over every worker), over the last minute.
import type { DemandSnapshot } from '../../scaling/demand-snapshot.js';

const WINDOW_MS = 60_000;
/** a rate over less than this would be noise */
const MIN_SPAN_MS = 2_000;

interface Sample {
  readonly at: number;
  readonly arrivals: ReadonlyMap<string, number>;
}

export class DemandRate {
  private samples: Sample[] = [];

  add(snapshot: DemandSnapshot): void {
    const arrivals = new Map(Object.entries(snapshot.models).map(([m, d]) => [m, d.arrivals]));
    this.samples.push({ at: snapshot.at, arrivals });
    const oldest = snapshot.at - WINDOW_MS;
    // keep one sample at or before the window's start, so that the rate covers the whole minute
    while (this.samples.length > 2 && (this.samples[1] as Sample).at <= oldest) this.samples.shift();
  }

  /** Requests per minute over the samples' span; null until they span MIN_SPAN_MS. */
  perMinute(model: string): number | null {
    const first = this.samples[0];
    const last = this.samples.at(-1);
    if (!first || !last || last.at - first.at < MIN_SPAN_MS) return null;
    // a model with no count in the first sample was declared since: it started at 0
    const delta = (last.arrivals.get(model) ?? 0) - (first.arrivals.get(model) ?? 0);
    return Math.max(0, (delta * 60_000) / (last.at - first.at));
  }
}
