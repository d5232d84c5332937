// Kubernetes discovery: endpoints from ready pods, declared models from Deployments, StatefulSets and
// LeaderWorkerSets at any replica count. Level-triggered: every event and every full list feed one reconcile
// that computes the desired set from scratch and hands it to the catalog whole.
import { existsSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { StartupError } from '../../core/startup-error.js';
import type { KubeConfig, KubernetesListObject, KubernetesObject } from '@kubernetes/client-node';
import { kubernetesClient } from './client.js';
import type { ModelCatalog } from '../../catalog/catalog.js';
import type { Logger } from '../../util/log.js';
import { desiredState, type KvEventsPorts, type PodLike, type WorkloadLike } from './desired.js';
import { FailureLog, Reflector, type ReflectorHealth } from './reflector.js';

export const SOURCE = 'kubernetes';
const SA_NAMESPACE_FILE = '/var/run/secrets/kubernetes.io/serviceaccount/namespace';

export interface KubernetesSourceOptions {
  readonly namespace: string | undefined;
  readonly labelSelector: string | undefined;
  readonly port: number;
  readonly scheme: 'http' | 'https';
  readonly modelLabel: string;
  readonly resyncMs: number;
  /** kvaware: each pod's KV-cache event ports unless annotated; undefined = no event sources */
  readonly kvEvents?: KvEventsPorts | undefined;
  /** tests and tools may pass a ready KubeConfig; otherwise in-cluster, then KUBECONFIG / ~/.kube/config */
  readonly kubeConfig?: KubeConfig;
}

export interface DiscoveryObserver {
  /** a list or watch failed (reason: forbidden, connection, http-NNN) */
  error(resource: string, reason: string): void;
}

/**
 * In a pod: its service account. Elsewhere: $KUBECONFIG, else ~/.kube/config. With none of them client-node would
 * quietly talk to http://localhost:8080 and fail on every request; the router says what is missing instead.
 */
export function loadKubeConfig(why = '--service-discovery k8s'): KubeConfig {
  const kc = new (kubernetesClient().KubeConfig)();
  if (process.env.KUBERNETES_SERVICE_HOST) {
    kc.loadFromCluster();
    return kc;
  }
  const files = (process.env.KUBECONFIG ?? '').split(path.delimiter).filter(Boolean);
  const candidates = files.length > 0 ? files : [path.join(os.homedir(), '.kube', 'config')];
  if (!candidates.some((f) => existsSync(f))) {
    throw new StartupError(
      `${why} needs access to a Kubernetes API server, and there is none: not in a pod (no service account) and no kubeconfig (${files.length > 0 ? `KUBECONFIG=${process.env.KUBECONFIG} does not exist` : 'KUBECONFIG is not set and ~/.kube/config does not exist'})`,
      2,
    );
  }
  kc.loadFromDefault();
  return kc;
}

/** --k8s-namespace, else the pod's own namespace, else the kubeconfig context's, else default. */
export function resolveNamespace(flag: string | undefined, kc: KubeConfig): string {
  if (flag) return flag;
  try {
    const own = readFileSync(SA_NAMESPACE_FILE, 'utf8').trim();
    if (own) return own;
  } catch {
    // not in a cluster
  }
  return kc.getContextObject(kc.getCurrentContext())?.namespace || 'default';
}

function asList<T extends KubernetesObject>(value: unknown): KubernetesListObject<T> {
  return value as KubernetesListObject<T>;
}

export class KubernetesSource {
  readonly namespace: string;
  private readonly reflectors: Reflector<KubernetesObject>[];
  private readonly pods: Reflector<KubernetesObject>;
  private readonly workloads: Reflector<KubernetesObject>[];
  private pendingSync: Set<string>;
  private reconcileQueued = false;
  /** objects (and problems) warned about once */
  private warned = new Set<string>();

  constructor(
    private readonly catalog: ModelCatalog,
    private readonly opts: KubernetesSourceOptions,
    private readonly log: Logger,
    private readonly onSynced: () => void,
    private readonly observer?: DiscoveryObserver,
  ) {
    const kc = opts.kubeConfig ?? loadKubeConfig();
    const ns = resolveNamespace(opts.namespace, kc);
    this.namespace = ns;
    const k8s = kubernetesClient();
    const core = kc.makeApiClient(k8s.CoreV1Api);
    const apps = kc.makeApiClient(k8s.AppsV1Api);
    const custom = kc.makeApiClient(k8s.CustomObjectsApi);
    const selector = opts.labelSelector || undefined;
    const sel = selector ? { labelSelector: selector } : {};
    const failures = new FailureLog(log);
    const make = (
      resource: string,
      path: string,
      list: () => Promise<KubernetesListObject<KubernetesObject>>,
    ): Reflector<KubernetesObject> =>
      new Reflector({
        resource,
        path,
        list,
        kubeConfig: kc,
        labelSelector: selector,
        resyncMs: opts.resyncMs,
        onChange: () => this.queueReconcile(),
        onSynced: () => this.synced(resource),
        onError: (r, reason) => this.observer?.error(r, reason),
        log,
        failures,
      });
    this.pods = make('pods', `/api/v1/namespaces/${ns}/pods`, async () => asList(await core.listNamespacedPod({ namespace: ns, ...sel })));
    this.workloads = [
      make('deployments', `/apis/apps/v1/namespaces/${ns}/deployments`, async () =>
        asList(await apps.listNamespacedDeployment({ namespace: ns, ...sel })),
      ),
      make('statefulsets', `/apis/apps/v1/namespaces/${ns}/statefulsets`, async () =>
        asList(await apps.listNamespacedStatefulSet({ namespace: ns, ...sel })),
      ),
      make('leaderworkersets', `/apis/leaderworkerset.x-k8s.io/v1/namespaces/${ns}/leaderworkersets`, async () =>
        asList(
          await custom.listNamespacedCustomObject({
            group: 'leaderworkerset.x-k8s.io',
            version: 'v1',
            namespace: ns,
            plural: 'leaderworkersets',
            ...sel,
          }),
        ),
      ),
    ];
    this.reflectors = [this.pods, ...this.workloads];
    this.pendingSync = new Set(['pods', 'deployments', 'statefulsets', 'leaderworkersets']);
  }

  start(): void {
    for (const r of this.reflectors) r.start();
  }

  stop(): void {
    for (const r of this.reflectors) r.stop();
  }

  health(): Record<string, ReflectorHealth> {
    const names = ['pods', 'deployments', 'statefulsets', 'leaderworkersets'];
    return Object.fromEntries(this.reflectors.map((r, i) => [names[i], r.health()]));
  }

  private synced(resource: string): void {
    this.pendingSync.delete(resource);
    if (this.pendingSync.size === 0) {
      this.reconcile();
      this.onSynced();
    }
  }

  private queueReconcile(): void {
    if (this.reconcileQueued) return;
    this.reconcileQueued = true;
    setImmediate(() => {
      this.reconcileQueued = false;
      this.reconcile();
    });
  }

  /** Computes the whole desired set from the stores and hands it to the catalog, which diffs it. */
  private reconcile(): void {
    // before every kind has listed once, a partial picture could declare a model unknown (404) that exists
    if (this.pendingSync.size > 0) return;
    const workloads: WorkloadLike[] = [];
    for (const r of this.workloads) workloads.push(...(r.objects() as WorkloadLike[]));
    const desired = desiredState(this.pods.objects() as PodLike[], workloads, {
      port: this.opts.port,
      scheme: this.opts.scheme,
      modelLabel: this.opts.modelLabel,
      kvEvents: this.opts.kvEvents,
    });
    for (const name of desired.unnamed) {
      if (this.warned.has(name)) continue;
      this.warned.add(name);
      this.log.warn(
        { object: name },
        `${name} matches the selector but names no model: add the llm-router/models annotation, the model label, or --served-model-name`,
      );
    }
    for (const { object, why } of desired.invalid) {
      const key = `${object} ${why}`;
      if (this.warned.has(key)) continue;
      this.warned.add(key);
      this.log.warn({ object }, `${object}: ${why}`);
    }
    this.catalog.setDeclarations(SOURCE, desired.declarations);
    this.catalog.setAdapterDeclarations(SOURCE, desired.adapters);
    this.catalog.setEndpoints(SOURCE, desired.endpoints);
  }
}
