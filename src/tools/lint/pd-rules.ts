// The P/D rules of `llm-router lint`: what keeps the router from serving a model through its prefill/decode pair.
// The router reads an engine's role from the llm-d.ai/role label only, probes a decode pod where its traffic goes
// unless llm-router/probe-port says otherwise, and needs a decode side for every model with a prefill side.
import { declaredModelNames, PORT_ANNOTATION } from '../../router/discovery/kubernetes/model-names.js';
import {
  PD_PROTOCOL_ANNOTATION,
  pdProtocolOf,
  portAnnotation,
  PROBE_PORT_ANNOTATION,
  ROLE_LABEL,
  roleOf,
} from '../../router/discovery/kubernetes/pd-labels.js';
import type { EndpointRole } from '../../router/core/pd.js';
import type { KubeObject, NodePath } from './load.js';
import { listeningPorts, podRole, type ContainerSpec, type PodTemplate } from './pods.js';

/** An annotation's place in metadata (the object's or the pod template's). */
export function annotationPath(key: string): NodePath {
  return ['metadata', 'annotations', key];
}

const TEMPLATE_LABELS: Place = { of: 'template', path: ['metadata', 'labels'] };

/** the router's default --k8s-port: where it sends traffic to a pod without llm-router/port */
const ROUTER_DEFAULT_PORT = 8000;

/**
 * Where a finding points: a node of the object itself, of the pod template, or of the engine container (paths as in
 * load.ts' NodePath, from that node); the engine container when not said.
 */
export interface Place {
  readonly of: 'object' | 'template' | 'engine';
  readonly path: NodePath;
}

export type Report = (rule: string, why: string, fix: string, at?: Place) => void;

/** One engine workload (or bare Pod) as the router sees it: its models and its role. */
export interface PdWorkload {
  readonly models: readonly string[];
  /** from llm-d.ai/role; undefined for a value the router does not route to */
  readonly role: EndpointRole | undefined;
  /** the label is there, or its absence was reported already */
  readonly settled: boolean;
  readonly report: Report;
}

/** The checks of one engine's pod template: its role label, its P/D protocol annotation, where the router probes it. */
export function checkPdEngine(
  object: KubeObject,
  template: PodTemplate,
  engine: ContainerSpec,
  sidecars: readonly ContainerSpec[],
  enginePort: number,
  modelLabel: string,
  report: Report,
): PdWorkload | undefined {
  const labels = template.metadata?.labels;
  const annotations = { ...object.metadata?.annotations, ...template.metadata?.annotations };
  for (const [of, a] of [
    ['object', object.metadata?.annotations],
    ['template', template.metadata?.annotations],
  ] as const) {
    const invalid = pdProtocolOf(a).invalid;
    if (invalid !== undefined)
      report(
        'pd-protocol-invalid',
        `${PD_PROTOCOL_ANNOTATION}: ${JSON.stringify(invalid)} is no protocol the router speaks; it is ignored and --pd-protocol applies`,
        `set ${PD_PROTOCOL_ANNOTATION} to vllm-nixl, llm-d-sidecar or sglang`,
        { of, path: annotationPath(PD_PROTOCOL_ANNOTATION) },
      );
  }
  const role = roleOf(labels);
  const labelled = labels?.[ROLE_LABEL] !== undefined;
  const inferred = podRole(template, engine);
  if (!labelled && inferred !== 'standalone') {
    report(
      'pd-role-missing',
      `this engine is a ${inferred} engine (by its labels or arguments), but the router reads roles from ${ROLE_LABEL} only: it counts this one as serving whole requests and sends them to it`,
      `label the pod template ${ROLE_LABEL}: ${inferred}`,
      TEMPLATE_LABELS,
    );
  }
  if (role === 'decode' || (role === 'both' && inferred === 'decode')) {
    const traffic = portAnnotation(annotations, PORT_ANNOTATION) ?? ROUTER_DEFAULT_PORT;
    const sidecar = traffic !== enginePort ? sidecars.find((c) => listeningPorts(c).includes(traffic)) : undefined;
    const probePort = portAnnotation(annotations, PROBE_PORT_ANNOTATION);
    if (sidecar && probePort === undefined) {
      report(
        'pd-decode-probed-through-sidecar',
        `the router sends this decode pod's traffic to sidecar ${sidecar.name ?? '(unnamed)'} on port ${traffic}, and probes it there too: it sees the sidecar, not whether the engine on ${enginePort} has loaded the model`,
        `annotate the pod template ${PROBE_PORT_ANNOTATION}: "${enginePort}" so the router probes the engine itself`,
        { of: 'template', path: ['metadata', 'annotations'] },
      );
    } else if (probePort !== undefined && probePort !== enginePort) {
      report(
        'probe-port-mismatch',
        `${PROBE_PORT_ANNOTATION} is ${probePort}, but the engine listens on ${enginePort}: the router probes the wrong port`,
        `set ${PROBE_PORT_ANNOTATION} to "${enginePort}"`,
        {
          of: template.metadata?.annotations?.[PROBE_PORT_ANNOTATION] !== undefined ? 'template' : 'object',
          path: annotationPath(PROBE_PORT_ANNOTATION),
        },
      );
    }
  }
  const names = declaredModelNames(template, modelLabel, object.metadata);
  if (!names) return undefined;
  return { models: names.names, role, settled: labelled || inferred !== 'standalone', report };
}

/** The checks across the workloads of each model: every one labelled alike, and a decode side for a prefill side. */
export function checkPdModels(workloads: readonly PdWorkload[]): void {
  const byModel = new Map<string, PdWorkload[]>();
  for (const w of workloads) for (const m of w.models) byModel.set(m, [...(byModel.get(m) ?? []), w]);
  for (const [model, ws] of byModel) {
    const pd = ws.filter((w) => w.role === 'prefill' || w.role === 'decode');
    if (pd.length === 0) continue;
    for (const w of ws) {
      if (w.settled) continue;
      w.report(
        'pd-role-missing',
        `another workload of ${JSON.stringify(model)} is labelled ${ROLE_LABEL}: ${pd[0]?.role}; this one has no role, so the router counts it as serving whole requests`,
        `label its pod template ${ROLE_LABEL} (prefill, decode, or prefill-decode if it is meant to serve whole requests)`,
        TEMPLATE_LABELS,
      );
    }
    if (ws.some((w) => w.role === 'decode' || w.role === 'both')) continue;
    for (const w of ws.filter((x) => x.role === 'prefill')) {
      w.report(
        'pd-prefill-without-decode',
        `${JSON.stringify(model)} has this prefill workload and no decode workload: the router can serve none of its requests (a prefill engine does not decode)`,
        `add a workload of ${JSON.stringify(model)} labelled ${ROLE_LABEL}: decode (or lint it together with this one)`,
        TEMPLATE_LABELS,
      );
    }
  }
}
