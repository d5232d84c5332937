// Tracks which discovery sources have completed their first full sync; the router is not ready before all have.
export class SyncTracker {
  private readonly pending = new Set<string>();

  register(source: string): void {
    this.pending.add(source);
  }

  synced(source: string): void {
    this.pending.delete(source);
  }

  pendingSources(): readonly string[] {
    return [...this.pending];
  }
}
