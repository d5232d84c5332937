// Tracks which discovery sources have completed their first full sync. Before that, the router is not ready, and
// a model it does not know yet may simply not have been listed: such requests wait for the sync instead of a 404.
export class SyncTracker {
  private readonly pending = new Set<string>();
  private waiters: (() => void)[] = [];

  register(source: string): void {
    this.pending.add(source);
  }

  synced(source: string): void {
    this.pending.delete(source);
    if (this.pending.size === 0) {
      const waiters = this.waiters;
      this.waiters = [];
      for (const w of waiters) w();
    }
  }

  pendingSources(): readonly string[] {
    return [...this.pending];
  }

  get complete(): boolean {
    return this.pending.size === 0;
  }

  /**
   * Resolves true once every source has synced, false if that takes longer than `timeoutMs` or once `cancelled`
   * settles (the waiting client left: its waiter and timer go at once).
   */
  whenSynced(timeoutMs: number, cancelled?: Promise<unknown>): Promise<boolean> {
    if (this.pending.size === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        resolve(true);
      };
      const giveUp = (): void => {
        clearTimeout(timer);
        this.waiters = this.waiters.filter((w) => w !== done);
        resolve(false);
      };
      const timer = setTimeout(giveUp, timeoutMs);
      this.waiters.push(done);
      void cancelled?.then(giveUp);
    });
  }
}
