// The Kubernetes client library, loaded only by a router that talks to Kubernetes. Importing it costs about 0.8 s of
// CPU (thousands of generated model modules): every router start paid it, with static engines too, and so did every
// simulator, lint and probe process. `loadKubernetesClient()` runs once before the first use (serve, the app's start);
// the code that uses it then reaches it synchronously.
import type * as ClientNode from '@kubernetes/client-node';

export type KubernetesClient = typeof ClientNode;

let loaded: KubernetesClient | undefined;

export async function loadKubernetesClient(): Promise<KubernetesClient> {
  loaded ??= await import('@kubernetes/client-node');
  return loaded;
}

/** The library, once loadKubernetesClient() has resolved; calling it before is a programming error. */
export function kubernetesClient(): KubernetesClient {
  if (!loaded) throw new Error('the Kubernetes client is used before loadKubernetesClient() resolved');
  return loaded;
}

/** Whether a router with these settings talks to Kubernetes: pod discovery or peer replicas found by label. */
export function usesKubernetes(config: {
  readonly kubernetes?: unknown;
  readonly scaling: { readonly peerSelector?: string | undefined };
}): boolean {
  return config.kubernetes !== undefined || Boolean(config.scaling.peerSelector);
}
