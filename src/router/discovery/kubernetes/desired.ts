// From the present pods and workloads to what the catalog needs: endpoints (from pods) and declared models
// (from workloads, at any replica count). Pure: the same objects give the same answer on every router replica.
import type { EndpointSpec } from '../../core/endpoint.js';
import type { Declaration } from '../../catalog/catalog.js';
import { declaredModelNames, PORT_ANNOTATION, type ObjectMetaLike, type PodShape } from './model-names.js';

export interface PodLike extends PodShape {
  readonly metadata?: ObjectMetaLike & { readonly deletionTimestamp?: unknown };
  readonly status?: {
    readonly podIP?: string;
    readonly phase?: string;
    readonly conditions?: readonly { readonly type?: string; readonly status?: string }[];
  };
}

export interface WorkloadLike {
  readonly kind?: string;
  readonly metadata?: ObjectMetaLike;
  readonly spec?: {
    readonly replicas?: number;
    readonly template?: PodShape;
    /** LeaderWorkerSet */
    readonly leaderWorkerTemplate?: { readonly leaderTemplate?: PodShape; readonly workerTemplate?: PodShape };
  };
}

export interface DesiredOptions {
  readonly port: number;
  /** http or https, unless the pod's llm-router/scheme annotation says otherwise */
  readonly scheme: 'http' | 'https';
  readonly modelLabel: string;
}

/** a pod's engine speaks https (or http) whatever --k8s-engine-scheme says */
const SCHEME_ANNOTATION = 'llm-router/scheme';

export interface Desired {
  readonly endpoints: EndpointSpec[];
  readonly declarations: Declaration[];
  /** objects that matched the selector but name no model, for a warning */
  readonly unnamed: string[];
}

export function podReady(pod: PodLike): boolean {
  return (pod.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True');
}

function podPort(pod: PodLike, fallback: number): number {
  const raw = pod.metadata?.annotations?.[PORT_ANNOTATION];
  const n = Number(raw);
  return raw !== undefined && Number.isInteger(n) && n > 0 && n < 65536 ? n : fallback;
}

function podScheme(pod: PodLike, fallback: 'http' | 'https'): 'http' | 'https' {
  const raw = pod.metadata?.annotations?.[SCHEME_ANNOTATION]?.trim().toLowerCase();
  return raw === 'http' || raw === 'https' ? raw : fallback;
}

export function hostOf(ip: string): string {
  return ip.includes(':') ? `[${ip}]` : ip;
}

function templateOf(w: WorkloadLike): PodShape | undefined {
  return w.spec?.template ?? w.spec?.leaderWorkerTemplate?.leaderTemplate ?? w.spec?.leaderWorkerTemplate?.workerTemplate;
}

function nameOf(kind: string, meta: ObjectMetaLike | undefined): string {
  return `${kind}/${meta?.namespace ?? ''}/${meta?.name ?? ''}`;
}

export function desiredState(pods: readonly PodLike[], workloads: readonly WorkloadLike[], opts: DesiredOptions): Desired {
  const endpoints: EndpointSpec[] = [];
  const declarations: Declaration[] = [];
  const unnamed: string[] = [];
  for (const pod of pods) {
    const ip = pod.status?.podIP;
    if (!ip || pod.status?.phase === 'Failed' || pod.status?.phase === 'Succeeded') continue;
    const terminating = pod.metadata?.deletionTimestamp !== undefined && pod.metadata?.deletionTimestamp !== null;
    // a terminating pod stays as a draining endpoint so that its streams can finish; a not-ready one is not an endpoint
    if (!terminating && !podReady(pod)) continue;
    const names = declaredModelNames(pod, opts.modelLabel);
    if (!names) {
      unnamed.push(nameOf('Pod', pod.metadata));
      continue;
    }
    endpoints.push({
      id: `${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}`,
      url: `${podScheme(pod, opts.scheme)}://${hostOf(ip)}:${podPort(pod, opts.port)}`,
      models: [...names.names],
      ...(terminating ? { draining: true } : {}),
    });
  }
  for (const w of workloads) {
    const template = templateOf(w);
    const names = template ? declaredModelNames(template, opts.modelLabel, w.metadata) : undefined;
    if (!names) {
      unnamed.push(nameOf(w.kind ?? 'Workload', w.metadata));
      continue;
    }
    const replicas = w.spec?.replicas ?? 1;
    for (const model of names.names) declarations.push({ model, replicasWanted: replicas > 0 });
  }
  endpoints.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return { endpoints, declarations, unnamed };
}
