// One endpoint's KV-event streams: a ZMQ SUB socket per data-parallel rank (each rank publishes on its own URL with its
// own sequence), feeding the index. PUB/SUB loses messages (at the publisher's high-water mark, and everything sent
// before we joined), and a lost BlockRemoved would leave the index claiming blocks the engine no longer has, so the
// sequence numbers are watched: a gap is filled from the engine's replay socket (ROUTER) when it has one and can, and
// otherwise that rank's blocks are dropped and rebuilt from the live stream. Reconnects are zeromq's own.
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import { Dealer, Subscriber } from 'zeromq';
import type { Logger } from '../util/log.js';
import { DEFAULT_DECODE_LIMITS, type DecodeLimits, decodeBatch, type MalformedReason, MALFORMED_REASONS } from './decode.js';
import type { KvApplyTally, KvIndex } from './kv-index.js';

/** What the router subscribes to for one endpoint: its ranks' event URLs and, index for index, their replay URLs. */
export interface KvSource {
  readonly endpointId: string;
  readonly eventsUrls: readonly string[];
  readonly replayUrls: readonly (string | undefined)[];
  /** blocks kept per rank: the engine's num_gpu_blocks when known (the index keeps at most its maximum) */
  readonly capacity?: number;
  /** the engine's block size when it declares one (vllm:cache_config_info): its events of another size are dropped */
  readonly blockSize?: number;
}

/** Totals over every endpoint since start (an endpoint leaving does not take its counts with it). */
export interface KvCounters extends KvApplyTally {
  /** batches applied */
  batches: number;
  /** sequence gaps seen on a stream already running */
  gaps: number;
  /** replays asked of an engine (gaps and late joins) */
  replays: number;
  /** replays that could not fill their gap (too old for the engine's buffer, timed out, refused) */
  replayFailures: number;
  /** a rank's blocks dropped to rebuild from the live stream, after a gap that could not be filled */
  rebuilds: number;
  /** sequences that went back (the engine restarted): the rank's blocks were dropped */
  restarts: number;
  malformed: Record<MalformedReason, number>;
}

export function newCounters(): KvCounters {
  const malformed = Object.fromEntries(MALFORMED_REASONS.map((r) => [r, 0])) as Record<MalformedReason, number>;
  return {
    stored: 0,
    removed: 0,
    cleared: 0,
    blocksStored: 0,
    blocksRemoved: 0,
    unchainable: 0,
    evicted: 0,
    otherGroup: 0,
    batches: 0,
    gaps: 0,
    replays: 0,
    replayFailures: 0,
    rebuilds: 0,
    restarts: 0,
    malformed,
  };
}

export interface KvRankStatus {
  readonly url: string;
  readonly replayUrl: string | undefined;
  /** the SUB socket's connection is up (zeromq's connect/disconnect events) */
  readonly connected: boolean;
  readonly lastSeq: number | undefined;
  /** the data-parallel rank the engine's batches name */
  readonly dpRank: number | undefined;
  readonly lastEventAt: number | undefined;
}

/** For the operator (GET /engines): is the endpoint's cache being followed, and how well. */
export interface KvEndpointStatus {
  readonly endpointId: string;
  /** every rank's stream is connected */
  readonly connected: boolean;
  readonly ranks: readonly KvRankStatus[];
  readonly gaps: number;
  readonly replays: number;
  readonly rebuilds: number;
  readonly restarts: number;
  readonly malformed: number;
  readonly blocks: number;
  /** ms since the epoch of the last batch applied, any rank */
  readonly lastEventAt: number | undefined;
  readonly lastError: string | undefined;
}

export interface KvSubscriberOptions {
  readonly index: KvIndex;
  readonly log: Logger;
  /** the shared totals this subscriber adds to */
  readonly counters: KvCounters;
  /** ZMQ topic prefix subscribed to; '' (the default) takes every topic */
  readonly topic?: string;
  /** how long a replay may take before the gap counts as unfillable (2 s) */
  readonly replayTimeoutMs?: number;
  /**
   * Live messages zeromq holds for us while a replay runs (the SUB socket is not read meanwhile): 10,000, a few
   * seconds of a busy engine. Past it zeromq drops, which the next sequence number shows as a new gap.
   */
  readonly receiveHighWaterMark?: number;
  readonly limits?: DecodeLimits;
  readonly now?: () => number;
}

const END_OF_REPLAY = -1n;
/** Work done in one turn of the event loop before we let requests run: a flood must not starve the router. */
const SLICE_MS = 5;
/** restarts, rebuilds and stream errors are logged at most this often per endpoint and kind */
const NOTE_EVERY_MS = 60_000;

export class KvSubscriber {
  private readonly ranks: RankStream[];
  private readonly logged = new Set<MalformedReason>();
  private readonly lastNoted = new Map<string, number>();
  private closed = false;
  /** this endpoint's share of the counters, for its status */
  readonly own = { gaps: 0, replays: 0, rebuilds: 0, restarts: 0, malformed: 0 };
  lastError: string | undefined;

  constructor(
    /** the source subscribed to; its capacity may be updated in place (the URLs never are) */
    public source: KvSource,
    private readonly opts: KvSubscriberOptions,
  ) {
    this.ranks = source.eventsUrls.map((url, rank) => new RankStream(this, opts, rank, url, source.replayUrls[rank]));
  }

  get endpointId(): string {
    return this.source.endpointId;
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** Unsubscribes, closes every socket, and resolves when nothing of this subscriber runs any more. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.all(this.ranks.map((r) => r.close()));
  }

  status(): KvEndpointStatus {
    const ranks = this.ranks.map((r) => r.status());
    let lastEventAt: number | undefined;
    for (const r of ranks)
      if (r.lastEventAt !== undefined && (lastEventAt === undefined || r.lastEventAt > lastEventAt)) lastEventAt = r.lastEventAt;
    return {
      endpointId: this.endpointId,
      connected: ranks.length > 0 && ranks.every((r) => r.connected),
      ranks,
      ...this.own,
      blocks: this.opts.index.blocks(this.endpointId),
      lastEventAt,
      lastError: this.lastError,
    };
  }

  /** Counts a malformed part; logs the first of each reason for this endpoint, so a hostile stream cannot flood logs. */
  malformed(reason: MalformedReason, detail: string): void {
    this.opts.counters.malformed[reason]++;
    this.own.malformed++;
    if (this.logged.has(reason)) return;
    this.logged.add(reason);
    this.opts.log.warn({ endpoint: this.endpointId, reason, detail }, 'kv events: malformed message (logged once per reason)');
  }

  error(err: unknown, what: string): void {
    const message = `${what}: ${err instanceof Error ? err.message : String(err)}`;
    if (message !== this.lastError) this.note('error', 'warn', { err: message }, 'kv events: stream error');
    this.lastError = message;
  }

  /**
   * Logs an occurrence of `kind` (a restart, a rebuild, an error) at most once a minute per endpoint: a publisher that
   * sends seqs going back and forth, or a replay socket that fails every time, must not flood the log; the counters
   * and the status carry every occurrence.
   */
  note(kind: 'restart' | 'rebuild' | 'error', level: 'info' | 'warn', fields: Record<string, unknown>, msg: string): void {
    const now = (this.opts.now ?? Date.now)();
    const last = this.lastNoted.get(kind);
    if (last !== undefined && now - last < NOTE_EVERY_MS) return;
    this.lastNoted.set(kind, now);
    this.opts.log[level]({ endpoint: this.endpointId, ...fields }, msg);
  }
}

class RankStream {
  private readonly sub: Subscriber;
  private dealer: Dealer | undefined;
  private readonly loop: Promise<void>;
  private connected = false;
  private lastSeq: number | undefined;
  private dpRank: number | undefined;
  private lastEventAt: number | undefined;
  /** when the current turn of work began (see pause) */
  private slice = 0;
  private readonly now: () => number;
  private readonly limits: DecodeLimits;
  private readonly onMalformed: (reason: MalformedReason, detail: string) => void;

  constructor(
    private readonly owner: KvSubscriber,
    private readonly opts: KvSubscriberOptions,
    private readonly rank: number,
    private readonly url: string,
    private readonly replayUrl: string | undefined,
  ) {
    this.now = opts.now ?? Date.now;
    this.limits = opts.limits ?? DEFAULT_DECODE_LIMITS;
    this.onMalformed = (reason, detail) => owner.malformed(reason, detail);
    this.sub = new Subscriber({
      linger: 0,
      receiveHighWaterMark: opts.receiveHighWaterMark ?? 10_000,
      // zeromq disconnects a peer that sends a bigger frame, before we ever buffer it
      maxMessageSize: this.limits.maxPayloadBytes + 1024,
    });
    this.sub.events.on('connect', () => {
      this.connected = true;
    });
    this.sub.events.on('disconnect', () => {
      this.connected = false;
    });
    this.loop = this.run();
  }

  status(): KvRankStatus {
    return {
      url: this.url,
      replayUrl: this.replayUrl,
      connected: this.connected,
      lastSeq: this.lastSeq,
      dpRank: this.dpRank,
      lastEventAt: this.lastEventAt,
    };
  }

  async close(): Promise<void> {
    // closing the sockets ends the receive loop (and a replay's receive); then nothing of this stream runs
    this.dealer?.close();
    this.sub.close();
    await this.loop;
  }

  private async run(): Promise<void> {
    try {
      this.sub.connect(this.url);
      const topic = this.opts.topic ?? '';
      if (topic === '') this.sub.subscribe();
      else this.sub.subscribe(topic);
    } catch (err) {
      this.owner.error(err, `subscribing to ${this.url}`);
      this.sub.close();
      return;
    }
    try {
      for await (const frames of this.sub) {
        if (this.owner.isClosed) break;
        try {
          await this.onMessage(frames);
        } catch (err) {
          // a bug of ours must not stop the stream; the message is lost, which the next seq check does not see, so
          // drop what this rank's index holds rather than trust it
          this.owner.error(err, 'applying a batch');
          this.opts.index.clearEndpoint(this.owner.endpointId, this.rank);
        }
        await this.pause();
      }
    } catch (err) {
      if (!this.owner.isClosed) this.owner.error(err, `receiving from ${this.url}`);
    }
  }

  /**
   * Messages already queued resolve receive() at once, so a flood (or a long replay) would run as one chain of
   * microtasks and starve every request; after SLICE_MS of work the loop lets the event loop turn.
   */
  private async pause(): Promise<void> {
    if (this.now() - this.slice < SLICE_MS) return;
    await yieldToEventLoop();
    this.slice = this.now();
  }

  private async onMessage(frames: Buffer[]): Promise<void> {
    const seqFrame = frames[1];
    const payload = frames[2];
    if (frames.length !== 3 || !seqFrame || seqFrame.length !== 8 || !payload) {
      this.owner.malformed('frames', `${frames.length} frames, seq frame of ${seqFrame?.length ?? 0} bytes`);
      return;
    }
    const seq = Number(seqFrame.readBigUInt64BE(0));
    const c = this.opts.counters;
    if (this.lastSeq !== undefined && seq <= this.lastSeq) {
      // the publisher started over: the engine restarted (its cache is empty) or its publisher was recreated
      c.restarts++;
      this.owner.own.restarts++;
      this.owner.note('restart', 'info', { rank: this.rank, seq, last: this.lastSeq }, 'kv events: sequence restarted, the rank cleared');
      this.opts.index.clearEndpoint(this.owner.endpointId, this.rank);
      this.lastSeq = undefined;
    }
    const joining = this.lastSeq === undefined;
    const expected = this.lastSeq === undefined ? 0 : this.lastSeq + 1;
    if (seq > expected) {
      // joining late (slow joiner, or the engine ran before us) is no loss of ours; a gap in a running stream is
      if (!joining) {
        c.gaps++;
        this.owner.own.gaps++;
      }
      if (this.replayUrl !== undefined) await this.replay(expected, seq, joining);
      else if (!joining) this.rebuild(`seq ${seq} after ${expected - 1}, no replay socket`);
      if (this.owner.isClosed) return;
    }
    this.apply(seq, payload);
  }

  private apply(seq: number, payload: Uint8Array): void {
    const batch = decodeBatch(payload, this.onMalformed, this.limits);
    this.lastSeq = seq;
    this.lastEventAt = this.now();
    // an undecodable batch is lost for good (a replay would return the same bytes): counted, and the stream goes on
    if (!batch) return;
    this.dpRank = batch.dpRank;
    this.opts.counters.batches++;
    this.opts.index.apply(this.owner.endpointId, this.rank, batch, this.opts.counters, this.onMalformed);
  }

  /** This rank's blocks can no longer be trusted: drop them; the live stream rebuilds them from here. */
  private rebuild(why: string, uncounted = false): void {
    this.opts.index.clearEndpoint(this.owner.endpointId, this.rank);
    // joining late there was nothing to rebuild; a second clear in one replay is the same rebuild
    if (uncounted) return;
    this.opts.counters.rebuilds++;
    this.owner.own.rebuilds++;
    this.owner.note('rebuild', 'info', { rank: this.rank, why }, 'kv events: dropped the blocks of a rank to rebuild them');
  }

  /**
   * Asks the engine's replay socket for every batch from `from` and applies those before `upTo` (the live message in
   * hand) in order. Batches the engine no longer buffers cannot be replayed: what cannot be made whole is dropped.
   */
  private async replay(from: number, upTo: number, joining: boolean): Promise<void> {
    const c = this.opts.counters;
    c.replays++;
    this.owner.own.replays++;
    const timeoutMs = this.opts.replayTimeoutMs ?? 2000;
    const deadline = this.now() + timeoutMs;
    const dealer = new Dealer({
      linger: 0,
      sendTimeout: timeoutMs,
      receiveTimeout: timeoutMs,
      maxMessageSize: this.limits.maxPayloadBytes + 1024,
    });
    this.dealer = dealer;
    let next = from;
    let failed: string | undefined;
    let rebuilt = false;
    try {
      dealer.connect(this.replayUrl as string);
      await dealer.send(['', u64(from)]);
      for (;;) {
        const left = deadline - this.now();
        if (left <= 0) throw new Error(`no end of replay within ${timeoutMs} ms`);
        dealer.receiveTimeout = left;
        const frames = await dealer.receive();
        if (this.owner.isClosed) return;
        const seqFrame = frames[1];
        if (frames.length !== 3 || frames[0]?.length !== 0 || !seqFrame || seqFrame.length !== 8) {
          this.owner.malformed('frames', `replay answer of ${frames.length} frames`);
          continue;
        }
        const s = seqFrame.readBigInt64BE(0);
        if (s === END_OF_REPLAY) break;
        const seq = Number(s);
        // the live copy of upTo is in hand, and later ones wait in the SUB socket; an earlier one was applied
        if (seq >= upTo || seq < next) continue;
        if (seq > next) {
          // the engine's buffer no longer reaches back to `next`: start over from what it has
          failed ??= `replay from ${next} began at ${seq}`;
          this.rebuild(failed, joining || rebuilt);
          rebuilt = true;
        }
        this.apply(seq, frames[2] as Buffer);
        next = seq + 1;
        await this.pause();
        if (this.owner.isClosed) return;
      }
    } catch (err) {
      if (this.owner.isClosed) return;
      const e = err as { code?: string; message?: string };
      failed ??=
        e.code === 'EAGAIN' ? `replay from ${from} timed out after ${timeoutMs} ms` : `replay from ${from}: ${e.message ?? String(err)}`;
      this.owner.error(err, `replay from ${this.replayUrl}`);
    } finally {
      dealer.close();
      if (this.dealer === dealer) this.dealer = undefined;
    }
    if (next < upTo) {
      // batches between what was replayed and the live message are missing for good
      failed ??= `replay from ${from} ended at ${next}, before ${upTo}`;
      this.rebuild(failed, joining || rebuilt);
    }
    if (failed !== undefined && !joining) c.replayFailures++;
  }
}

function u64(n: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(BigInt(n));
  return b;
}
