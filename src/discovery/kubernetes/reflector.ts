// A supervised informer for one kind: a local store of the objects that match, fed by a client-node informer
// (list + watch), replaced wholesale by every full list, and rebuilt from scratch periodically and after errors.
//
// Why the supervision: client-node 1.4's ListWatch re-watches by itself only after a clean close or a 410; any
// other error (a dropped connection, a failed list, 403) is emitted once and the informer stops for good. It also
// never re-lists on its own, so a DELETED event lost while a watch was down would leave a ghost forever.
import { makeInformer, type KubeConfig, type KubernetesListObject, type KubernetesObject } from '@kubernetes/client-node';
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
}

function statusOf(err: unknown): number | undefined {
  const e = err as { code?: unknown; statusCode?: unknown; response?: { statusCode?: unknown } };
  for (const v of [e.code, e.statusCode, e.response?.statusCode]) if (typeof v === 'number') return v;
  return undefined;
}

function key(obj: KubernetesObject): string {
  return `${obj.metadata?.namespace ?? ''}/${obj.metadata?.name ?? ''}`;
}

export class Reflector<T extends KubernetesObject> {
  private store = new Map<string, T>();
  private generation = 0;
  private informer: { stop(): Promise<void> } | undefined;
  private restartTimer: NodeJS.Timeout | undefined;
  private resyncTimer: NodeJS.Timeout | undefined;
  private backoffMs = 0;
  private stopped = false;
  private syncedOnce = false;
  private state: ReflectorHealth = 'syncing';

  constructor(private readonly opts: ReflectorOptions<T>) {}

  objects(): T[] {
    return [...this.store.values()];
  }

  health(): ReflectorHealth {
    return this.state;
  }

  start(): void {
    this.stopped = false;
    this.begin();
  }

  stop(): void {
    this.stopped = true;
    this.generation++;
    clearTimeout(this.restartTimer);
    clearTimeout(this.resyncTimer);
    void this.informer?.stop().catch(() => undefined);
    this.informer = undefined;
  }

  /** Starts a fresh informer: a full list replaces the store, then a watch from that list's resourceVersion. */
  private begin(): void {
    if (this.stopped) return;
    clearTimeout(this.restartTimer);
    clearTimeout(this.resyncTimer);
    const generation = ++this.generation;
    void this.informer?.stop().catch(() => undefined);
    const current = (): boolean => generation === this.generation && !this.stopped;

    const list = async (): Promise<KubernetesListObject<T>> => {
      const result = await this.opts.list();
      if (current()) {
        this.store = new Map(result.items.map((o) => [key(o), o]));
        this.backoffMs = 0;
        this.markSynced('synced');
        this.opts.onChange();
      }
      return result;
    };
    const informer = makeInformer<T>(this.opts.kubeConfig, this.opts.path, list, this.opts.labelSelector);
    const upsert = (obj: T): void => {
      if (!current()) return;
      this.store.set(key(obj), obj);
      this.opts.onChange();
    };
    informer.on('add', upsert);
    informer.on('update', upsert);
    informer.on('delete', (obj: T) => {
      if (!current()) return;
      if (this.store.delete(key(obj))) this.opts.onChange();
    });
    informer.on('error', (err: unknown) => {
      if (current()) this.failed(err);
    });
    this.informer = informer;
    informer.start().catch((err: unknown) => {
      if (current()) this.failed(err);
    });
    this.resyncTimer = setTimeout(() => this.begin(), this.opts.resyncMs);
    this.resyncTimer.unref();
  }

  private failed(err: unknown): void {
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
      delay = 30_000;
    } else if (status === 404) {
      if (this.state !== 'absent') this.opts.log.info({ resource: this.opts.resource }, `${this.opts.resource} is not served by this cluster (CRD not installed?); checking again later`);
      this.store.clear();
      this.opts.onChange();
      this.markSynced('absent');
      delay = this.opts.resyncMs;
    } else {
      this.backoffMs = Math.min(Math.max(this.backoffMs * 2, 500), this.opts.maxBackoffMs ?? 10_000);
      delay = this.backoffMs;
      this.state = this.syncedOnce ? 'erroring' : 'syncing';
      this.opts.onError?.(this.opts.resource, status !== undefined ? `http-${status}` : 'connection');
      this.opts.log.warn({ resource: this.opts.resource, error: message, retryInMs: delay }, 'kubernetes list/watch failed; re-listing after a pause');
    }
    this.generation++;
    void this.informer?.stop().catch(() => undefined);
    this.informer = undefined;
    clearTimeout(this.resyncTimer);
    clearTimeout(this.restartTimer);
    if (this.stopped) return;
    this.restartTimer = setTimeout(() => this.begin(), delay);
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
