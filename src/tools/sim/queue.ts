// Admission to the engine's batch: at most `capacity` sequences run, the rest wait in FIFO order.

export interface SlotLease {
  /** true once the request holds a slot */
  readonly started: boolean;
  /** frees the slot (or leaves the queue if still waiting); safe to call more than once */
  release(): void;
}

export class SlotQueue {
  private runningCount = 0;
  // Map keeps insertion order and deletes in O(1), so a waiter that aborts leaves the queue at once
  private readonly waiters = new Map<number, { start: () => void; lease: Lease }>();
  private nextTicket = 0;

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`capacity must be a whole number >= 1, got ${capacity}`);
  }

  get running(): number {
    return this.runningCount;
  }

  get waiting(): number {
    return this.waiters.size;
  }

  /** Calls start() now if a slot is free, otherwise when the requests ahead have released theirs. */
  admit(start: () => void): SlotLease {
    const ticket = this.nextTicket++;
    const lease = new Lease(this, ticket);
    if (this.runningCount < this.capacity && this.waiters.size === 0) {
      this.runningCount++;
      lease.started = true;
      start();
    } else {
      this.waiters.set(ticket, { start, lease });
    }
    return lease;
  }

  /** @internal called by Lease */
  leave(lease: Lease): void {
    if (lease.started) {
      this.runningCount--;
      this.grant();
    } else {
      this.waiters.delete(lease.ticket);
    }
  }

  private grant(): void {
    while (this.runningCount < this.capacity) {
      const first = this.waiters.entries().next();
      if (first.done) return;
      const [ticket, waiter] = first.value;
      this.waiters.delete(ticket);
      this.runningCount++;
      waiter.lease.started = true;
      waiter.start();
    }
  }
}

class Lease implements SlotLease {
  started = false;
  private released = false;
  constructor(
    private readonly queue: SlotQueue,
    readonly ticket: number,
  ) {}
  release(): void {
    if (this.released) return;
    this.released = true;
    this.queue.leave(this);
  }
}
