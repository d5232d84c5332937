// The operator's timeline: a bounded ring of what happened to models and endpoints recently (state changes, cold
// starts, failovers, migrations, wake alarms, adapter loads and unloads), for the dashboard and its /events stream. It holds names, URLs, states and the
// router's own error texts: never a prompt, a key or a request body.
import type { EndpointState } from '../../core/endpoint.js';
import type { ModelState } from '../../core/model.js';
import type { LoadResult, UnloadReason } from '../../core/lora.js';

/** What happened, without its sequence number and time (the timeline gives those). */
export type Happening =
  | {
      readonly type: 'model-state';
      readonly model: string;
      /** null: the model was not known before */
      readonly from: ModelState | null;
      /** null: the model is neither declared nor served any more */
      readonly to: ModelState | null;
      readonly reason: string;
    }
  | {
      readonly type: 'endpoint-state';
      readonly endpoint: string;
      readonly models: readonly string[];
      readonly from: EndpointState;
      readonly to: EndpointState;
      /** the error or probe result that moved it, when there is one */
      readonly reason: string | null;
    }
  | { readonly type: 'endpoint-added'; readonly endpoint: string; readonly models: readonly string[]; readonly source: string }
  | { readonly type: 'endpoint-removed'; readonly endpoint: string; readonly models: readonly string[]; readonly source: string }
  | {
      readonly type: 'cold-start';
      readonly model: string;
      /** load: an endpoint from discovered to ready; wake: the model from scaled-to-zero to its first ready endpoint */
      readonly kind: 'load' | 'wake';
      readonly seconds: number;
      readonly endpoint: string | null;
    }
  /** requests retried on another endpoint before any byte reached the client, counted over about a second */
  | { readonly type: 'failover'; readonly model: string; readonly count: number }
  /**
   * streams whose engine failed mid-way (--migration-limit), counted over about a second: `migrated` continued on
   * another endpoint, `ended` ended with the router's error event instead (refused, limit, no endpoint left)
   */
  | { readonly type: 'migration'; readonly model: string; readonly migrated: number; readonly ended: number }
  | {
      readonly type: 'wake-alarm';
      readonly model: string;
      /** true: raised; false: cleared */
      readonly raised: boolean;
      readonly demandForSeconds: number;
      readonly cleared: 'endpoint-appeared' | 'demand-ended' | null;
    }
  /** the router asked an engine to load a LoRA adapter; `detail`: the engine's words when it did not */
  | {
      readonly type: 'adapter-load';
      readonly adapter: string;
      readonly endpoint: string;
      readonly result: LoadResult;
      readonly seconds: number;
      readonly detail: string | null;
    }
  | {
      readonly type: 'adapter-unload';
      readonly adapter: string;
      readonly endpoint: string;
      readonly reason: UnloadReason;
      /** false: the engine refused (it may still hold it) */
      readonly ok: boolean;
      readonly detail: string | null;
    };

export type TimelineEvent = Happening & {
  /** increases by one per event of this router process */
  readonly seq: number;
  /** ms since epoch (when this process learned of it) */
  readonly at: number;
  /** under --workers: the worker it happened in, when that is another one than the process answering */
  readonly worker?: number;
};

/**
 * What happens in one worker alone (a request's failover, an adapter load or unload it made), which the other workers
 * of the instance add to their timelines; every worker observes state changes and cold starts for itself.
 */
const SHARED_TYPES: ReadonlySet<string> = new Set<Happening['type']>(['failover', 'migration', 'adapter-load', 'adapter-unload']);

export function isShared(h: Happening): boolean {
  return SHARED_TYPES.has(h.type);
}

/** A happening another worker relayed, if it is one of the shared kinds with the names they carry. */
export function sharedHappening(value: unknown): Happening | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const v = value as Record<string, unknown>;
  if (typeof v.type !== 'string' || !SHARED_TYPES.has(v.type)) return undefined;
  if (v.type === 'failover') return typeof v.model === 'string' && typeof v.count === 'number' ? (value as Happening) : undefined;
  if (v.type === 'migration')
    return typeof v.model === 'string' && typeof v.migrated === 'number' && typeof v.ended === 'number' ? (value as Happening) : undefined;
  return typeof v.adapter === 'string' && typeof v.endpoint === 'string' ? (value as Happening) : undefined;
}

type Listener = (event: TimelineEvent) => void;

export class Timeline {
  private readonly ring: TimelineEvent[] = [];
  private next = 0;
  private seq = 0;
  private readonly listeners = new Set<Listener>();

  constructor(
    readonly capacity = 500,
    private readonly now: () => number = Date.now,
  ) {}

  /** `worker`: another worker of the instance, where it happened (relayed). */
  add(happening: Happening, worker?: number): TimelineEvent {
    const event: TimelineEvent = { ...happening, seq: ++this.seq, at: this.now(), ...(worker !== undefined ? { worker } : {}) };
    if (this.ring.length < this.capacity) this.ring.push(event);
    else this.ring[this.next] = event;
    this.next = (this.next + 1) % this.capacity;
    for (const l of this.listeners) l(event);
    return event;
  }

  /** The most recent events, oldest first (at most `limit`). */
  recent(limit = this.capacity): TimelineEvent[] {
    const ordered = this.ring.length < this.capacity ? this.ring : [...this.ring.slice(this.next), ...this.ring.slice(0, this.next)];
    return ordered.slice(Math.max(0, ordered.length - limit));
  }

  subscribe(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}
