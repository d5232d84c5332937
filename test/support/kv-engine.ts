// A stand-in for an engine's KV-event sockets, as vLLM's ZmqEventPublisher has them: a PUB socket sending
// [topic, seq (8 bytes BE), payload] and a ROUTER answering replays from a bounded buffer of its last batches. The
// PUB is an XPublisher so a test can wait until the router's subscription has arrived (PUB drops what it sends before
// that), and it can skip a seq (a batch lost on the way) or start over from 0 (an engine restart). Payloads are
// encoded by msgpackr, independently of the decoder under test.
import { Packr } from 'msgpackr';
import { Router, XPublisher } from 'zeromq';

/** msgpackr set to write what msgspec writes: plain arrays and maps, bigints as uint64/int64, no records. */
export const packr = new Packr({ useRecords: false, largeBigIntToFloat: false, int64AsType: 'bigint', variableMapSize: true });

export function pack(value: unknown): Buffer {
  return packr.pack(value);
}

export interface BlockStoredSpec {
  readonly hashes: readonly (bigint | number | Uint8Array)[];
  readonly parent?: bigint | number | Uint8Array | null;
  readonly tokens: readonly number[];
  readonly blockSize: number;
  readonly loraName?: string | null;
  readonly medium?: string | null;
}

/** vLLM <= 0.26: positional arrays. */
export function storedPositional(e: BlockStoredSpec): unknown[] {
  return ['BlockStored', e.hashes, e.parent ?? null, e.tokens, e.blockSize, null, e.medium ?? 'GPU', e.loraName ?? null];
}

/** Newer vLLM: maps tagged by type. */
export function storedTagged(e: BlockStoredSpec): Record<string, unknown> {
  return {
    type: 'BlockStored',
    block_hashes: e.hashes,
    parent_block_hash: e.parent ?? null,
    token_ids: e.tokens,
    block_size: e.blockSize,
    lora_id: null,
    medium: e.medium ?? 'GPU',
    lora_name: e.loraName ?? null,
  };
}

export function batch(events: unknown[], ts = 1_700_000_000.5, rank: number | null = 0): Buffer {
  return pack([ts, events, rank]);
}

export class FakeKvEngine {
  /** seq of the next batch */
  seq = 0;
  private readonly buffer: [number, Buffer][] = [];
  private readonly served: Promise<void>;
  private subscriptions = 0;
  private readonly subscribers: (() => void)[] = [];
  private readonly watch: Promise<void>;
  replaysAsked: number[] = [];

  private constructor(
    private readonly pub: XPublisher,
    private readonly router: Router | undefined,
    readonly eventsUrl: string,
    readonly replayUrl: string | undefined,
    private readonly bufferSize: number,
    private readonly replayDelayMs: number,
  ) {
    this.served = router ? this.serveReplays(router) : Promise.resolve();
    this.watch = this.watchSubscriptions();
  }

  /** `replayDelayMs`: a replay is answered that long after it is asked (from the buffer as it is then) */
  static async start(opts: { replay?: boolean; bufferSize?: number; replayDelayMs?: number } = {}): Promise<FakeKvEngine> {
    const pub = new XPublisher({ linger: 0, sendHighWaterMark: 100_000 });
    await pub.bind('tcp://127.0.0.1:*');
    let router: Router | undefined;
    if (opts.replay !== false) {
      router = new Router({ linger: 0 });
      await router.bind('tcp://127.0.0.1:*');
    }
    return new FakeKvEngine(
      pub,
      router,
      pub.lastEndpoint as string,
      router?.lastEndpoint ?? undefined,
      opts.bufferSize ?? 10_000,
      opts.replayDelayMs ?? 0,
    );
  }

  /** Resolves once a subscription has reached the publisher (from then on nothing sent is dropped as "too early"). */
  subscribed(): Promise<void> {
    if (this.subscriptions > 0) return Promise.resolve();
    return new Promise((resolve) => this.subscribers.push(resolve));
  }

  /** Publishes one batch with the next seq; `drop` keeps it in the replay buffer but never sends it (lost on the way). */
  async publish(payload: Buffer, opts: { drop?: boolean; topic?: string } = {}): Promise<number> {
    const seq = this.seq++;
    this.buffer.push([seq, payload]);
    if (this.buffer.length > this.bufferSize) this.buffer.shift();
    if (!opts.drop) await this.pub.send([opts.topic ?? '', u64(seq), payload]);
    return seq;
  }

  /** Sends raw frames as they are (hostile tests). */
  async raw(frames: (Buffer | string)[]): Promise<void> {
    await this.pub.send(frames);
  }

  /** The engine restarted: its sequence and its buffer start over. */
  restart(): void {
    this.seq = 0;
    this.buffer.length = 0;
  }

  async close(): Promise<void> {
    this.pub.close();
    this.router?.close();
    await Promise.all([this.served, this.watch]);
  }

  private async watchSubscriptions(): Promise<void> {
    try {
      for await (const [msg] of this.pub) {
        if (msg?.[0] === 1) {
          this.subscriptions++;
          for (const r of this.subscribers.splice(0)) r();
        }
      }
    } catch {
      // closed
    }
  }

  private async serveReplays(router: Router): Promise<void> {
    try {
      for await (const [id, empty, start] of router) {
        if (!id || !empty || !start || start.length !== 8) continue;
        const from = Number(start.readBigUInt64BE(0));
        this.replaysAsked.push(from);
        if (this.replayDelayMs > 0) await new Promise((resolve) => setTimeout(resolve, this.replayDelayMs));
        for (const [seq, payload] of this.buffer) if (seq >= from) await router.send([id, '', u64(seq), payload]);
        const end = Buffer.alloc(8);
        end.writeBigInt64BE(-1n);
        await router.send([id, '', end, '']);
      }
    } catch {
      // closed
    }
  }
}

export function u64(n: number | bigint): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(BigInt(n));
  return b;
}
