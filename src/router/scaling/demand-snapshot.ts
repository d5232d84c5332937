// Demand as one router process saw it, in a form that can cross process and pod boundaries (GET /demand, cluster IPC),
// and the pure arithmetic that sums such snapshots into the demand of the whole system: every worker of every replica.
import { z } from 'zod';

/** One model's demand in one snapshot. Times are epoch ms on the clock of the process that took the snapshot. */
export interface ModelDemandSnapshot {
  /** requests waiting in the cold-start queue now */
  readonly held: number;
  /** requests being forwarded to an engine now */
  readonly inFlight: number;
  /** requests that arrived since the process started (a counter) */
  readonly arrivals: number;
  /** requests that arrived in the last minute (60 one-second buckets); absent from routers that predate it */
  readonly lastMinute?: number;
  readonly lastArrivalAt: number | null;
  readonly lastEndAt: number | null;
  /** the last time a held request gave up waiting (demand happened, even though nothing was served) */
  readonly lastHoldTimeoutAt: number | null;
  /** when the oldest request held now arrived; absent from routers that predate it */
  readonly oldestHeldAt?: number | null;
  /** requests waiting in flow control (--flow-control) for a saturated pool; absent from routers that predate it */
  readonly queued?: number;
}

export interface DemandSnapshot {
  /** the router instance (a pod: every worker of it shares the id); a peer that is this instance is not counted twice */
  readonly instance: string;
  /** when the snapshot was taken, on the taker's clock: ages are computed against it, so clocks need not agree */
  readonly at: number;
  /** router processes summed into it */
  readonly workers: number;
  readonly models: Readonly<Record<string, ModelDemandSnapshot>>;
  /**
   * the instance is shutting down: its held requests are being answered and it takes no new ones. Peers count it
   * until it holds nothing and has nothing in flight, then drop it at once (not after the grace period). Absent from
   * routers that predate it.
   */
  readonly stopping?: boolean;
}

/** A snapshot and when this process received it (on this process's clock). */
export interface ReceivedSnapshot {
  readonly snapshot: DemandSnapshot;
  readonly receivedAt: number;
}

/** A model's demand summed over every snapshot that counts. */
export interface ModelTotals {
  readonly held: number;
  readonly inFlight: number;
  /** waiting in flow control for a saturated pool */
  readonly queued: number;
  readonly arrivals: number;
  /** ms since the most recent arrival, end or hold timeout anywhere; undefined when there was none */
  readonly sinceActivityMs: number | undefined;
}

export const EMPTY_MODEL_DEMAND: ModelDemandSnapshot = {
  held: 0,
  inFlight: 0,
  arrivals: 0,
  lastMinute: 0,
  lastArrivalAt: null,
  lastEndAt: null,
  lastHoldTimeoutAt: null,
  oldestHeldAt: null,
  queued: 0,
};

const count = z.number().int().nonnegative();
const time = z.number().finite().nullable();
const modelSchema = z.object({
  held: count,
  inFlight: count,
  arrivals: count,
  lastMinute: count.optional(),
  lastArrivalAt: time,
  lastEndAt: time,
  lastHoldTimeoutAt: time,
  oldestHeldAt: time.optional(),
  queued: count.optional(),
});
const snapshotSchema = z.object({
  instance: z.string().min(1).max(200),
  at: z.number().finite(),
  workers: z.number().int().positive(),
  models: z.record(z.string().min(1).max(512), modelSchema),
  stopping: z.boolean().optional(),
});

/** Reads a snapshot another process sent (a peer's /demand): anything malformed is refused, never half-counted. */
export function parseSnapshot(value: unknown): DemandSnapshot | undefined {
  const r = snapshotSchema.safeParse(value);
  return r.success ? r.data : undefined;
}

const later = (a: number | null, b: number | null): number | null => (a === null ? b : b === null ? a : Math.max(a, b));
const earlier = (a: number | null, b: number | null): number | null => (a === null ? b : b === null ? a : Math.min(a, b));

/** Sums the snapshots of the workers of one instance (one machine, one clock) into the instance's snapshot. */
export function mergeWorkers(instance: string, at: number, snapshots: readonly DemandSnapshot[]): DemandSnapshot {
  const models: Record<string, ModelDemandSnapshot> = {};
  let workers = 0;
  for (const s of snapshots) {
    workers += s.workers;
    for (const [model, d] of Object.entries(s.models)) {
      const m = models[model] ?? EMPTY_MODEL_DEMAND;
      models[model] = {
        held: m.held + d.held,
        inFlight: m.inFlight + d.inFlight,
        arrivals: m.arrivals + d.arrivals,
        lastMinute: (m.lastMinute ?? 0) + (d.lastMinute ?? 0),
        lastArrivalAt: later(m.lastArrivalAt, d.lastArrivalAt),
        lastEndAt: later(m.lastEndAt, d.lastEndAt),
        lastHoldTimeoutAt: later(m.lastHoldTimeoutAt, d.lastHoldTimeoutAt),
        oldestHeldAt: earlier(m.oldestHeldAt ?? null, d.oldestHeldAt ?? null),
        queued: (m.queued ?? 0) + (d.queued ?? 0),
      };
    }
  }
  return { instance, at, workers, models };
}

/**
 * A snapshot's counters without its gauges: what a process that is gone (or has not answered for the grace period)
 * still contributes, so that arrivals never go backwards while its held and in-flight requests stop counting (and its
 * last minute's arrivals, which would not age, do too).
 */
export function countersOnly(s: DemandSnapshot): DemandSnapshot {
  const models: Record<string, ModelDemandSnapshot> = {};
  for (const [model, d] of Object.entries(s.models))
    models[model] = { ...d, held: 0, inFlight: 0, oldestHeldAt: null, queued: 0, lastMinute: 0 };
  return { instance: s.instance, at: s.at, workers: s.workers, models };
}

/** Held, queued and in flight over every model: what a stopping instance must answer before it stops counting. */
export function pending(s: DemandSnapshot): number {
  let n = 0;
  for (const d of Object.values(s.models)) n += d.held + d.inFlight + (d.queued ?? 0);
  return n;
}

/** Snapshots received within `maxAgeMs`: an instance that stopped answering counts with what it last said until then. */
export function withinAge(received: readonly ReceivedSnapshot[], now: number, maxAgeMs: number): ReceivedSnapshot[] {
  return received.filter((r) => now - r.receivedAt <= maxAgeMs);
}

/** Sums snapshots of different instances; activity ages are taken on each sender's own clock. */
export function systemTotals(received: readonly ReceivedSnapshot[], now: number): Map<string, ModelTotals> {
  const totals = new Map<string, ModelTotals>();
  for (const { snapshot: s, receivedAt } of received) {
    const carried = Math.max(0, now - receivedAt);
    for (const [model, d] of Object.entries(s.models)) {
      const last = later(later(d.lastArrivalAt, d.lastEndAt), d.lastHoldTimeoutAt);
      const since = last === null ? undefined : Math.max(0, s.at - last) + carried;
      const t = totals.get(model);
      totals.set(model, {
        held: (t?.held ?? 0) + d.held,
        inFlight: (t?.inFlight ?? 0) + d.inFlight,
        queued: (t?.queued ?? 0) + (d.queued ?? 0),
        arrivals: (t?.arrivals ?? 0) + d.arrivals,
        sinceActivityMs:
          t?.sinceActivityMs === undefined ? since : since === undefined ? t.sinceActivityMs : Math.min(t.sinceActivityMs, since),
      });
    }
  }
  return totals;
}

/**
 * Active (for KEDA): a request held, queued or in flight, or one that arrived, ended or timed out within the grace
 * period.
 */
export function isActive(t: ModelTotals | undefined, graceMs: number): boolean {
  if (!t) return false;
  return t.held > 0 || t.inFlight > 0 || t.queued > 0 || (t.sinceActivityMs !== undefined && t.sinceActivityMs < graceMs);
}

/** The scaling metric: requests that need an engine now (held for one to start, queued for room on one, or running). */
export function load(t: ModelTotals | undefined): number {
  return t ? t.held + t.inFlight + t.queued : 0;
}
