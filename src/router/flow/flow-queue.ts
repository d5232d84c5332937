// The requests one model's pool holds back while it is saturated: a band per priority (strict: a higher band leaves
// first), within a band a queue per flow (tenant) taken in turn (round robin, so a tenant with ten times the requests
// gets no more turns than one with a few), within a flow first come, first served. Pure: the controller
// (controller.ts) decides when and what leaves; this only keeps the order and the counts.

/** A request waiting in a flow queue. */
export interface Waiting {
  readonly tenant: string;
  readonly priority: number;
  /** its body's bytes (counted against the caps) */
  readonly bytes: number;
  /** ms on the controller's clock */
  readonly enqueuedAt: number;
  readonly deadline: number;
  /** set once it left the queue (dispatched, timed out, its client gone): skipped where it still stands */
  gone: boolean;
}

class Flow<W extends Waiting> {
  private readonly items: W[] = [];
  private head = 0;
  /** it stands in its band's turn order */
  inTurn = false;

  constructor(readonly tenant: string) {}

  push(w: W): void {
    this.items.push(w);
  }

  /** The first that has not left, removed; undefined when none is left. */
  shift(): W | undefined {
    while (this.head < this.items.length) {
      const w = this.items[this.head++] as W;
      if (!w.gone) {
        this.compact();
        return w;
      }
    }
    this.compact();
    return undefined;
  }

  /** Every one still waiting, oldest first (for expiry). */
  *waiting(): Iterable<W> {
    for (let i = this.head; i < this.items.length; i++) {
      const w = this.items[i] as W;
      if (!w.gone) yield w;
    }
  }

  get empty(): boolean {
    for (let i = this.head; i < this.items.length; i++) if (!(this.items[i] as W).gone) return false;
    return true;
  }

  private compact(): void {
    if (this.head > 64 && this.head * 2 > this.items.length) {
      this.items.splice(0, this.head);
      this.head = 0;
    }
  }
}

class Band<W extends Waiting> {
  readonly flows = new Map<string, Flow<W>>();
  /** the flows with requests, in turn order */
  private readonly turn: Flow<W>[] = [];
  private next = 0;
  count = 0;
  bytes = 0;

  constructor(readonly priority: number) {}

  push(w: W): void {
    let f = this.flows.get(w.tenant);
    if (f === undefined) {
      f = new Flow<W>(w.tenant);
      this.flows.set(w.tenant, f);
    }
    if (!f.inTurn) {
      f.inTurn = true;
      this.turn.push(f);
    }
    f.push(w);
    this.count++;
    this.bytes += w.bytes;
  }

  /** The next request by turn among its flows; undefined when none waits. */
  take(): W | undefined {
    while (this.turn.length > 0) {
      if (this.next >= this.turn.length) this.next = 0;
      const f = this.turn[this.next] as Flow<W>;
      const w = f.shift();
      if (f.empty) {
        // its turn is over for good: the next flow takes this index
        this.turn.splice(this.next, 1);
        f.inTurn = false;
        this.flows.delete(f.tenant);
      } else this.next++;
      if (w !== undefined) {
        this.left(w);
        return w;
      }
    }
    return undefined;
  }

  /** Counts a request that left other than by take() (timed out, its client gone); it is skipped where it stands. */
  left(w: W): void {
    this.count--;
    this.bytes -= w.bytes;
  }

  /** Drops flows whose requests have all left (kept in turn order otherwise). */
  prune(): void {
    for (let i = this.turn.length - 1; i >= 0; i--) {
      const f = this.turn[i] as Flow<W>;
      if (f.empty) {
        this.turn.splice(i, 1);
        f.inTurn = false;
        this.flows.delete(f.tenant);
        if (i < this.next) this.next--;
      }
    }
  }
}

/** One model's waiting requests; see the file's header. */
export class FlowQueue<W extends Waiting> {
  /** highest priority first */
  private readonly bands: Band<W>[] = [];
  count = 0;
  bytes = 0;

  band(priority: number): { readonly count: number; readonly bytes: number } | undefined {
    return this.bands.find((b) => b.priority === priority);
  }

  /** Each band with requests: priority, count, bytes, flows (for the metrics and the operator's view). */
  bandsNow(): Array<{ priority: number; count: number; bytes: number; flows: number }> {
    return this.bands
      .filter((b) => b.count > 0)
      .map((b) => ({ priority: b.priority, count: b.count, bytes: b.bytes, flows: b.flows.size }));
  }

  push(w: W): void {
    let b = this.bands.find((x) => x.priority === w.priority);
    if (b === undefined) {
      b = new Band<W>(w.priority);
      let i = 0;
      while (i < this.bands.length && (this.bands[i] as Band<W>).priority > w.priority) i++;
      this.bands.splice(i, 0, b);
    }
    b.push(w);
    this.count++;
    this.bytes += w.bytes;
  }

  /** The request to leave next: the highest band's next flow's oldest. */
  take(): W | undefined {
    for (const b of this.bands) {
      const w = b.take();
      if (w !== undefined) {
        this.count--;
        this.bytes -= w.bytes;
        w.gone = true;
        return w;
      }
    }
    return undefined;
  }

  /** Takes out a request that leaves before its turn (its client gone); false when it had already left. */
  remove(w: W): boolean {
    if (w.gone) return false;
    w.gone = true;
    const b = this.bands.find((x) => x.priority === w.priority);
    b?.left(w);
    this.count--;
    this.bytes -= w.bytes;
    return true;
  }

  /** Takes out every request whose deadline is at or before `now`, and returns them. */
  expire(now: number): W[] {
    const out: W[] = [];
    for (const b of this.bands) {
      if (b.count === 0) continue;
      for (const f of b.flows.values()) for (const w of f.waiting()) if (w.deadline <= now) out.push(w);
    }
    for (const w of out) this.remove(w);
    if (out.length > 0) for (const b of this.bands) b.prune();
    return out;
  }

  /** Takes out every request (shutdown). */
  drain(): W[] {
    const out: W[] = [];
    for (;;) {
      const w = this.take();
      if (w === undefined) return out;
      out.push(w);
    }
  }
}
