// A supervised informer for one kind: a local store of the objects that match, fed by a client-node informer
// (list + watch), replaced wholesale by every full list.
//
// Why the supervision: client-node 1.4's informer re-watches by itself only after a clean close or a 410; any other
// error (a dropped connection, a failed list, 403) is emitted once and the informer stops for good. So after an error
// the reflector starts it again, after a backoff with jitter (replicas that lost the API server together do not come
// back in step). A restarted informer re-watches from its last resourceVersion: the API server replays what was
// missed, or answers 410 and the informer re-lists by itself, so no event is lost and no periodic full re-list is
// needed. The periodic resync (--k8s-resync-seconds) only restarts the watch from its resourceVersion, which guards
// against a watch connection that died silently without costing the API server a list.
import type { Informer, KubeConfig, KubernetesListObject, KubernetesObject } from '@kubernetes/client-node';
import { kubernetesClient } from './client.js';
import { realClock, type Clock, type ClockTimer } from '../../util/clock.js';
import type { Logger } from '../../util/log.js';

export type ReflectorHealth = 'syncing' | 'synced' | 'forbidden' | 'absent' | 'erroring';

export interface ReflectorOptions<T extends KubernetesObject> {
  /** resource name for logs and metrics, e.g. "pods" */
  readonly resource: string;
  /** API path for the watch, e.g. /api/v1/namespaces/default/pods */
  readonly path: string;
  readonly list: () => Promise<KubernetesListObject<T>>;
  readonly kubeConfig: KubeConfig;
  readonly labelSelector: string | undefined;
  readonly resyncMs: number;
  /** called (synchronously) after every change of the store */
  readonly onChange: () => void;
  /** called when the first list completed, or the kind is forbidden/absent (it will not block readiness) */
  readonly onSynced: () => void;
  readonly onError?: (resource: string, reason: string) => void;
  readonly log: Logger;
  readonly maxBackoffMs?: number;
  /** shared by the reflectors of one source: one warning per backoff step for all of them (else each logs its own) */
  readonly failures?: FailureLog;
  /** default: the real clock */
  readonly clock?: Clock;
  /** the jitter's randomness; default Math.random */
  readonly random?: () => number;
  /** default: client-node's informer (list + watch) against kubeConfig */
  readonly informer?: (list: () => Promise<KubernetesListObject<T>>) => Informer<T>;
}

const FAILED_MESSAGE = 'kubernetes list/watch failed; watching again from the last resourceVersion after a pause';

/**
 * Failures of several kinds against one API server, logged once per backoff step: when the API server is down, every
 * kind fails on every retry, and a line per kind per retry says nothing more than one line per step.
 */
export class FailureLog {
  private readonly resources = new Set<string>();
  private lastAt = Number.NEGATIVE_INFINITY;
  private quietMs = 0;

  constructor(
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
  ) {}

  report(resource: string, error: string, retryInMs: number): void {
    this.resources.add(resource);
    const now = this.now();
    if (now - this.lastAt < this.quietMs) return;
    this.log.warn({ resources: [...this.resources].sort(), error, retryInMs }, FAILED_MESSAGE);
    this.resources.clear();
    this.lastAt = now;
    this.quietMs = retryInMs;
  }
}

function statusOf(err: unknown): number | undefined {
  const e = err as { code?: unknown; statusCode?: unknown; response?: { statusCode?: unknown } };
  for (const v of [e.code, e.statusCode, e.response?.statusCode]) if (typeof v === 'number') return v;
  return undefined;
}

function key(obj: KubernetesObject): string {
  return `${obj.metadata?.namespace ?? ''}/${obj.metadata?.name ?? ''}`;
}

/** Full jitter over the upper half: a delay in [backoff / 2, backoff]. */
export function jittered(backoffMs: number, random: () => number = Math.random): number {
  return Math.round(backoffMs / 2 + random() * (backoffMs / 2));
}

export class Reflector<T extends KubernetesObject> {
  private store = new Map<string, T>();
  private informer: Informer<T> | undefined;
  private restartTimer: ClockTimer | undefined;
  private resyncTimer: ClockTimer | undefined;
  private backoffMs = 0;
  private stopped = false;
  /** the reflector itself stopped the informer (resync): the AbortError that follows is not a failure */
  private restarting = false;
  /** failures seen so far: a watch that started after the last one means the kind is healthy again */
  private failures = 0;
  private syncedOnce = false;
  private state: ReflectorHealth = 'syncing';

  private readonly clock: Clock;
  private readonly random: () => number;

  constructor(private readonly opts: ReflectorOptions<T>) {
    this.clock = opts.clock ?? realClock;
    this.random = opts.random ?? Math.random;
  }

  objects(): T[] {
    return [...this.store.values()];
  }

  health(): ReflectorHealth {
    return this.state;
  }

  start(): void {
    this.stopped = false;
    this.informer ??= this.makeInformer();
    this.run();
    // every resyncMs, as an interval: the timer starts over when it fires
    this.resyncTimer = this.clock.setTimeout(() => {
      this.resyncTimer?.refresh();
      void this.resync();
    }, this.opts.resyncMs);
    this.resyncTimer.unref();
  }

  stop(): void {
    this.stopped = true;
    this.clock.clearTimeout(this.restartTimer);
    this.clock.clearTimeout(this.resyncTimer);
    void this.informer?.stop().catch(() => undefined);
  }

  private makeInformer(): Informer<T> {
    const list = async (): Promise<KubernetesListObject<T>> => {
      const result = await this.opts.list();
      if (!this.stopped) {
        this.store = new Map(result.items.map((o) => [key(o), o]));
        this.backoffMs = 0;
        this.markSynced('synced');
        this.opts.onChange();
      }
      return result;
    };
    const informer = this.opts.informer
      ? this.opts.informer(list)
      : kubernetesClient().makeInformer<T>(this.opts.kubeConfig, this.opts.path, list, this.opts.labelSelector);
    const upsert = (obj: T): void => {
      if (this.stopped) return;
      this.store.set(key(obj), obj);
      if (this.state === 'erroring') this.state = 'synced';
      this.opts.onChange();
    };
    informer.on('add', upsert);
    informer.on('update', upsert);
    informer.on('delete', (obj: T) => {
      if (this.stopped) return;
      if (this.store.delete(key(obj))) this.opts.onChange();
    });
    informer.on('error', (err: unknown) => this.failed(err));
    return informer;
  }

  /** Starts the informer: a list when it has no resourceVersion yet, else a watch from it. */
  private run(): void {
    if (this.stopped || !this.informer) return;
    const failuresBefore = this.failures;
    this.informer.start().then(
      () => {
        // start() resolves once the watch answered; an error it met comes through 'error' instead
        if (this.failures !== failuresBefore || this.stopped) return;
        this.backoffMs = 0;
        if (this.state === 'erroring') this.state = 'synced';
      },
      (err: unknown) => this.failed(err),
    );
  }

  /** Restarts the watch from its resourceVersion (a list only if the API server no longer has that history). */
  private async resync(): Promise<void> {
    if (this.stopped || this.restarting || this.restartTimer !== undefined || !this.informer) return;
    this.restarting = true;
    try {
      await this.informer.stop().catch(() => undefined);
    } finally {
      this.restarting = false;
    }
    this.run();
  }

  private failed(err: unknown): void {
    if (this.stopped || this.restarting) return; // our own stop(): the AbortError it emits is expected
    if (this.restartTimer !== undefined) return; // a restart is already scheduled
    this.failures++;
    const status = statusOf(err);
    const message = err instanceof Error ? err.message : String(err);
    let delay: number;
    if (status === 403) {
      if (this.state !== 'forbidden') {
        this.opts.log.warn(
          { resource: this.opts.resource, path: this.opts.path },
          `no permission to list/watch ${this.opts.resource}; grant get, list and watch on it to the router's service account — continuing without it`,
        );
      }
      this.opts.onError?.(this.opts.resource, 'forbidden');
      this.markSynced('forbidden');
      delay = jittered(30_000, this.random);
    } else if (status === 404) {
      if (this.state !== 'absent')
        this.opts.log.info(
          { resource: this.opts.resource },
          `${this.opts.resource} is not served by this cluster (CRD not installed?); checking again later`,
        );
      this.store.clear();
      this.opts.onChange();
      this.markSynced('absent');
      delay = jittered(this.opts.resyncMs, this.random);
    } else {
      this.backoffMs = Math.min(Math.max(this.backoffMs * 2, 500), this.opts.maxBackoffMs ?? 10_000);
      delay = jittered(this.backoffMs, this.random);
      this.state = this.syncedOnce ? 'erroring' : 'syncing';
      this.opts.onError?.(this.opts.resource, status !== undefined ? `http-${status}` : 'connection');
      if (this.opts.failures) this.opts.failures.report(this.opts.resource, message, delay);
      else this.opts.log.warn({ resource: this.opts.resource, error: message, retryInMs: delay }, FAILED_MESSAGE);
    }
    this.restartTimer = this.clock.setTimeout(() => {
      this.restartTimer = undefined;
      this.run();
    }, delay);
    this.restartTimer.unref();
  }

  private markSynced(state: ReflectorHealth): void {
    this.state = state;
    if (!this.syncedOnce) {
      this.syncedOnce = true;
      this.opts.onSynced();
    }
  }
}
