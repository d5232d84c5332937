// KV-cache events on the wire as vLLM publishes them (vllm/distributed/kv_events.py, ZmqEventPublisher): a ZMQ PUB
// socket sends each batch as three frames (topic, seq as 8 bytes big-endian from 0, msgpack payload); a ROUTER socket
// replays the last `bufferSteps` batches to a client that sends [start_seq] (8 bytes big-endian): every buffered batch
// with seq >= start as [seq, payload], then [-1 as signed 8 bytes, ""]. Payloads are msgspec's encodings of
// KVEventBatch: `array` (vLLM <= 0.26, array_like structs) or `map` (newer, tagged maps); block hashes as uint64 (`int`,
// VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES) or the raw 32 bytes (`bytes`). The events of one engine step go out as one batch.
// Fault switches: drop the next N batches (sent to no subscriber, as a PUB high-water-mark drop loses them, yet
// buffered for replay) and restart (the sequence from 0 and an empty buffer, as a new engine process has).
import { bracketHost } from '../../router/util/host.js';
import type { Encoder } from '@msgpack/msgpack';
import type { Router } from 'zeromq';
import { lazyModule } from '../../router/util/lazy-module.js';
import { hashAsInt, type EngineBlockHash, type KvCacheEvent } from './kv-cache.js';
import type { KvEventEncoding, KvEventHashKind, SimKvEventsOptions, SimKvEventsStatus } from './types.js';

const msgpack = lazyModule<typeof import('@msgpack/msgpack')>('@msgpack/msgpack');
const zeromq = lazyModule<typeof import('zeromq')>('zeromq');

const END_SEQ = Buffer.from([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
const MEDIUM_GPU = 'GPU';

function seqBytes(seq: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(BigInt(seq));
  return b;
}

/** ZMQ binds an address, not a name; `*` for every interface. */
function bindHost(host: string): string {
  if (host === 'localhost') return '127.0.0.1';
  if (host === '' || host === '0.0.0.0') return '0.0.0.0';
  if (host === '::') return '*';
  return bracketHost(host);
}

function portOf(endpoint: string | null): number {
  return Number(/:(\d+)$/.exec(endpoint ?? '')?.[1] ?? 0);
}

/** One batch in msgspec's encoding of vLLM's KVEventBatch. */
export function encodeBatch(
  encoder: Encoder,
  ts: number,
  events: readonly KvCacheEvent[],
  encoding: KvEventEncoding,
  hashes: KvEventHashKind,
): Uint8Array {
  const hash = (h: EngineBlockHash): number | bigint | Uint8Array => {
    if (hashes === 'bytes') return h;
    const v = hashAsInt(h);
    // msgspec writes an int in its shortest form: as a JS number below 2^32, a bigint (uint64) above
    return v < 0x100000000n ? Number(v) : v;
  };
  const wire = events.map((e) => {
    if (e.type === 'BlockStored') {
      const fields = {
        block_hashes: e.blockHashes.map(hash),
        parent_block_hash: e.parentBlockHash === null ? null : hash(e.parentBlockHash),
        token_ids: e.tokenIds,
        block_size: e.blockSize,
        lora_id: e.loraId,
        medium: MEDIUM_GPU,
        lora_name: e.loraName,
      };
      return encoding === 'map' ? { type: e.type, ...fields } : [e.type, ...Object.values(fields)];
    }
    if (e.type === 'BlockRemoved') {
      const blockHashes = e.blockHashes.map(hash);
      return encoding === 'map' ? { type: e.type, block_hashes: blockHashes, medium: MEDIUM_GPU } : [e.type, blockHashes, MEDIUM_GPU];
    }
    return encoding === 'map' ? { type: e.type } : [e.type];
  });
  // ts is a float on the wire: msgpack would write a whole number as an int
  const seconds = Number.isInteger(ts) ? ts + 1e-6 : ts;
  const batch = encoding === 'map' ? { ts: seconds, events: wire, data_parallel_rank: 0 } : [seconds, wire, 0];
  return encoder.encode(batch);
}

export class KvEventPublisher {
  private readonly pub = new (zeromq().Publisher)({ sendHighWaterMark: 100_000, linger: 0 });
  private readonly replay: Router | undefined;
  private readonly encoder = new (msgpack().Encoder)({ useBigInt64: true });
  private readonly topic: Buffer;
  private pending: KvCacheEvent[] = [];
  private flushTimer: NodeJS.Immediate | undefined;
  private nextSeq = 0;
  private published = 0;
  // [seq, payload], oldest first, from index `head`
  private buffer: Array<[number, Uint8Array]> = [];
  private head = 0;
  private dropping = 0;
  private dropped = 0;
  private restarts = 0;
  private sending: Promise<void> = Promise.resolve();
  private closed = false;
  private endpoint = '';
  private replayEndpoint: string | null = null;

  constructor(
    private readonly host: string,
    private readonly options: SimKvEventsOptions,
  ) {
    this.topic = Buffer.from(options.topic, 'utf8');
    if (options.replayPort !== undefined) this.replay = new (zeromq().Router)({ linger: 0 });
    const ipv6 = host.includes(':');
    if (ipv6) {
      this.pub.ipv6 = true;
      if (this.replay) this.replay.ipv6 = true;
    }
  }

  /** Binds both sockets on the engine's host; the actual ports are known after. */
  async start(): Promise<void> {
    const host = bindHost(this.host);
    const at = (port: number): string => `tcp://${host}:${port === 0 ? '*' : port}`;
    await this.pub.bind(at(this.options.port));
    this.endpoint = this.pub.lastEndpoint ?? '';
    if (this.replay) {
      await this.replay.bind(at(this.options.replayPort ?? 0));
      this.replayEndpoint = this.replay.lastEndpoint;
      void this.serveReplay(this.replay);
    }
  }

  get port(): number {
    return portOf(this.endpoint);
  }

  get replayPort(): number | null {
    return this.replayEndpoint === null ? null : portOf(this.replayEndpoint);
  }

  /** Adds a step's events to the batch going out at the end of this turn of the event loop (the engine's step). */
  publish(events: readonly KvCacheEvent[]): void {
    if (this.closed || events.length === 0) return;
    this.pending.push(...events);
    this.flushTimer ??= setImmediate(() => this.flush());
  }

  /** The next `n` batches reach no subscriber (a seq gap), but stay in the replay buffer. */
  dropNext(n: number): void {
    this.dropping += n;
  }

  /** As a new engine process: events not yet sent are lost, the sequence starts at 0 again and the buffer is empty. */
  restart(): void {
    if (this.flushTimer) clearImmediate(this.flushTimer);
    this.flushTimer = undefined;
    this.pending = [];
    this.nextSeq = 0;
    this.published = 0;
    this.buffer = [];
    this.head = 0;
    this.dropping = 0;
    this.restarts++;
  }

  status(): Omit<SimKvEventsStatus, 'blockSize' | 'cachedBlocks' | 'capacityBlocks'> {
    return {
      endpoint: this.endpoint,
      port: this.port,
      replayEndpoint: this.replayEndpoint,
      replayPort: this.replayPort,
      encoding: this.options.encoding,
      hashes: this.options.hashes,
      topic: this.options.topic,
      nextSeq: this.nextSeq,
      buffered: this.buffer.length - this.head,
      published: this.published,
      dropped: this.dropped,
      dropping: this.dropping,
      restarts: this.restarts,
    };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.flushTimer) clearImmediate(this.flushTimer);
    this.flushTimer = undefined;
    await this.sending;
    this.pub.close();
    this.replay?.close();
  }

  private flush(): void {
    this.flushTimer = undefined;
    const events = this.pending;
    this.pending = [];
    if (this.closed || events.length === 0) return;
    const seq = this.nextSeq++;
    this.published++;
    const payload = encodeBatch(this.encoder, Date.now() / 1000, events, this.options.encoding, this.options.hashes);
    this.buffer.push([seq, payload]);
    if (this.buffer.length - this.head > this.options.bufferSteps) this.head++;
    if (this.head >= this.options.bufferSteps) {
      this.buffer = this.buffer.slice(this.head);
      this.head = 0;
    }
    if (this.dropping > 0) {
      this.dropping--;
      this.dropped++;
      return;
    }
    const frames = [this.topic, seqBytes(seq), payload];
    // one send at a time on a zeromq.js socket; PUB never blocks (past the high-water mark it drops)
    this.sending = this.sending
      .then(() => this.pub.send(frames))
      .catch((err: unknown) => {
        if (!this.closed) process.stderr.write(`sim kv-events: send failed: ${(err as Error).message}\n`);
      });
  }

  private async serveReplay(router: Router): Promise<void> {
    try {
      for await (const frames of router) {
        // [identity, "", start_seq]; anything else is ignored, as vLLM does
        if (frames.length !== 3) continue;
        const [client, , start] = frames as [Buffer, Buffer, Buffer];
        const from = start.length > 0 ? BigInt(`0x${start.toString('hex')}`) : 0n;
        const batches = this.buffer.slice(this.head);
        for (const [seq, payload] of batches) {
          if (BigInt(seq) >= from) await router.send([client, '', seqBytes(seq), payload]);
        }
        await router.send([client, '', END_SEQ, '']);
      }
    } catch (err) {
      if (!this.closed) process.stderr.write(`sim kv-events: replay socket failed: ${(err as Error).message}\n`);
    }
  }
}
