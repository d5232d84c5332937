// The fake API server's storage: objects by type, one global resourceVersion counter (like etcd's
// revision), a bounded event history for watches, and the write semantics of the real API server
// (defaults, generation, status kept apart from spec, finalizers and graceful deletion).
import { randomUUID } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { apiVersionOf, NAMESPACES, PODS, type ResourceType } from './resources.js';
import type { Json, JsonObject } from './patch.js';

export interface KubeMetadata {
  name?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  deletionGracePeriodSeconds?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
  [key: string]: any;
}

/** An object as stored and served; spec and status are loosely typed so tests can read them directly. */
export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: KubeMetadata;
  spec?: any;
  status?: any;
  [key: string]: any;
}

export type EventType = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface StoreEvent {
  readonly type: EventType;
  readonly rv: number;
  readonly resource: ResourceType;
  readonly namespace: string;
  /** the object after the change (for DELETED, its last state, carrying the deletion's resourceVersion) */
  readonly object: KubeObject;
  /** the object before the change, for MODIFIED */
  readonly previous?: KubeObject;
}

export type StatusReason =
  | 'NotFound'
  | 'AlreadyExists'
  | 'Conflict'
  | 'Forbidden'
  | 'Expired'
  | 'Gone'
  | 'BadRequest'
  | 'Invalid'
  | 'MethodNotAllowed'
  | 'UnsupportedMediaType'
  | 'NotAcceptable'
  | 'InternalError'
  | 'ServiceUnavailable';

/** An error the API server answers with a Status body. */
export class ApiError extends Error {
  constructor(
    readonly code: number,
    readonly reason: StatusReason,
    message: string,
    readonly details?: JsonObject,
  ) {
    super(message);
  }

  toStatus(): JsonObject {
    return statusBody(this.code, this.reason, this.message, this.details);
  }
}

export function statusBody(code: number, reason: StatusReason, message: string, details?: JsonObject): JsonObject {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, ...(details ? { details } : {}), code };
}

const qualified = (t: ResourceType): string => (t.group === '' ? t.plural : `${t.plural}.${t.group}`);
const details = (t: ResourceType, name: string): JsonObject => ({ name, ...(t.group ? { group: t.group } : {}), kind: t.plural });

export const notFound = (t: ResourceType, name: string): ApiError =>
  new ApiError(404, 'NotFound', `${qualified(t)} "${name}" not found`, details(t, name));

/** Who is writing: the HTTP API (status and identity fields are server-owned) or a test knob (writes everything). */
export type Writer = 'http' | 'test';

const now = (): string => new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
const clone = <T>(v: T): T => structuredClone(v);
const metaString = (obj: KubeObject, key: string): string | undefined => {
  const v = obj.metadata[key];
  return typeof v === 'string' ? v : undefined;
};

/** Everything except metadata and status, the part whose change bumps metadata.generation. */
function specOf(obj: KubeObject): JsonObject {
  const { metadata: _m, status: _s, kind: _k, apiVersion: _a, ...rest } = obj;
  return rest;
}

export interface StoreOptions {
  /** events kept for watches that resume from a resourceVersion */
  readonly historyLimit: number;
}

export class ObjectStore {
  private rv = 1;
  private readonly objects = new Map<ResourceType, Map<string, KubeObject>>();
  private history: StoreEvent[] = [];
  /** a watch from resourceVersion N can resume only when N >= historyStart */
  private historyStart = 0;
  private readonly listeners = new Set<(e: StoreEvent) => void>();

  constructor(private readonly options: StoreOptions) {}

  currentResourceVersion(): number {
    return this.rv;
  }

  subscribe(listener: (e: StoreEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Events after `rv`, or 'expired' when some of them were already forgotten. */
  eventsSince(rv: number): StoreEvent[] | 'expired' {
    if (rv < this.historyStart) return 'expired';
    return this.history.filter((e) => e.rv > rv);
  }

  /** The oldest resourceVersion a watch may still resume from. */
  oldestResumable(): number {
    return this.historyStart;
  }

  compactHistory(): void {
    this.history = [];
    this.historyStart = this.rv;
  }

  get(type: ResourceType, namespace: string, name: string): KubeObject | undefined {
    const obj = this.bucket(type).get(this.key(type, namespace, name));
    return obj === undefined ? undefined : this.withType(type, obj);
  }

  /** Objects of a type, in one namespace or all, sorted by namespace then name like the real API server. */
  list(type: ResourceType, namespace?: string): KubeObject[] {
    return [...this.bucket(type).entries()]
      .filter(([k]) => namespace === undefined || !type.namespaced || k.startsWith(`${namespace}/`))
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([, o]) => this.withType(type, o));
  }

  create(type: ResourceType, input: KubeObject, writer: Writer, dryRun = false): KubeObject {
    const obj = clone(input);
    obj.kind = type.kind;
    obj.apiVersion = apiVersionOf(type);
    const meta = obj.metadata;
    const namespace = type.namespaced ? metaString(obj, 'namespace') || 'default' : '';
    if (type.namespaced) meta.namespace = namespace;
    else delete meta.namespace;
    let name = metaString(obj, 'name');
    const generateName = metaString(obj, 'generateName');
    if (!name && generateName) name = generateName + randomUUID().replace(/-/g, '').slice(0, 5);
    if (!name)
      throw new ApiError(422, 'Invalid', `${type.kind} "" is invalid: metadata.name: Required value: name or generateName is required`);
    meta.name = name;
    if (type.namespaced && this.get(NAMESPACES, '', namespace) === undefined) {
      if (writer === 'http') throw notFound(NAMESPACES, namespace);
      if (!dryRun) this.create(NAMESPACES, { metadata: { name: namespace } }, 'test');
    }
    if (this.bucket(type).has(this.key(type, namespace, name))) {
      throw new ApiError(409, 'AlreadyExists', `${qualified(type)} "${name}" already exists`, details(type, name));
    }
    meta.uid = randomUUID();
    meta.creationTimestamp = now();
    meta.generation = 1;
    delete meta.deletionTimestamp;
    delete meta.deletionGracePeriodSeconds;
    if (writer === 'http' || obj.status === undefined) obj.status = initialStatus(type);
    applyDefaults(type, obj);
    if (dryRun) return obj;
    return this.commit('ADDED', type, namespace, name, obj);
  }

  /**
   * Replaces an object. `subresource` 'status' takes only the status from the input; the main
   * resource written over HTTP keeps the stored status, as with the real API server.
   */
  update(type: ResourceType, input: KubeObject, writer: Writer, subresource?: 'status', dryRun = false): KubeObject {
    const namespace = type.namespaced ? metaString(input, 'namespace') || 'default' : '';
    const name = metaString(input, 'name') ?? '';
    const current = this.get(type, namespace, name);
    if (current === undefined) throw notFound(type, name);
    const wantedRv = metaString(input, 'resourceVersion');
    if (writer === 'http' && wantedRv && wantedRv !== metaString(current, 'resourceVersion')) {
      throw new ApiError(
        409,
        'Conflict',
        `Operation cannot be fulfilled on ${qualified(type)} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
        details(type, name),
      );
    }
    let next: KubeObject;
    if (subresource === 'status') {
      next = { ...current, status: clone(input.status ?? {}) };
    } else {
      next = clone(input);
      next.kind = type.kind;
      next.apiVersion = apiVersionOf(type);
      if (writer === 'http' || next.status === undefined) next.status = clone(current.status ?? {});
      const meta = next.metadata;
      for (const k of ['uid', 'creationTimestamp', 'generation', 'deletionTimestamp', 'deletionGracePeriodSeconds']) {
        if (current.metadata[k] === undefined) delete meta[k];
        else meta[k] = current.metadata[k]!;
      }
      if (type.namespaced) meta.namespace = namespace;
      meta.name = name;
      applyDefaults(type, next);
      if (!isDeepStrictEqual(specOf(current), specOf(next))) meta.generation = Number(current.metadata.generation ?? 0) + 1;
    }
    next.metadata.resourceVersion = current.metadata.resourceVersion;
    if (isDeepStrictEqual(current, next)) return current;
    if (dryRun) return next;
    if (next.metadata.deletionTimestamp !== undefined && finalizersOf(next).length === 0 && !this.awaitsGracefulDeletion(type, next)) {
      return this.commit('DELETED', type, namespace, name, next);
    }
    return this.commit('MODIFIED', type, namespace, name, next);
  }

  /**
   * Deletes an object. With finalizers, or for a pod deleted gracefully, it first gets a
   * deletionTimestamp (MODIFIED) and goes away when `finalize` is called (DELETED).
   */
  delete(
    type: ResourceType,
    namespace: string,
    name: string,
    opts: { gracePeriodSeconds?: number; graceful: boolean },
    dryRun = false,
  ): KubeObject {
    const current = this.get(type, namespace, name);
    if (current === undefined) throw notFound(type, name);
    const graceful = opts.graceful && type === PODS && opts.gracePeriodSeconds !== 0;
    if (graceful || finalizersOf(current).length > 0) {
      if (current.metadata.deletionTimestamp !== undefined) return current;
      const grace = opts.gracePeriodSeconds ?? Number((current.spec as JsonObject | undefined)?.terminationGracePeriodSeconds ?? 30);
      const next = clone(current);
      next.metadata.deletionTimestamp = new Date(Date.now() + (graceful ? grace * 1000 : 0)).toISOString().replace(/\.\d{3}Z$/, 'Z');
      next.metadata.deletionGracePeriodSeconds = graceful ? grace : 0;
      if (dryRun) return next;
      return this.commit('MODIFIED', type, namespace, name, next);
    }
    if (dryRun) return current;
    if (type === NAMESPACES) {
      for (const t of this.objects.keys()) {
        if (!t.namespaced) continue;
        for (const obj of this.list(t, name)) this.commit('DELETED', t, name, metaString(obj, 'name')!, obj);
      }
    }
    return this.commit('DELETED', type, namespace, name, current);
  }

  /** Completes a pending deletion (graceful pod termination or finalizers): the object is removed. */
  finalize(type: ResourceType, namespace: string, name: string): KubeObject {
    const current = this.get(type, namespace, name);
    if (current === undefined) throw notFound(type, name);
    return this.commit('DELETED', type, namespace, name, current);
  }

  private awaitsGracefulDeletion(type: ResourceType, obj: KubeObject): boolean {
    return type === PODS && Number(obj.metadata.deletionGracePeriodSeconds ?? 0) > 0;
  }

  private commit(type: EventType, resource: ResourceType, namespace: string, name: string, obj: KubeObject): KubeObject {
    const previous = type === 'MODIFIED' ? this.get(resource, namespace, name) : undefined;
    this.rv += 1;
    const stored = clone(obj);
    stored.metadata.resourceVersion = String(this.rv);
    const key = this.key(resource, namespace, name);
    if (type === 'DELETED') this.bucket(resource).delete(key);
    else this.bucket(resource).set(key, stored);
    const event: StoreEvent = {
      type,
      rv: this.rv,
      resource,
      namespace,
      object: this.withType(resource, stored),
      ...(previous ? { previous } : {}),
    };
    this.history.push(event);
    if (this.history.length > this.options.historyLimit) {
      const dropped = this.history.splice(0, this.history.length - this.options.historyLimit);
      this.historyStart = dropped[dropped.length - 1]!.rv;
    }
    for (const l of this.listeners) l(event);
    return clone(event.object);
  }

  private bucket(type: ResourceType): Map<string, KubeObject> {
    let b = this.objects.get(type);
    if (b === undefined) {
      b = new Map();
      this.objects.set(type, b);
    }
    return b;
  }

  private key(type: ResourceType, namespace: string, name: string): string {
    return type.namespaced ? `${namespace}/${name}` : name;
  }

  private withType(type: ResourceType, obj: KubeObject): KubeObject {
    const { kind: _k, apiVersion: _a, ...rest } = clone(obj);
    return { kind: type.kind, apiVersion: apiVersionOf(type), ...rest } as KubeObject;
  }
}

function finalizersOf(obj: KubeObject): Json[] {
  const f = obj.metadata.finalizers;
  return Array.isArray(f) ? f : [];
}

function initialStatus(type: ResourceType): JsonObject {
  if (type === PODS) return { phase: 'Pending' };
  if (type === NAMESPACES) return { phase: 'Active' };
  return {};
}

function applyDefaults(type: ResourceType, obj: KubeObject): void {
  if (!type.scalable) return;
  obj.spec ??= {};
  const spec = obj.spec as JsonObject;
  if (spec.replicas === undefined) spec.replicas = 1;
}
