// One endpoint's KV-event streams: a ZMQ SUB socket per data-parallel rank (each rank publishes on its own URL with its
// own sequence), feeding the index. PUB/SUB loses messages (at the publisher's high-water mark, and everything sent
// before we joined), and a lost BlockRemoved would leave the index claiming blocks the engine no longer has, so the
// sequence numbers are watched: a gap is filled from the engine's replay socket (ROUTER) when it has one and can, and
// otherwise that rank's blocks are dropped and rebuilt from the live stream. Reconnects are zeromq's own.
//
// Joining: once the SUB socket first connects, the engine's replay socket is asked for everything it still buffers
// (from seq 0), so that a router started after the engines cached prompts knows of them before they are stored again.
// Live messages queue meanwhile; those the replay already applied (the same seq, the same payload) are skipped, and a
// seq going back to a payload the replay did not have is a restart, as ever.
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import type { Dealer, Subscriber } from 'zeromq';
import { lazyModule } from '../util/lazy-module.js';
import type { Logger } from '../util/log.js';
import { DEFAULT_DECODE_LIMITS, type DecodeLimits, decodeBatch, type MalformedReason, MALFORMED_REASONS } from './decode.js';
import type { KvApplyTally, KvIndex } from './kv-index.js';

const zeromq = lazyModule<typeof import('zeromq')>('zeromq');

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

/**
 * How far back the replay asked when this router joined a rank's stream reached: what the index knows of the blocks
 * the engine stored before the router subscribed.
 */
export interface KvJoinReplay {
  /** ms since the epoch when it ended */
  readonly at: number;
  /** the first and last seq applied from it; undefined when the engine had nothing buffered */
  readonly firstSeq: number | undefined;
  readonly lastSeq: number | undefined;
  /** batches applied from it (firstSeq .. lastSeq) */
  readonly batches: number;
  /** blocks this rank's index held after it */
  readonly blocks: number;
  /**
   * The index holds what the engine stored since its publisher started: the replay reached seq 0 (or the engine had
   * published nothing) and ended. false when the engine's buffer had already dropped older batches (their blocks may
   * still be cached there, unknown to this router until stored again) or when the replay failed.
   */
  readonly complete: boolean;
  /** why it failed or fell short; undefined when it reached back to seq 0 and ended */
  readonly error: string | undefined;
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
  /** the replay asked when joining the stream; undefined without a replay socket, or until one ended */
  readonly joinReplay: KvJoinReplay | undefined;
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
  /**
   * How long a replay may wait for the engine's next message (2 s) before it counts as failed; a whole replay may take
   * REPLAY_TIMEOUTS times as long (a join replays up to vLLM's 10,000 buffered batches).
   */
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
/** a whole replay may take this many replay time-outs */
const REPLAY_TIMEOUTS = 15;
/**
 * Payload fingerprints a join replay keeps (its last batches), to tell the live copies of its batches, queued while it
 * ran, from a restarted engine's batches of the same seqs.
 */
const MAX_REPLAYED = 16_384;

/** The fingerprints of a run of replayed batches, seqs first .. first + fps.length - 1. */
interface ReplayedTail {
  readonly first: number;
  readonly fps: Float64Array;
}
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
  /** resolves when the SUB socket first connects, or when the stream closes */
  private readonly firstConnect: Promise<void>;
  private onFirstConnect: () => void = () => {};
  private lastSeq: number | undefined;
  /** what the join replay applied last, until the live stream passes it */
  private replayed: ReplayedTail | undefined;
  private joinReplay: KvJoinReplay | undefined;
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
    this.firstConnect = new Promise((resolve) => {
      this.onFirstConnect = resolve;
    });
    this.sub = new (zeromq().Subscriber)({
      linger: 0,
      receiveHighWaterMark: opts.receiveHighWaterMark ?? 10_000,
      // zeromq disconnects a peer that sends a bigger frame, before we ever buffer it
      maxMessageSize: this.limits.maxPayloadBytes + 1024,
    });
    this.sub.events.on('connect', () => {
      this.connected = true;
      this.onFirstConnect();
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
      joinReplay: this.joinReplay,
    };
  }

  async close(): Promise<void> {
    // closing the sockets ends the receive loop (and a replay's receive); then nothing of this stream runs
    this.onFirstConnect();
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
    if (this.replayUrl !== undefined) {
      // the engine is reachable once its publisher is: then ask what it still buffers (live messages queue meanwhile)
      await this.firstConnect;
      if (this.owner.isClosed) return;
      await this.replay(0, undefined, true);
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
    if (this.replayed !== undefined) {
      // the live copy of a batch the join replay applied (queued while it ran): already in the index
      const { first, fps } = this.replayed;
      if (seq >= first && seq - first < fps.length && fps[seq - first] === fingerprint(payload)) return;
      // past the replay's last batch, or a payload it did not have (a restart, below): the overlap is over
      this.replayed = undefined;
    }
    if (this.lastSeq !== undefined && seq <= this.lastSeq) {
      // the publisher started over: the engine restarted (its cache is empty) or its publisher was recreated
      c.restarts++;
      this.owner.own.restarts++;
      this.owner.note('restart', 'info', { rank: this.rank, seq, last: this.lastSeq }, 'kv events: sequence restarted, the rank cleared');
      this.opts.index.clearEndpoint(this.owner.endpointId, this.rank);
      this.lastSeq = undefined;
    }
    // no batch applied yet (the join replay had none, or failed before any): a gap is the late join, no loss of ours
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
   * hand) in order; `upTo` undefined (joining, before any live message): every batch it has. Batches the engine no
   * longer buffers cannot be replayed: what cannot be made whole is dropped. A join keeps what it applied even when it
   * fails part way (a later gap asks again from there) and says how far back it reached (joinReplay).
   */
  private async replay(from: number, upTo: number | undefined, joining: boolean): Promise<void> {
    const c = this.opts.counters;
    c.replays++;
    this.owner.own.replays++;
    const timeoutMs = this.opts.replayTimeoutMs ?? 2000;
    const deadline = this.now() + timeoutMs * REPLAY_TIMEOUTS;
    const dealer = new (zeromq().Dealer)({
      linger: 0,
      sendTimeout: timeoutMs,
      receiveTimeout: timeoutMs,
      // the engine's ROUTER drops what its peer's pipe cannot take (vLLM sends a whole buffer in one loop): room for it
      receiveHighWaterMark: 0,
      maxMessageSize: this.limits.maxPayloadBytes + 1024,
    });
    this.dealer = dealer;
    // joining: the fingerprints of the run of batches applied, contiguous from `first`
    const tracked: number[] | undefined = upTo === undefined ? [] : undefined;
    let next = from;
    /** the first seq of the run of batches the index holds from this replay */
    let first: number | undefined;
    let batches = 0;
    let failed: string | undefined;
    let ended = false;
    let rebuilt = false;
    try {
      dealer.connect(this.replayUrl as string);
      await dealer.send(['', u64(from)]);
      for (;;) {
        const left = deadline - this.now();
        if (left <= 0) throw new Error(`no end of replay within ${timeoutMs * REPLAY_TIMEOUTS} ms`);
        dealer.receiveTimeout = Math.min(left, timeoutMs);
        const frames = await dealer.receive();
        if (this.owner.isClosed) return;
        const seqFrame = frames[1];
        if (frames.length !== 3 || frames[0]?.length !== 0 || !seqFrame || seqFrame.length !== 8) {
          this.owner.malformed('frames', `replay answer of ${frames.length} frames`);
          continue;
        }
        const s = seqFrame.readBigInt64BE(0);
        if (s === END_OF_REPLAY) {
          ended = true;
          break;
        }
        const seq = Number(s);
        // the live copy of upTo is in hand, and later ones wait in the SUB socket; an earlier one was applied
        if ((upTo !== undefined && seq >= upTo) || seq < next) continue;
        if (seq > next) {
          // the engine's buffer no longer reaches back to `next`: start over from what it has
          failed ??= `replay from ${next} began at ${seq}`;
          this.rebuild(failed, joining || rebuilt);
          rebuilt = true;
          // what the index holds from this replay starts here
          first = seq;
          batches = 0;
          if (tracked) tracked.length = 0;
        }
        first ??= seq;
        const payload = frames[2] as Buffer;
        this.apply(seq, payload);
        tracked?.push(fingerprint(payload));
        batches++;
        next = seq + 1;
        await this.pause();
        if (this.owner.isClosed) return;
      }
    } catch (err) {
      if (this.owner.isClosed) return;
      const e = err as { code?: string; message?: string };
      const error =
        e.code === 'EAGAIN' ? `replay from ${from} timed out after ${timeoutMs} ms` : `replay from ${from}: ${e.message ?? String(err)}`;
      failed = failed === undefined || upTo === undefined ? error : failed;
      this.owner.error(err, `replay from ${this.replayUrl}`);
    } finally {
      dealer.close();
      if (this.dealer === dealer) this.dealer = undefined;
    }
    if (upTo === undefined) {
      this.joined(first, next, batches, ended, failed, tracked);
      return;
    }
    if (next < upTo) {
      // batches between what was replayed and the live message are missing for good
      failed ??= `replay from ${from} ended at ${next}, before ${upTo}`;
      this.rebuild(failed, joining || rebuilt);
    }
    if (failed !== undefined && !joining) c.replayFailures++;
    // the replay at the first live message of a late join: how far back it reached
    if (joining && from === 0) this.joinReplay = this.joinStatus(first, next, batches, first === 0 && next >= upTo, failed);
  }

  /** The join replay ended (or failed): its status, and the fingerprints that tell its batches' live copies apart. */
  private joined(
    first: number | undefined,
    next: number,
    batches: number,
    ended: boolean,
    failed: string | undefined,
    tracked: number[] | undefined,
  ): void {
    // an error of its own (no answer in time, a socket error) is a failed replay; a buffer that began later is not
    if (!ended) this.opts.counters.replayFailures++;
    const complete = ended && (first === 0 || batches === 0);
    this.joinReplay = this.joinStatus(first, next, batches, complete, failed);
    if (tracked !== undefined && tracked.length > 0) {
      const keep = tracked.slice(-MAX_REPLAYED);
      this.replayed = { first: next - keep.length, fps: Float64Array.from(keep) };
    }
    if (!complete)
      this.opts.log.info(
        { endpoint: this.owner.endpointId, rank: this.rank, firstSeq: first, batches, why: failed },
        'kv events: the replay at join did not reach back to seq 0: blocks the engine cached before it are unknown until stored again',
      );
  }

  private joinStatus(first: number | undefined, next: number, batches: number, complete: boolean, error: string | undefined): KvJoinReplay {
    return {
      at: this.now(),
      firstSeq: first,
      lastSeq: batches > 0 ? next - 1 : undefined,
      batches,
      blocks: this.opts.index.blocks(this.owner.endpointId, this.rank),
      complete,
      error,
    };
  }
}

/**
 * A cheap fingerprint of a batch's payload: its length and its first 48 and last 16 bytes (the engine's timestamp is
 * among the first). A live copy of a replayed batch has the very bytes; a restarted engine's batch of the same seq
 * has another timestamp.
 */
function fingerprint(payload: Uint8Array): number {
  let h = 0x811c9dc5;
  const n = payload.length;
  const head = Math.min(n, 48);
  for (let i = 0; i < head; i++) h = Math.imul(h ^ (payload[i] as number), 0x01000193);
  for (let i = Math.max(head, n - 16); i < n; i++) h = Math.imul(h ^ (payload[i] as number), 0x01000193);
  return (n % 0x200000) * 0x1_0000_0000 + (h >>> 0);
}

function u64(n: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(BigInt(n));
  return b;
}
