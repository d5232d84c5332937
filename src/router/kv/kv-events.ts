// The KV-events side of the router as one object: given the desired set of endpoints that publish KV events, it keeps
// one subscriber per endpoint, the index they feed, and the counters and per-endpoint status the operator reads.
// Level-triggered like the catalog: reconcile() takes the whole present set each time, so calling it again with the
// same set changes nothing, and an endpoint that leaves takes its blocks with it. Metrics, flags and the app read
// the getters here; this layer knows none of them.
import type { Logger } from '../util/log.js';
import type { DecodeLimits } from './decode.js';
import { KvIndex } from './kv-index.js';
import { type KvCounters, type KvEndpointStatus, type KvSource, KvSubscriber, newCounters } from './subscriber.js';
import type { KvIndexView } from './types.js';

export interface KvEventsOptions {
  readonly log: Logger;
  /** blocks kept per engine at most, whatever its source's capacity (kv-index.ts: DEFAULT_CAPACITY) */
  readonly maxCapacity?: number;
  /** ZMQ topic prefix; '' takes all */
  readonly topic?: string;
  readonly replayTimeoutMs?: number;
  readonly receiveHighWaterMark?: number;
  readonly limits?: DecodeLimits;
  readonly now?: () => number;
}

export class KvEvents {
  private readonly idx: KvIndex;
  private readonly subs = new Map<string, KvSubscriber>();
  /** subscribers being closed, so that close() waits for them too */
  private readonly closing = new Set<Promise<void>>();
  private readonly totals: KvCounters = newCounters();
  private closed = false;

  constructor(private readonly opts: KvEventsOptions) {
    this.idx = new KvIndex(opts.maxCapacity === undefined ? {} : { maxCapacity: opts.maxCapacity });
  }

  /** What the routing policy reads. */
  get index(): KvIndexView {
    return this.idx;
  }

  /** The index itself, for a caller that also tells it block sizes (vllm:cache_config_info). */
  get kvIndex(): KvIndex {
    return this.idx;
  }

  /** Makes the subscribed set the given one: new endpoints subscribed, gone ones closed and forgotten, changed URLs resubscribed. */
  reconcile(sources: readonly KvSource[]): void {
    if (this.closed) return;
    const desired = new Map<string, KvSource>();
    for (const s of sources) desired.set(s.endpointId, s);
    for (const [id, sub] of this.subs) {
      const want = desired.get(id);
      if (want && sameStreams(want, sub.source)) continue;
      this.stop(id, sub);
    }
    for (const [id, source] of desired) {
      const running = this.subs.get(id);
      if (running) {
        if (running.source.capacity !== source.capacity) this.idx.setCapacity(id, source.capacity, this.totals);
        if (source.blockSize !== undefined) this.idx.setBlockSize(id, source.blockSize);
        // keep the source with the new capacity, so that the next reconcile compares against it
        running.source = source;
        continue;
      }
      this.idx.setCapacity(id, source.capacity);
      if (source.blockSize !== undefined) this.idx.setBlockSize(id, source.blockSize);
      this.subs.set(
        id,
        new KvSubscriber(source, {
          index: this.idx,
          log: this.opts.log,
          counters: this.totals,
          ...(this.opts.topic === undefined ? {} : { topic: this.opts.topic }),
          ...(this.opts.replayTimeoutMs === undefined ? {} : { replayTimeoutMs: this.opts.replayTimeoutMs }),
          ...(this.opts.receiveHighWaterMark === undefined ? {} : { receiveHighWaterMark: this.opts.receiveHighWaterMark }),
          ...(this.opts.limits === undefined ? {} : { limits: this.opts.limits }),
          ...(this.opts.now === undefined ? {} : { now: this.opts.now }),
        }),
      );
    }
  }

  /** Per endpoint, for GET /engines and the dashboard. */
  status(): KvEndpointStatus[] {
    return [...this.subs.values()].map((s) => s.status());
  }

  statusOf(endpointId: string): KvEndpointStatus | undefined {
    return this.subs.get(endpointId)?.status();
  }

  /** A copy of the totals since start (for metrics read at scrape time). */
  counters(): KvCounters {
    return { ...this.totals, malformed: { ...this.totals.malformed } };
  }

  /** Ends every subscription; resolves when no socket of ours is open. */
  async close(): Promise<void> {
    this.closed = true;
    for (const [id, sub] of this.subs) this.stop(id, sub);
    while (this.closing.size > 0) await Promise.all([...this.closing]);
  }

  private stop(id: string, sub: KvSubscriber): void {
    this.subs.delete(id);
    // the subscriber stops applying at once (close() marks it first); its blocks go now, not when its sockets are done
    const done = sub.close().catch((err) => this.opts.log.warn({ endpoint: id, err: String(err) }, 'kv events: closing a subscriber'));
    this.idx.removeEndpoint(id);
    this.closing.add(done);
    void done.finally(() => this.closing.delete(done));
  }
}

function sameStreams(a: KvSource, b: KvSource): boolean {
  if (a.eventsUrls.length !== b.eventsUrls.length || a.replayUrls.length !== b.replayUrls.length) return false;
  for (let i = 0; i < a.eventsUrls.length; i++) if (a.eventsUrls[i] !== b.eventsUrls[i]) return false;
  for (let i = 0; i < a.replayUrls.length; i++) if (a.replayUrls[i] !== b.replayUrls[i]) return false;
  return true;
}
