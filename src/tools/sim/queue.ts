// Admission to the engine's batch, as vLLM's scheduler does it: a request runs once a batch slot (at most `capacity`
// sequences) and room for its KV cache are both free; the rest wait in FIFO order, and the first in line waits for
// both (no later request overtakes it). The KV pool is `blocks` blocks of `blockSize` tokens; a running sequence holds
// the blocks of its prompt and of the tokens it generated so far. A request is admitted when the blocks it will hold
// at its end fit beside what the running ones will hold at theirs, so a sequence never runs out of room (vLLM admits on
// the prompt's blocks and preempts a sequence when decoding runs out; the simulator reserves instead and never preempts).

/** What a request holds of the KV cache: tokens at its end (its prompt and all it generates), and while it runs. */
export interface KvDemand {
  readonly tokens: number;
  /** tokens held now (its prompt and the tokens generated so far); asked only while it runs */
  held(): number;
}

/** The engine's KV pool: `blocks` blocks (vLLM's num_gpu_blocks) of `blockSize` tokens. */
export interface KvPool {
  readonly blocks: number;
  readonly blockSize: number;
}

export interface SlotLease {
  /** true once the request holds a slot */
  readonly started: boolean;
  /** frees the slot and its blocks (or leaves the queue if still waiting); safe to call more than once */
  release(): void;
}

/** A request that names no KV demand (a test's, a tokenizer-only path's): a slot only. */
const NO_KV: KvDemand = { tokens: 0, held: () => 0 };

export class SlotQueue {
  private runningCount = 0;
  /** blocks the running sequences will hold at their end */
  private reservedBlocks = 0;
  private readonly runningLeases = new Set<Lease>();
  // Map keeps insertion order and deletes in O(1), so a waiter that aborts leaves the queue at once
  private readonly waiters = new Map<number, { start: () => void; lease: Lease }>();
  private nextTicket = 0;

  constructor(
    readonly capacity: number,
    /** unset: room for any number of sequences (only the slots limit the batch) */
    readonly pool: KvPool = { blocks: Number.POSITIVE_INFINITY, blockSize: 16 },
  ) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`capacity must be a whole number >= 1, got ${capacity}`);
    if (!(pool.blocks >= 1)) throw new RangeError(`the KV pool needs at least one block, got ${pool.blocks}`);
    if (!Number.isInteger(pool.blockSize) || pool.blockSize < 1)
      throw new RangeError(`the block size must be a whole number >= 1, got ${pool.blockSize}`);
  }

  get running(): number {
    return this.runningCount;
  }

  get waiting(): number {
    return this.waiters.size;
  }

  /**
   * The share of the pool's blocks the running sequences hold now (vllm:kv_cache_usage_perc): each its prompt's and its
   * generated tokens' blocks, at most 1.
   */
  get kvUsage(): number {
    if (this.runningLeases.size === 0 || !Number.isFinite(this.pool.blocks)) return 0;
    let held = 0;
    for (const lease of this.runningLeases) held += Math.min(lease.blocks, this.blocksOf(lease.demand.held()));
    return Math.min(1, held / this.pool.blocks);
  }

  /** Calls start() now if a slot and the request's blocks are free, otherwise when the requests ahead have released theirs. */
  admit(start: () => void, demand: KvDemand = NO_KV): SlotLease {
    const ticket = this.nextTicket++;
    // a request longer than the whole pool runs alone, as it would fill it
    const lease = new Lease(this, ticket, demand, Math.min(this.pool.blocks, this.blocksOf(demand.tokens)));
    if (this.waiters.size === 0 && this.fits(lease)) this.run(lease, start);
    else this.waiters.set(ticket, { start, lease });
    return lease;
  }

  /** @internal called by Lease */
  leave(lease: Lease): void {
    if (lease.started) {
      this.runningCount--;
      this.reservedBlocks -= lease.blocks;
      this.runningLeases.delete(lease);
      this.grant();
    } else {
      this.waiters.delete(lease.ticket);
      // the first in line leaving may let the next one in
      this.grant();
    }
  }

  private blocksOf(tokens: number): number {
    return Math.ceil(Math.max(0, tokens) / this.pool.blockSize);
  }

  private fits(lease: Lease): boolean {
    return this.runningCount < this.capacity && this.reservedBlocks + lease.blocks <= this.pool.blocks;
  }

  private run(lease: Lease, start: () => void): void {
    this.runningCount++;
    this.reservedBlocks += lease.blocks;
    this.runningLeases.add(lease);
    lease.started = true;
    start();
  }

  private grant(): void {
    for (;;) {
      const first = this.waiters.entries().next();
      if (first.done) return;
      const [ticket, waiter] = first.value;
      if (!this.fits(waiter.lease)) return;
      this.waiters.delete(ticket);
      this.run(waiter.lease, waiter.start);
    }
  }
}

class Lease implements SlotLease {
  started = false;
  private released = false;
  constructor(
    private readonly queue: SlotQueue,
    readonly ticket: number,
    readonly demand: KvDemand,
    /** blocks reserved for it: those it holds at its end */
    readonly blocks: number,
  ) {}
  release(): void {
    if (this.released) return;
    this.released = true;
    this.queue.leave(this);
  }
}
