// Token ids from Hugging Face tokenizer directories, computed off the event loop: in one worker thread per router
// process (tokenize-worker.ts), which holds the loaded tokenizers and their caches (local-tokenizers.ts). This side
// sends a prompt's fields and gets its ids back (their buffer transferred, not copied), and bounds every job:
//  - a job not answered by its deadline (`timeoutMs`) falls back with `timeout`; the worker itself stops it at its next
//    pause (between slices of a long prompt) or skips it if it has not started;
//  - a step of the worker that cannot pause (one template render, one run of text without a special token) and has run
//    longer than `busyMs`: the jobs waiting behind it fall back at once with `tokenizer-busy`, and new ones too, instead
//    of waiting for their deadlines;
//  - a step still running `restartMs` on (a template that loops, a pathological text): the worker is terminated and a
//    new one started, which loads the same directories again; their caches are lost (counted in `restarts`); while a
//    directory loads again its jobs fall back at once with `tokenizer-busy`.
// Nothing here fails a request: a prompt it cannot tokenize comes back as a fallback reason.
import { Worker } from 'node:worker_threads';
import type { LocalStats } from './local-tokenizers.js';
import type { TextPrompt, TokenizeFallback, TokenizeOutcome } from './prompt-fields.js';
import { ABANDON_BEFORE, BUSY_SINCE, clock, type FromWorker, SHARED_SLOTS, type ToWorker, type WorkerSetup } from './worker-protocol.js';

export interface InProcessOptions {
  /** bytes each tokenizer's piece cache and rendered-chat cache may hold */
  readonly cacheBytes: number;
  /** characters tokenized between two pauses of a job (default 8 Ki; about 2-5 ms of work) */
  readonly sliceChars?: number;
  /** a job's deadline (default 1 s) */
  readonly timeoutMs?: number;
  /** a step running longer: jobs fall back at once instead of waiting (default 100 ms: a slice is 2-5 ms of work, but a busy machine deschedules the thread for tens of ms; a request behind a stuck step waits this long at most) */
  readonly busyMs?: number;
  /** a step running longer: the worker is restarted (default timeoutMs + 1 s) */
  readonly restartMs?: number;
  /** characters a rendered chat may have (default 512 Ki) */
  readonly maxChars?: number;
  /** called when the worker was restarted or cannot run, with why (a line for the log) */
  readonly onTrouble?: (why: string) => void;
}

/** A job sent and not answered yet. */
interface Pending {
  readonly resolve: (outcome: TokenizeOutcome) => void;
  readonly timer: NodeJS.Timeout;
}

/** A directory in the current worker: loading (the waiters get its result), loaded, or not loadable. */
interface DirState {
  ok: boolean | undefined;
  readonly waiters: ((ok: boolean) => void)[];
}

/**
 * The worker's entry: the compiled module, or under tsx (tests) the TypeScript source with tsx registered first. Its
 * heap is bounded, so that a template that renders without end fails the worker (which is then restarted), not the
 * process: the tokenizer itself (Qwen3's: about 50 MB of heap) and its two caches well within.
 */
function startWorker(setup: WorkerSetup): Worker {
  const resourceLimits = { maxOldGenerationSizeMb: Math.max(1024, Math.ceil((4 * setup.cacheBytes) / 2 ** 20) + 512) };
  const here = import.meta.url;
  if (!here.endsWith('.ts')) return new Worker(new URL('./tokenize-worker.js', here), { workerData: setup, resourceLimits });
  const entry = new URL('./tokenize-worker.ts', here).href;
  const tsx = import.meta.resolve('tsx/esm/api');
  const boot = `import(${JSON.stringify(tsx)}).then((m) => { m.register(); return import(${JSON.stringify(entry)}); });`;
  return new Worker(boot, { eval: true, workerData: setup, resourceLimits });
}

/** The in-process tokenizers of this router process; see the file's header. */
export class InProcessTokenizers {
  private worker: Worker | undefined;
  private shared = new Float64Array(new SharedArrayBuffer(SHARED_SLOTS * 8));
  private readonly dirs = new Map<string, DirState>();
  /** directories loaded in an earlier worker: while one loads again, its jobs do not wait */
  private readonly reloading = new Set<string>();
  private readonly pending = new Map<number, Pending>();
  private readonly statsWaiters = new Map<number, (stats: LocalStats | undefined) => void>();
  private nextId = 1;
  private watch: NodeJS.Timeout | undefined;
  private restartCount = 0;
  private closed = false;
  /** why the worker cannot run here (it died before it said anything): every job falls back with tokenizer-error */
  private broken: string | undefined;
  private readonly sliceChars: number;
  private readonly timeoutMs: number;
  private readonly busyMs: number;
  private readonly restartMs: number;
  private readonly maxChars: number;

  constructor(private readonly opts: InProcessOptions) {
    this.sliceChars = opts.sliceChars ?? 8192;
    this.timeoutMs = opts.timeoutMs ?? 1000;
    this.busyMs = opts.busyMs ?? 100;
    this.restartMs = opts.restartMs ?? this.timeoutMs + 1000;
    this.maxChars = opts.maxChars ?? 512 * 1024;
  }

  /** Times the worker was restarted (a step past restartMs, or the thread died). */
  get restarts(): number {
    return this.restartCount;
  }

  /** Loads a directory ahead of its first use; false when it does not load (it is not tried again). */
  preload(dir: string): Promise<boolean> {
    const state = this.dir(dir);
    if (state.ok !== undefined) return Promise.resolve(state.ok);
    return new Promise<boolean>((resolve) => state.waiters.push(resolve));
  }

  /** What a loaded directory's caches hold (for stats and tests); undefined when it is not loaded. */
  stats(dir: string): Promise<LocalStats | undefined> {
    if (this.dirs.get(dir)?.ok !== true) return Promise.resolve(undefined);
    const id = this.nextId++;
    return new Promise((resolve) => {
      this.statsWaiters.set(id, resolve);
      this.post({ type: 'stats', id, dir });
    });
  }

  /** The prompt's ids, or why not, within `timeoutMs`. */
  tokenize(dir: string, p: TextPrompt): Promise<TokenizeOutcome> {
    if (this.closed || this.broken !== undefined) return Promise.resolve({ fallback: 'tokenizer-error' });
    const state = this.dir(dir);
    if (state.ok === false) return Promise.resolve({ fallback: 'tokenizer-error' });
    if ((state.ok === undefined && this.reloading.has(dir)) || this.busyFor() > this.busyMs)
      return Promise.resolve({ fallback: 'tokenizer-busy' });
    const id = this.nextId++;
    const sentAt = clock();
    return new Promise<TokenizeOutcome>((resolve) => {
      const timer = setTimeout(() => this.answer(id, { fallback: 'timeout' }), this.timeoutMs);
      timer.unref();
      this.pending.set(id, { resolve, timer });
      this.post({ type: 'job', id, dir, prompt: p, sentAt, deadline: sentAt + this.timeoutMs, maxChars: this.maxChars });
      this.watchBusy();
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    this.stopWatch();
    this.giveUp('tokenizer-error');
    const w = this.worker;
    this.worker = undefined;
    if (w) await w.terminate();
  }

  /** How long the worker has been in its current step (0: between steps). */
  private busyFor(): number {
    const since = this.shared[BUSY_SINCE] as number;
    return since > 0 ? clock() - since : 0;
  }

  /** The directory's state in the current worker, its load asked for on first use. */
  private dir(dir: string): DirState {
    let state = this.dirs.get(dir);
    if (!state) {
      // no worker can run here: nothing loads
      state = { ok: this.broken === undefined ? undefined : false, waiters: [] };
      this.dirs.set(dir, state);
      this.post({ type: 'load', dir });
    }
    return state;
  }

  private post(message: ToWorker): void {
    if (this.closed || this.broken !== undefined) return;
    if (!this.worker) this.worker = this.spawn();
    this.worker.postMessage(message);
  }

  private spawn(): Worker {
    const w = startWorker({
      cacheBytes: this.opts.cacheBytes,
      sliceChars: this.sliceChars,
      shared: this.shared.buffer as SharedArrayBuffer,
    });
    // the worker never keeps the process alive; the jobs' own timers do not either
    w.unref();
    let heard = false;
    let failure = '';
    w.on('message', (m: FromWorker) => {
      heard = true;
      // a worker being terminated may still have something in flight: only the current one is heard
      if (this.worker === w) this.onMessage(m);
    });
    w.on('error', (err: Error) => {
      failure = `: ${err.message}`;
    });
    w.on('exit', () => {
      if (this.worker !== w || this.closed) return;
      // one that dies before it says anything would die again: no loop of restarts
      if (heard) this.restart(`the tokenizer worker exited${failure}`);
      else this.fail(`the tokenizer worker did not start${failure}`);
    });
    return w;
  }

  private onMessage(m: FromWorker): void {
    switch (m.type) {
      case 'loaded': {
        const state = this.dirs.get(m.dir);
        this.reloading.delete(m.dir);
        if (!state) return;
        state.ok = m.ok;
        for (const w of state.waiters.splice(0)) w(m.ok);
        return;
      }
      case 'done':
        this.answer(m.id, m.outcome);
        return;
      case 'stats': {
        const w = this.statsWaiters.get(m.id);
        this.statsWaiters.delete(m.id);
        w?.(m.stats);
        return;
      }
    }
  }

  private answer(id: number, outcome: TokenizeOutcome): void {
    const p = this.pending.get(id);
    if (!p) return;
    this.pending.delete(id);
    clearTimeout(p.timer);
    p.resolve(outcome);
  }

  /** Every job not answered yet falls back with `reason`; the worker skips those it has not started. */
  private giveUp(reason: TokenizeFallback): void {
    this.shared[ABANDON_BEFORE] = clock();
    for (const id of [...this.pending.keys()]) this.answer(id, { fallback: reason });
  }

  /** While jobs wait: a step past busyMs gives them up, one past restartMs restarts the worker. */
  private watchBusy(): void {
    if (this.watch !== undefined) return;
    this.watch = setInterval(
      () => {
        const busy = this.busyFor();
        if (busy > this.restartMs) this.restart(`one step of a job ran ${Math.round(busy)} ms`);
        else if (busy > this.busyMs) this.giveUp('tokenizer-busy');
        if (this.pending.size === 0 && busy === 0) this.stopWatch();
      },
      Math.max(5, Math.min(10, this.busyMs / 4)),
    );
    this.watch.unref();
  }

  private stopWatch(): void {
    if (this.watch === undefined) return;
    clearInterval(this.watch);
    this.watch = undefined;
  }

  /** No worker can run: every directory is said not to load, every job falls back with tokenizer-error. */
  private fail(why: string): void {
    this.broken = why;
    this.worker = undefined;
    this.giveUp('tokenizer-error');
    this.stopWatch();
    for (const state of this.dirs.values()) {
      state.ok = false;
      for (const w of state.waiters.splice(0)) w(false);
    }
    for (const w of this.statsWaiters.values()) w(undefined);
    this.statsWaiters.clear();
    this.opts.onTrouble?.(why);
  }

  /** A new worker in place of the current one; it loads the same directories again. */
  private restart(why: string): void {
    const old = this.worker;
    this.worker = undefined;
    this.restartCount++;
    this.giveUp('tokenizer-busy');
    this.stopWatch();
    // a fresh shared state: the old worker may still write to its own until it is gone
    this.shared = new Float64Array(new SharedArrayBuffer(SHARED_SLOTS * 8));
    void old?.terminate();
    const dirs = [...this.dirs.entries()];
    this.dirs.clear();
    for (const [dir, state] of dirs) {
      // a directory that did not load is not tried again
      if (state.ok === false) {
        this.dirs.set(dir, state);
        continue;
      }
      if (state.ok === true) this.reloading.add(dir);
      const again = this.dir(dir);
      again.waiters.push(...state.waiters);
    }
    for (const w of this.statsWaiters.values()) w(undefined);
    this.statsWaiters.clear();
    this.opts.onTrouble?.(why);
  }
}
