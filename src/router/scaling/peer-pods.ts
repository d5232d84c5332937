// Router peers found in Kubernetes: the Ready pods of the router's own Deployment (--scaler-peer-selector), each
// reached at its admin port (the pod annotation llm-router/admin-port, else this router's own admin or main port).
import { bracketHost } from '../util/host.js';
import type { KubeConfig, KubernetesListObject, KubernetesObject } from '@kubernetes/client-node';
import { kubernetesClient } from '../discovery/kubernetes/client.js';
import { podReady, type PodLike } from '../discovery/kubernetes/desired.js';
import { Reflector } from '../discovery/kubernetes/reflector.js';
import type { Logger } from '../util/log.js';
import type { PeerList } from './peers.js';

const ADMIN_PORT_ANNOTATION = 'llm-router/admin-port';

/** Pure: the admin base URLs of the Ready pods among `pods`. */
export function peerUrls(pods: readonly PodLike[], defaultPort: number): string[] {
  const urls: string[] = [];
  for (const pod of pods) {
    const ip = pod.status?.podIP;
    if (!ip || !podReady(pod) || pod.metadata?.deletionTimestamp) continue;
    const raw = pod.metadata?.annotations?.[ADMIN_PORT_ANNOTATION];
    const n = Number(raw);
    const port = raw !== undefined && Number.isInteger(n) && n > 0 && n < 65536 ? n : defaultPort;
    urls.push(`http://${bracketHost(ip)}:${port}`);
  }
  return urls.sort();
}

export interface PeerPodsOptions {
  readonly kubeConfig: KubeConfig;
  readonly namespace: string;
  readonly labelSelector: string;
  readonly defaultPort: number;
  readonly resyncMs: number;
}

export class PeerPods implements PeerList {
  private readonly pods: Reflector<KubernetesObject>;
  private current: string[] = [];

  constructor(opts: PeerPodsOptions, log: Logger) {
    const core = opts.kubeConfig.makeApiClient(kubernetesClient().CoreV1Api);
    this.pods = new Reflector({
      resource: 'router-pods',
      path: `/api/v1/namespaces/${opts.namespace}/pods`,
      list: async () =>
        (await core.listNamespacedPod({
          namespace: opts.namespace,
          labelSelector: opts.labelSelector,
        })) as KubernetesListObject<KubernetesObject>,
      kubeConfig: opts.kubeConfig,
      labelSelector: opts.labelSelector,
      resyncMs: opts.resyncMs,
      onChange: () => {
        this.current = peerUrls(this.pods.objects() as PodLike[], opts.defaultPort);
      },
      onSynced: () => undefined,
      log,
    });
    this.pods.start();
  }

  urls(): readonly string[] {
    return this.current;
  }

  stop(): void {
    this.pods.stop();
  }
}
