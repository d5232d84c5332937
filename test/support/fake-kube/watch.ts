// One open watch connection: a chunked HTTP response carrying newline-delimited JSON events,
// filtered by namespace and selectors the way the real API server filters them.
import type { ServerResponse } from 'node:http';
import type { JsonObject } from './patch.js';
import { apiVersionOf, type ResourceType } from './resources.js';
import type { Selector, ObjectSelector } from './selectors.js';
import type { KubeObject, StoreEvent } from './store.js';

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';

export interface WatchFilter {
  readonly resource: ResourceType;
  /** undefined: all namespaces (or a cluster-scoped resource) */
  readonly namespace: string | undefined;
  readonly labels: Selector;
  readonly fields: ObjectSelector;
}

export class WatchStream {
  private closed = false;
  private readonly timers: NodeJS.Timeout[] = [];
  private readonly onCloseCallbacks: Array<() => void> = [];

  constructor(
    private readonly res: ServerResponse,
    readonly filter: WatchFilter,
    readonly allowBookmarks: boolean,
  ) {
    res.writeHead(200, {
      'Content-Type': 'application/json',
      'Cache-Control': 'no-cache, private',
      'Transfer-Encoding': 'chunked',
    });
    // client-node's Watch awaits the response headers before it reports the watch as started.
    res.flushHeaders();
    res.on('close', () => this.cleanup());
  }

  get isOpen(): boolean {
    return !this.closed;
  }

  onClose(cb: () => void): void {
    this.onCloseCallbacks.push(cb);
  }

  /** Ends the stream cleanly after `ms` (the `timeoutSeconds` of the request). */
  endAfter(ms: number): void {
    this.timers.push(setTimeout(() => this.end(), ms));
  }

  every(ms: number, fn: () => void): void {
    const t = setInterval(fn, ms);
    this.timers.push(t);
  }

  send(type: WatchEventType, object: JsonObject): void {
    if (this.closed) return;
    this.res.write(`${JSON.stringify({ type, object })}\n`);
  }

  /** Sends the event as this watcher should see it, or nothing when it does not concern it. */
  deliver(event: StoreEvent): void {
    const f = this.filter;
    if (event.resource !== f.resource) return;
    if (f.namespace !== undefined && f.resource.namespaced && event.namespace !== f.namespace) return;
    const matches = (o: KubeObject | undefined): boolean => o !== undefined && f.labels(labelsOf(o)) && f.fields(o);
    const now = matches(event.object);
    if (event.type === 'ADDED') {
      if (now) this.send('ADDED', event.object);
    } else if (event.type === 'DELETED') {
      if (now) this.send('DELETED', event.object);
    } else {
      const before = matches(event.previous);
      if (before && now) this.send('MODIFIED', event.object);
      else if (!before && now) this.send('ADDED', event.object);
      // an object that stops matching leaves the watcher's view: the real API server sends DELETED
      else if (before && !now) this.send('DELETED', event.object);
    }
  }

  bookmark(resourceVersion: number, annotations?: Record<string, string>): void {
    if (!this.allowBookmarks) return;
    const r = this.filter.resource;
    this.send('BOOKMARK', {
      kind: r.kind,
      apiVersion: apiVersionOf(r),
      metadata: { resourceVersion: String(resourceVersion), ...(annotations ? { annotations } : {}) },
    });
  }

  /** Clean end: the terminating chunk is sent, as when the real API server's watch timeout expires. */
  end(): void {
    if (this.closed) return;
    this.res.end();
    this.cleanup();
  }

  /** Abrupt end: the TCP connection is destroyed without the terminating chunk. */
  destroy(): void {
    if (this.closed) return;
    this.res.socket?.destroy();
    this.cleanup();
  }

  private cleanup(): void {
    if (this.closed) return;
    this.closed = true;
    for (const t of this.timers) clearTimeout(t);
    for (const cb of this.onCloseCallbacks) cb();
  }
}

export function labelsOf(obj: KubeObject): Record<string, string> {
  const labels = obj.metadata.labels;
  return labels !== null && typeof labels === 'object' && !Array.isArray(labels) ? (labels as Record<string, string>) : {};
}
