// Follows a file that may be rewritten while the process runs: its text is read when the file system says the file or
// its directory changed (a Kubernetes ConfigMap update swaps the directory's `..data` symlink and never writes the
// file itself; an editor renames a new file over the old one), a short quiet time after the last event so that a
// write in several steps is read whole, and again every `intervalMs` whatever happened (events can be missed: a
// network file system, a watch that could not be set). The reader compares texts; this only reads.
import { type FSWatcher, watch } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';

export interface FileWatchOptions {
  readonly path: string;
  /** read at least this often */
  readonly intervalMs: number;
  /** after a file-system event, the quiet time before the read (default 100 ms) */
  readonly settleMs?: number;
  /** the file's text, each time it is read (the same text again too) */
  readonly onText: (text: string) => void;
  /** the file could not be read */
  readonly onError: (err: Error) => void;
}

export class FileWatch {
  private readonly watchers = new Map<string, FSWatcher>();
  private interval: NodeJS.Timeout | undefined;
  private settle: NodeJS.Timeout | undefined;
  private reading = false;
  /** an event arrived during a read: read once more after it */
  private again = false;
  private stopped = false;

  constructor(private readonly opts: FileWatchOptions) {}

  /** Watches from now on, and reads the file once at once (it may have changed since its reader last read it). */
  start(): void {
    this.watchFile();
    this.watchPath('dir', path.dirname(this.opts.path));
    this.interval = setInterval(() => void this.read(), this.opts.intervalMs);
    this.interval.unref();
    void this.read();
  }

  stop(): void {
    this.stopped = true;
    clearInterval(this.interval);
    clearTimeout(this.settle);
    for (const w of this.watchers.values()) w.close();
    this.watchers.clear();
  }

  /** The file itself: its watch follows the inode, so after a rename over it the watch is set again on the new one. */
  private watchFile(): void {
    this.watchers.get('file')?.close();
    this.watchers.delete('file');
    this.watchPath('file', this.opts.path);
  }

  private watchPath(key: string, target: string): void {
    try {
      const w = watch(target, { persistent: false }, () => this.changed());
      // a watched file removed or a watch that fails: the directory's watch and the interval still see the file
      w.on('error', () => {
        w.close();
        if (this.watchers.get(key) === w) this.watchers.delete(key);
      });
      this.watchers.set(key, w);
    } catch {
      // the file is not there now (or cannot be watched): the directory's watch and the interval still see it
    }
  }

  private changed(): void {
    if (this.stopped) return;
    clearTimeout(this.settle);
    this.settle = setTimeout(() => {
      this.watchFile();
      void this.read();
    }, this.opts.settleMs ?? 100);
    this.settle.unref();
  }

  private async read(): Promise<void> {
    if (this.stopped) return;
    if (this.reading) {
      this.again = true;
      return;
    }
    this.reading = true;
    try {
      const text = await readFile(this.opts.path, 'utf8');
      if (!this.stopped) this.opts.onText(text);
    } catch (err) {
      if (!this.stopped) this.opts.onError(err instanceof Error ? err : new Error(String(err)));
    } finally {
      this.reading = false;
    }
    if (this.again) {
      this.again = false;
      await this.read();
    }
  }
}
