// A fake Kubernetes API server on 127.0.0.1 that speaks the real protocol closely enough for kubectl
// and @kubernetes/client-node informers, with knobs that let tests break it the ways a real one breaks.
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Socket } from 'node:net';
import { parse as parseYaml } from 'yaml';
import { jsonPatch, mergePatch, PatchError, strategicMergePatch, type Json, type JsonObject } from './patch.js';
import { apiVersionOf, NAMESPACES, PODS, ResourceRegistry, VERSION_INFO, type ResourceType } from './resources.js';
import { fieldSelector, labelSelector, SelectorError } from './selectors.js';
import { ApiError, notFound, ObjectStore, statusBody, type KubeObject } from './store.js';
import { labelsOf, WatchStream } from './watch.js';

export interface FakeKubeOptions {
  /** serve leaderworkerset.x-k8s.io/v1 leaderworkersets (default true) */
  readonly withLeaderWorkerSets?: boolean;
  /**
   * Pod deletion sets metadata.deletionTimestamp first (MODIFIED) and removes the pod later:
   * on finalizePodDeletion(), or after delayMs when given. Default false: pods go away at once.
   */
  readonly gracefulPodDeletion?: boolean | { readonly delayMs: number };
  /** events kept for watches resuming from a resourceVersion (default 1000) */
  readonly historyLimit?: number;
  /** send BOOKMARK events this often to watches that allow them (default 0: only on sendBookmarks()) */
  readonly bookmarkIntervalMs?: number;
}

export type WatchFailureMode = 'event' | 'http';

interface ResourceRequest {
  readonly type: ResourceType;
  readonly namespace: string | undefined;
  readonly name: string | undefined;
  readonly subresource: string | undefined;
}

const DEFAULT_NAMESPACES = ['default', 'kube-system', 'kube-public', 'kube-node-lease'];
const MAX_BODY = 8 * 1024 * 1024;

export class FakeKube {
  readonly port: number;
  readonly url: string;
  readonly kubeconfigPath: string;
  /** requests served, keyed `${verb} ${resource}` (e.g. `watch pods`, `patch deployments/scale`, `get discovery`) */
  readonly requests: Record<string, number> = {};

  private readonly registry: ResourceRegistry;
  private readonly store: ObjectStore;
  private readonly watches = new Set<WatchStream>();
  private readonly forbidden = new Map<string, Set<string>>();
  private readonly pendingDeletions = new Set<NodeJS.Timeout>();
  private failWatches: { remaining: number; mode: WatchFailureMode } = { remaining: 0, mode: 'event' };
  private running = true;

  private constructor(
    private readonly server: http.Server,
    private readonly sockets: Set<Socket>,
    private readonly tempDir: string,
    private readonly options: FakeKubeOptions,
    port: number,
  ) {
    this.port = port;
    this.url = `http://127.0.0.1:${port}`;
    this.kubeconfigPath = path.join(tempDir, 'kubeconfig');
    this.registry = new ResourceRegistry(options.withLeaderWorkerSets ?? true);
    this.store = new ObjectStore({ historyLimit: options.historyLimit ?? 1000 });
    for (const ns of DEFAULT_NAMESPACES) this.store.create(NAMESPACES, { metadata: { name: ns } }, 'test');
    this.store.subscribe((event) => {
      for (const w of this.watches) w.deliver(event);
    });
  }

  static async start(options: FakeKubeOptions = {}): Promise<FakeKube> {
    const sockets = new Set<Socket>();
    let handler: (req: IncomingMessage, res: ServerResponse) => void = () => undefined;
    const server = http.createServer((req, res) => handler(req, res));
    server.on('connection', (s) => {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const address = server.address();
    if (address === null || typeof address === 'string') throw new Error('fake-kube: no port');
    const tempDir = await mkdtemp(path.join(os.tmpdir(), 'fake-kube-'));
    const kube = new FakeKube(server, sockets, tempDir, options, address.port);
    handler = (req, res) => kube.handle(req, res);
    await writeFile(kube.kubeconfigPath, kubeconfig(kube.url));
    return kube;
  }

  // ---- programmatic API: the same store and event stream as HTTP changes ----

  /** Creates an object (namespace defaults to `default` and is created when missing). Throws ApiError AlreadyExists. */
  create(obj: object): KubeObject {
    return this.store.create(this.typeOf(obj), obj as KubeObject, 'test');
  }

  /** Replaces an object, status included. Throws ApiError NotFound. */
  update(obj: object): KubeObject {
    return this.store.update(this.typeOf(obj), obj as KubeObject, 'test');
  }

  /** Creates or replaces. */
  apply(obj: object): KubeObject {
    const type = this.typeOf(obj);
    const meta = (obj as KubeObject).metadata ?? {};
    const existing = this.store.get(type, String(meta.namespace ?? 'default'), String(meta.name ?? ''));
    return existing === undefined ? this.create(obj) : this.update(obj);
  }

  /** Merge-patches an object, status included (e.g. `{ status: { phase: 'Failed' } }`). */
  patch(kind: string, namespace: string, name: string, patch: object): KubeObject {
    const type = this.typeNamed(kind);
    const current = this.store.get(type, namespace, name);
    if (current === undefined) throw notFound(type, name);
    return this.store.update(type, mergePatch(current, patch as Json) as KubeObject, 'test');
  }

  get(kind: string, namespace: string, name: string): KubeObject | undefined {
    return this.store.get(this.typeNamed(kind), namespace, name);
  }

  list(kind: string, namespace?: string, selector?: string): KubeObject[] {
    const matches = labelSelector(selector);
    return this.store.list(this.typeNamed(kind), namespace).filter((o) => matches(labelsOf(o)));
  }

  /** Deletes at once, or (graceful, pods) sets deletionTimestamp and waits for finalizePodDeletion(). */
  remove(kind: string, namespace: string, name: string, opts: { graceful?: boolean } = {}): KubeObject {
    const type = this.typeNamed(kind);
    const graceful = opts.graceful ?? false;
    return this.store.delete(type, type.namespaced ? namespace : '', name, { graceful, ...(graceful ? {} : { gracePeriodSeconds: 0 }) });
  }

  /** Ends a graceful pod deletion: the pod is removed (DELETED). */
  finalizePodDeletion(namespace: string, name: string): void {
    this.store.finalize(PODS, namespace, name);
  }

  /** Marks the pod Running with Ready/ContainersReady conditions True or False. */
  setPodReady(namespace: string, name: string, ready: boolean): KubeObject {
    const pod = this.store.get(PODS, namespace, name);
    if (pod === undefined) throw notFound(PODS, name);
    const status = (pod.status ?? {}) as JsonObject;
    const value = ready ? 'True' : 'False';
    const others = (Array.isArray(status.conditions) ? status.conditions : []).filter(
      (c) => !(c !== null && typeof c === 'object' && !Array.isArray(c) && (c.type === 'Ready' || c.type === 'ContainersReady')),
    );
    const lastTransitionTime = new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
    const conditions = [
      ...others,
      { type: 'Ready', status: value, lastProbeTime: null, lastTransitionTime },
      { type: 'ContainersReady', status: value, lastProbeTime: null, lastTransitionTime },
    ];
    return this.store.update(PODS, { ...pod, status: { ...status, phase: 'Running', conditions } }, 'test');
  }

  setPodIP(namespace: string, name: string, ip: string): KubeObject {
    return this.patch('pods', namespace, name, { status: { podIP: ip, podIPs: [{ ip }] } });
  }

  /** The current resourceVersion (the one a list would return now). */
  resourceVersion(): string {
    return String(this.store.currentResourceVersion());
  }

  // ---- failure knobs ----

  /** Destroys every open watch connection (abruptly by default; `graceful` ends them with the last chunk). Returns how many. */
  dropWatches(opts: { graceful?: boolean } = {}): number {
    const open = [...this.watches];
    for (const w of open) {
      if (opts.graceful) w.end();
      else w.destroy();
    }
    return open.length;
  }

  /** Forgets the event history: a watch from any older resourceVersion gets 410 Expired. */
  compactHistory(): void {
    this.store.compactHistory();
  }

  /** The next n watch requests fail with 410: as an ERROR event in a 200 stream ('event') or as an HTTP 410 ('http'). */
  failWatchesWith410(n: number, mode: WatchFailureMode = 'event'): void {
    this.failWatches = { remaining: n, mode };
  }

  /** RBAC denial: 403 Forbidden for these verbs (default list and watch) on the resource (plural, e.g. 'pods'). */
  setForbidden(resource: string, forbidden: boolean, verbs: readonly string[] = ['list', 'watch']): void {
    const plural = this.typeNamed(resource).plural;
    if (forbidden) this.forbidden.set(plural, new Set(verbs));
    else this.forbidden.delete(plural);
  }

  /** Sends a BOOKMARK with the current resourceVersion to every watch that allowed bookmarks. */
  sendBookmarks(): void {
    for (const w of this.watches) w.bookmark(this.store.currentResourceVersion());
  }

  openWatches(resource?: string): number {
    const plural = resource === undefined ? undefined : this.typeNamed(resource).plural;
    return [...this.watches].filter((w) => plural === undefined || w.filter.resource.plural === plural).length;
  }

  resetRequests(): void {
    for (const k of Object.keys(this.requests)) delete this.requests[k];
  }

  /** API server down: the port refuses connections and every open connection is cut. State is kept. */
  async stop(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    const closed = once(this.server, 'close');
    this.server.close();
    for (const w of this.watches) w.destroy();
    for (const s of this.sockets) s.destroy();
    await closed;
  }

  /** API server back on the same port, with the same objects and history. */
  async restart(): Promise<void> {
    if (this.running) return;
    this.server.listen(this.port, '127.0.0.1');
    await once(this.server, 'listening');
    this.running = true;
  }

  async close(): Promise<void> {
    for (const t of this.pendingDeletions) clearTimeout(t);
    this.pendingDeletions.clear();
    await this.stop();
    await rm(this.tempDir, { recursive: true, force: true });
  }

  // ---- HTTP ----

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    try {
      await this.route(req, res);
    } catch (err) {
      const apiError =
        err instanceof ApiError
          ? err
          : err instanceof SelectorError || err instanceof PatchError || err instanceof SyntaxError
            ? new ApiError(400, 'BadRequest', err.message)
            : new ApiError(500, 'InternalError', `Internal error occurred: ${String(err)}`);
      if (!res.headersSent) sendJson(res, apiError.code, apiError.toStatus());
      else res.destroy();
    }
  }

  private async route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://fake-kube');
    const segs = url.pathname.split('/').filter((s) => s !== '');
    const method = req.method ?? 'GET';

    const discovery = this.discovery(url.pathname, segs);
    if (discovery !== undefined && method === 'GET') {
      this.count('get', 'discovery');
      if (discovery === null) throw new ApiError(404, 'NotFound', 'the server could not find the requested resource');
      sendJson(res, 200, discovery);
      return;
    }
    if (['/healthz', '/readyz', '/livez'].includes(url.pathname)) {
      res.writeHead(200, { 'Content-Type': 'text/plain; charset=utf-8' }).end('ok');
      return;
    }

    const target = this.resourceRequest(segs);
    if (target === undefined) throw new ApiError(404, 'NotFound', 'the server could not find the requested resource');
    const q = url.searchParams;
    const dryRun = q.get('dryRun') === 'All';
    const { type, namespace, name, subresource } = target;
    const resourceName = subresource ? `${type.plural}/${subresource}` : type.plural;

    if (name === undefined) {
      if (method === 'GET') {
        const watch = q.get('watch') === '1' || q.get('watch') === 'true';
        this.authorize(watch ? 'watch' : 'list', type, namespace);
        if (watch) this.watch(req, res, type, namespace, q);
        else this.listResponse(req, res, type, namespace, q);
        return;
      }
      if (method === 'POST') {
        this.authorize('create', type, namespace);
        if (type.namespaced && namespace === undefined)
          throw new ApiError(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource');
        const body = asObject(await readJson(req));
        const meta = (body.metadata ?? {}) as JsonObject;
        checkKind(type, body);
        if (type.namespaced) {
          if (meta.namespace !== undefined && meta.namespace !== namespace) {
            throw new ApiError(400, 'BadRequest', 'the namespace of the provided object does not match the namespace sent on the request');
          }
          meta.namespace = namespace!;
        }
        body.metadata = meta;
        sendJson(res, 201, this.store.create(type, body as KubeObject, 'http', dryRun));
        return;
      }
      if (method === 'DELETE') {
        this.authorize('deletecollection', type, namespace);
        const matches = labelSelector(q.get('labelSelector') ?? undefined);
        const fields = fieldSelector(q.get('fieldSelector') ?? undefined);
        for (const obj of this.store.list(type, namespace)) {
          if (matches(labelsOf(obj)) && fields(obj)) this.deleteObject(type, namespace ?? '', String(obj.metadata.name), {}, dryRun);
        }
        sendJson(res, 200, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success' });
        return;
      }
      throw new ApiError(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource');
    }

    const ns = type.namespaced ? namespace! : '';
    const verb = { GET: 'get', PUT: 'update', PATCH: 'patch', DELETE: 'delete' }[method];
    if (verb === undefined || (verb === 'delete' && subresource !== undefined)) {
      throw new ApiError(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource');
    }
    this.count(verb, resourceName);
    this.authorize(verb, type, namespace, false);

    if (subresource === 'scale') {
      await this.scale(req, res, verb, type, ns, name, dryRun);
      return;
    }
    const statusOnly = subresource === 'status' ? 'status' : undefined;
    switch (verb) {
      case 'get': {
        const obj = this.store.get(type, ns, name);
        if (obj === undefined) throw notFound(type, name);
        sendJson(res, 200, wantsTable(req) ? table(type, [obj], this.store.currentResourceVersion()) : obj);
        return;
      }
      case 'update': {
        const body = asObject(await readJson(req));
        checkKind(type, body);
        const meta = (body.metadata ?? {}) as JsonObject;
        if (meta.name !== undefined && meta.name !== name)
          throw new ApiError(400, 'BadRequest', 'the name of the object does not match the name on the URL');
        body.metadata = { ...meta, name, ...(type.namespaced ? { namespace: ns } : {}) };
        sendJson(res, 200, this.store.update(type, body as KubeObject, 'http', statusOnly, dryRun));
        return;
      }
      case 'patch': {
        const contentType = (req.headers['content-type'] ?? '').split(';')[0]!.trim();
        const raw = await readBody(req);
        const current = this.store.get(type, ns, name);
        if (contentType === 'application/apply-patch+yaml') {
          const applied = asObject(parseYaml(raw) as Json);
          checkKind(type, applied);
          applied.metadata = { ...((applied.metadata ?? {}) as JsonObject), name, ...(type.namespaced ? { namespace: ns } : {}) };
          if (current === undefined) {
            sendJson(res, 201, this.store.create(type, applied as KubeObject, 'http', dryRun));
            return;
          }
          sendJson(res, 200, this.store.update(type, mergePatch(current, applied) as KubeObject, 'http', statusOnly, dryRun));
          return;
        }
        if (current === undefined) throw notFound(type, name);
        const patched = patchDocument(contentType, current, raw, supportsStrategicMerge(type));
        sendJson(res, 200, this.store.update(type, patched as KubeObject, 'http', statusOnly, dryRun));
        return;
      }
      case 'delete': {
        const raw = await readBody(req);
        const opts = raw.trim() === '' ? {} : asObject(JSON.parse(raw) as Json);
        const graceQuery = q.get('gracePeriodSeconds');
        const grace =
          graceQuery !== null ? Number(graceQuery) : typeof opts.gracePeriodSeconds === 'number' ? opts.gracePeriodSeconds : undefined;
        // kubectl sends DeleteOptions.dryRun in the body rather than the query
        const bodyDryRun = Array.isArray(opts.dryRun) && opts.dryRun.includes('All');
        sendJson(res, 200, this.deleteObject(type, ns, name, { gracePeriodSeconds: grace }, dryRun || bodyDryRun));
        return;
      }
    }
  }

  private deleteObject(
    type: ResourceType,
    ns: string,
    name: string,
    opts: { gracePeriodSeconds?: number | undefined },
    dryRun: boolean,
  ): KubeObject {
    const setting = this.options.gracefulPodDeletion ?? false;
    const graceful = setting !== false;
    const result = this.store.delete(
      type,
      ns,
      name,
      { graceful, ...(opts.gracePeriodSeconds !== undefined ? { gracePeriodSeconds: opts.gracePeriodSeconds } : {}) },
      dryRun,
    );
    if (
      !dryRun &&
      type === PODS &&
      typeof setting === 'object' &&
      this.store.get(PODS, ns, name)?.metadata.deletionTimestamp !== undefined
    ) {
      const uid = result.metadata.uid;
      const timer = setTimeout(() => {
        this.pendingDeletions.delete(timer);
        if (this.store.get(PODS, ns, name)?.metadata.uid === uid) this.store.finalize(PODS, ns, name);
      }, setting.delayMs);
      this.pendingDeletions.add(timer);
    }
    return result;
  }

  private async scale(
    req: IncomingMessage,
    res: ServerResponse,
    verb: string,
    type: ResourceType,
    ns: string,
    name: string,
    dryRun: boolean,
  ): Promise<void> {
    if (!type.scalable) throw new ApiError(404, 'NotFound', 'the server could not find the requested resource');
    const current = this.store.get(type, ns, name);
    if (current === undefined) throw notFound(type, name);
    if (verb === 'get') {
      sendJson(res, 200, scaleOf(current));
      return;
    }
    const raw = await readBody(req);
    let wanted: Json;
    if (verb === 'update') {
      wanted = JSON.parse(raw) as Json;
    } else {
      const contentType = (req.headers['content-type'] ?? '').split(';')[0]!.trim();
      wanted = patchDocument(contentType, scaleOf(current), raw, true);
    }
    const replicas = (asObject(wanted).spec as JsonObject | undefined)?.replicas;
    if (typeof replicas !== 'number' || replicas < 0 || !Number.isInteger(replicas)) {
      throw new ApiError(
        422,
        'Invalid',
        `Scale.autoscaling "${name}" is invalid: spec.replicas: Invalid value: ${JSON.stringify(replicas)}: must be a non-negative integer`,
      );
    }
    const next = { ...current, spec: { ...((current.spec ?? {}) as JsonObject), replicas } };
    sendJson(res, 200, scaleOf(this.store.update(type, next, 'http', undefined, dryRun)));
  }

  private listResponse(
    req: IncomingMessage,
    res: ServerResponse,
    type: ResourceType,
    namespace: string | undefined,
    q: URLSearchParams,
  ): void {
    const labels = labelSelector(q.get('labelSelector') ?? undefined);
    const fields = fieldSelector(q.get('fieldSelector') ?? undefined);
    const rv = this.store.currentResourceVersion();
    const items = this.store.list(type, namespace).filter((o) => labels(labelsOf(o)) && fields(o));
    if (wantsTable(req)) {
      sendJson(res, 200, table(type, items, rv));
      return;
    }
    sendJson(res, 200, {
      kind: `${type.kind}List`,
      apiVersion: apiVersionOf(type),
      metadata: { resourceVersion: String(rv) },
      // like the real API server, list items carry no kind/apiVersion
      items: items.map(({ kind: _k, apiVersion: _a, ...rest }) => rest),
    });
  }

  private watch(req: IncomingMessage, res: ServerResponse, type: ResourceType, namespace: string | undefined, q: URLSearchParams): void {
    if (this.failWatches.remaining > 0) {
      this.failWatches.remaining -= 1;
      if (this.failWatches.mode === 'http') {
        sendJson(res, 410, statusBody(410, 'Gone', 'the resource version requested is no longer available'));
        return;
      }
      const stream = new WatchStream(res, { resource: type, namespace, labels: () => false, fields: () => false }, false);
      stream.send('ERROR', expired(q.get('resourceVersion') ?? '', this.store.oldestResumable()));
      stream.end();
      return;
    }
    const filter = {
      resource: type,
      namespace,
      labels: labelSelector(q.get('labelSelector') ?? undefined),
      fields: fieldSelector(q.get('fieldSelector') ?? undefined),
    };
    const rvParam = q.get('resourceVersion') ?? '';
    const sendInitialEvents = q.get('sendInitialEvents') === 'true';
    let since: number | undefined;
    if (rvParam !== '' && rvParam !== '0' && !sendInitialEvents) {
      since = Number(rvParam);
      if (!Number.isInteger(since) || since < 0) throw new ApiError(400, 'BadRequest', `invalid resource version: ${rvParam}`);
    }
    const replay = since === undefined ? [] : this.store.eventsSince(since);
    const stream = new WatchStream(res, filter, q.get('allowWatchBookmarks') === 'true');
    if (replay === 'expired') {
      // the real API server answers 200 and sends one ERROR event, then ends the stream
      stream.send('ERROR', expired(rvParam, this.store.oldestResumable()));
      stream.end();
      return;
    }
    this.watches.add(stream);
    stream.onClose(() => this.watches.delete(stream));
    if (since === undefined) {
      // no resourceVersion: synthetic ADDED events for the current state, then changes
      for (const obj of this.store.list(type, namespace)) {
        if (filter.labels(labelsOf(obj)) && filter.fields(obj)) stream.send('ADDED', obj);
      }
      if (sendInitialEvents) stream.bookmark(this.store.currentResourceVersion(), { 'k8s.io/initial-events-end': 'true' });
    } else {
      for (const event of replay) stream.deliver(event);
    }
    const timeoutSeconds = Number(q.get('timeoutSeconds') ?? '0');
    if (timeoutSeconds > 0) stream.endAfter(timeoutSeconds * 1000);
    const interval = this.options.bookmarkIntervalMs ?? 0;
    if (interval > 0 && stream.allowBookmarks) stream.every(interval, () => stream.bookmark(this.store.currentResourceVersion()));
    req.socket.setTimeout(0);
  }

  private authorize(verb: string, type: ResourceType, namespace: string | undefined, count = true): void {
    if (count) this.count(verb, type.plural);
    if (!this.forbidden.get(type.plural)?.has(verb)) return;
    const where = namespace === undefined ? 'at the cluster scope' : `in the namespace "${namespace}"`;
    throw new ApiError(
      403,
      'Forbidden',
      `${type.group === '' ? type.plural : `${type.plural}.${type.group}`} is forbidden: User "system:serviceaccount:default:llm-router" cannot ${verb} resource "${type.plural}" in API group "${type.group}" ${where}`,
      { ...(type.group ? { group: type.group } : {}), kind: type.plural },
    );
  }

  private count(verb: string, resource: string): void {
    const key = `${verb} ${resource}`;
    this.requests[key] = (this.requests[key] ?? 0) + 1;
  }

  /** A discovery document for the path, null for an unknown discovery path, undefined when it is not a discovery path. */
  private discovery(pathname: string, segs: string[]): object | null | undefined {
    if (pathname === '/version') return VERSION_INFO;
    if (pathname === '/openapi/v2' || pathname === '/openapi/v3' || pathname.startsWith('/openapi/')) return null;
    if (segs[0] === 'api' && segs.length === 1) {
      return {
        kind: 'APIVersions',
        versions: ['v1'],
        serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress: `127.0.0.1:${this.port}` }],
      };
    }
    if (segs[0] === 'api' && segs.length === 2) return this.registry.resourceList('', segs[1]!) ?? null;
    if (segs[0] === 'apis' && segs.length === 1) return this.registry.groupList();
    if (segs[0] === 'apis' && segs.length === 2) return this.registry.groups().includes(segs[1]!) ? this.registry.group(segs[1]!) : null;
    if (segs[0] === 'apis' && segs.length === 3) return this.registry.resourceList(segs[1]!, segs[2]!) ?? null;
    return undefined;
  }

  private resourceRequest(segs: string[]): ResourceRequest | undefined {
    let group: string;
    let version: string;
    let rest: string[];
    if (segs[0] === 'api' && segs.length >= 3) {
      group = '';
      version = segs[1]!;
      rest = segs.slice(2);
    } else if (segs[0] === 'apis' && segs.length >= 4) {
      group = segs[1]!;
      version = segs[2]!;
      rest = segs.slice(3);
    } else {
      return undefined;
    }
    const namespacedPath = rest[0] === 'namespaces' && rest.length >= 3 && !(group === '' && rest.length === 3 && rest[2] === 'status');
    const [namespace, plural, name, subresource, extra] = namespacedPath
      ? [rest[1], rest[2], rest[3], rest[4], rest[5]]
      : [undefined, rest[0], rest[1], rest[2], rest[3]];
    const type = plural === undefined ? undefined : this.registry.byPath(group, version, plural);
    if (type === undefined || extra !== undefined) return undefined;
    if (!type.namespaced && namespace !== undefined) return undefined;
    if (type.namespaced && namespace === undefined && name !== undefined) return undefined;
    if (subresource !== undefined && subresource !== 'status' && subresource !== 'scale') return undefined;
    return { type, namespace, name, subresource };
  }

  private typeOf(obj: object): ResourceType {
    const { apiVersion, kind } = obj as { apiVersion?: string; kind?: string };
    if (typeof kind !== 'string') throw new ApiError(400, 'BadRequest', "Object 'Kind' is missing");
    const type = this.registry.byKind(apiVersion, kind);
    if (type === undefined) throw new ApiError(404, 'NotFound', `no matches for kind "${kind}" in version "${apiVersion ?? ''}"`);
    return type;
  }

  private typeNamed(name: string): ResourceType {
    const type = this.registry.byName(name);
    if (type === undefined) throw new ApiError(404, 'NotFound', `the server doesn't have a resource type "${name}"`);
    return type;
  }
}

export function startFakeKube(options: FakeKubeOptions = {}): Promise<FakeKube> {
  return FakeKube.start(options);
}

function kubeconfig(server: string): string {
  return [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    '- name: fake-kube',
    '  cluster:',
    `    server: ${server}`,
    // client-node refuses an http:// server unless the cluster entry skips TLS verification
    '    insecure-skip-tls-verify: true',
    'users:',
    '- name: fake-kube',
    '  user:',
    '    token: fake-kube-token',
    'contexts:',
    '- name: fake-kube',
    '  context:',
    '    cluster: fake-kube',
    '    user: fake-kube',
    '    namespace: default',
    'current-context: fake-kube',
    '',
  ].join('\n');
}

function expired(requested: string, oldest: number): JsonObject {
  return statusBody(410, 'Expired', `too old resource version: ${requested || '0'} (${oldest})`);
}

function sendJson(res: ServerResponse, code: number, body: object): void {
  const text = JSON.stringify(body);
  res.writeHead(code, {
    'Content-Type': 'application/json',
    'Content-Length': Buffer.byteLength(text),
    'Cache-Control': 'no-cache, private',
  });
  res.end(text);
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY) throw new ApiError(413, 'BadRequest', 'the request body is too large');
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

async function readJson(req: IncomingMessage): Promise<Json> {
  const raw = await readBody(req);
  const contentType = (req.headers['content-type'] ?? '').split(';')[0]!.trim();
  if (contentType === 'application/vnd.kubernetes.protobuf') {
    throw new ApiError(
      415,
      'UnsupportedMediaType',
      'fake-kube does not decode protobuf bodies (kubectl create namespace/deployment, kubectl run send them): use kubectl create -f or apply -f with YAML or JSON',
    );
  }
  return (contentType.endsWith('yaml') ? parseYaml(raw) : JSON.parse(raw)) as Json;
}

function asObject(v: Json): JsonObject {
  if (v === null || typeof v !== 'object' || Array.isArray(v))
    throw new ApiError(400, 'BadRequest', 'the request body must be a JSON object');
  return v;
}

function checkKind(type: ResourceType, body: JsonObject): void {
  if (body.kind !== undefined && body.kind !== type.kind) {
    throw new ApiError(400, 'BadRequest', `the kind in the data (${String(body.kind)}) does not match the expected kind (${type.kind})`);
  }
  if (body.apiVersion !== undefined && body.apiVersion !== apiVersionOf(type)) {
    throw new ApiError(
      400,
      'BadRequest',
      `the API version in the data (${String(body.apiVersion)}) does not match the expected API version (${apiVersionOf(type)})`,
    );
  }
}

function scaleOf(obj: KubeObject): JsonObject {
  const spec = (obj.spec ?? {}) as JsonObject;
  const status = (obj.status ?? {}) as JsonObject;
  const selector = (spec.selector ?? {}) as JsonObject;
  const matchLabels = (selector.matchLabels ?? {}) as Record<string, string>;
  return {
    kind: 'Scale',
    apiVersion: 'autoscaling/v1',
    metadata: {
      name: obj.metadata.name ?? null,
      namespace: obj.metadata.namespace ?? null,
      uid: obj.metadata.uid ?? null,
      resourceVersion: obj.metadata.resourceVersion ?? null,
      creationTimestamp: obj.metadata.creationTimestamp ?? null,
    },
    spec: { replicas: spec.replicas ?? 0 },
    status: {
      replicas: status.replicas ?? 0,
      selector: Object.entries(matchLabels)
        .map(([k, v]) => `${k}=${v}`)
        .join(','),
    },
  };
}

// like the real API server: custom resources do not support strategic merge patch
const supportsStrategicMerge = (type: ResourceType): boolean => type.group === '' || type.group === 'apps';

function patchDocument(contentType: string, current: Json, raw: string, strategic: boolean): Json {
  switch (contentType) {
    case 'application/merge-patch+json':
      return mergePatch(current, JSON.parse(raw) as Json);
    case 'application/strategic-merge-patch+json':
      if (!strategic) break;
      return strategicMergePatch(current, JSON.parse(raw) as Json);
    case 'application/json-patch+json':
      return jsonPatch(current, JSON.parse(raw));
  }
  throw new ApiError(
    415,
    'UnsupportedMediaType',
    `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml${strategic ? ', application/strategic-merge-patch+json' : ''}`,
  );
}

function wantsTable(req: IncomingMessage): boolean {
  return (req.headers.accept ?? '').includes('as=Table');
}

/** The server-side printing kubectl asks for with `Accept: ...;as=Table`. */
function table(type: ResourceType, items: KubeObject[], rv: number): JsonObject {
  const age = (o: KubeObject): string => {
    const s = Math.max(0, Math.round((Date.now() - Date.parse(String(o.metadata.creationTimestamp))) / 1000));
    return s < 120 ? `${s}s` : s < 7200 ? `${Math.round(s / 60)}m` : `${Math.round(s / 3600)}h`;
  };
  const column = (name: string, format = ''): JsonObject => ({ name, type: 'string', format, description: '', priority: 0 });
  const status = (o: KubeObject): string => {
    if (type === PODS)
      return o.metadata.deletionTimestamp !== undefined ? 'Terminating' : String((o.status as JsonObject | undefined)?.phase ?? '');
    if (type.scalable)
      return `${String((o.status as JsonObject | undefined)?.readyReplicas ?? 0)}/${String((o.spec as JsonObject | undefined)?.replicas ?? 0)}`;
    return String((o.status as JsonObject | undefined)?.phase ?? '');
  };
  const statusColumn = type === PODS || type === NAMESPACES ? 'Status' : type.scalable ? 'Ready' : 'Status';
  return {
    kind: 'Table',
    apiVersion: 'meta.k8s.io/v1',
    metadata: { resourceVersion: String(rv) },
    columnDefinitions: [column('Name', 'name'), column(statusColumn), column('Age')],
    rows: items.map((o) => ({
      cells: [String(o.metadata.name), status(o), age(o)],
      object: { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: o.metadata },
    })),
  };
}
