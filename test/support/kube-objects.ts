// The Kubernetes objects the router's discovery reads, as tests put them in the fake API server: a Deployment that
// declares a model, and an engine Pod that serves one on 127.0.0.1 at the port named by its llm-router/port annotation.
import type { FakeKube } from './fake-kube/index.js';

/**
 * A Deployment labelled app=llm. The model it declares comes from the template's labels (`model`), the annotations
 * (llm-router/models) or the container args, as a test needs; the router does not read its selector.
 */
export function deployment(
  name: string,
  replicas: number,
  template: { labels?: Record<string, string>; annotations?: Record<string, string>; args?: string[] } = {},
  annotations?: Record<string, string>,
) {
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name, namespace: 'default', labels: { app: 'llm' }, ...(annotations ? { annotations } : {}) },
    spec: {
      replicas,
      selector: { matchLabels: { app: 'llm', deploy: name } },
      template: {
        metadata: {
          labels: { app: 'llm', deploy: name, ...template.labels },
          ...(template.annotations ? { annotations: template.annotations } : {}),
        },
        spec: { containers: [{ name: 'vllm', image: 'vllm/vllm-openai', args: template.args ?? [] }] },
      },
    },
  };
}

/** An engine Pod labelled app=llm and model=`model`, serving on `port` (llm-router/port). */
export function enginePod(
  name: string,
  model: string,
  port: number,
  extra: { labels?: Record<string, string>; annotations?: Record<string, string> } = {},
) {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace: 'default',
      labels: { app: 'llm', model, ...extra.labels },
      annotations: { 'llm-router/port': String(port), ...extra.annotations },
    },
    spec: { containers: [{ name: 'vllm', image: 'vllm/vllm-openai' }] },
  };
}

/** A bare Pod with these labels (no port, no model): for tests of the fake API server and of informers. */
export function labelledPod(name: string, labels: Record<string, string> = { app: 'x' }) {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: 'default', labels },
    spec: { containers: [{ name: 'engine', image: 'vllm' }] },
  };
}

/** Creates the pod, gives it the IP 127.0.0.1 and marks it Ready, as the kubelet would once it runs. */
export function addReady(
  kube: FakeKube,
  pod: { metadata: { name: string; namespace?: string; [key: string]: unknown }; [key: string]: unknown },
): void {
  const namespace = pod.metadata.namespace ?? 'default';
  kube.create(pod);
  kube.setPodIP(namespace, pod.metadata.name, '127.0.0.1');
  kube.setPodReady(namespace, pod.metadata.name, true);
}

/** A Ready engine pod for `model` on 127.0.0.1:`port`. */
export function addReadyPod(
  kube: FakeKube,
  name: string,
  model: string,
  port: number,
  extra: { labels?: Record<string, string>; annotations?: Record<string, string> } = {},
): void {
  addReady(kube, enginePod(name, model, port, extra));
}
