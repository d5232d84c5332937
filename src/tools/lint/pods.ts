// What the linter knows about a pod (template): which container runs the inference engine, which is the
// `llm-router probe` sidecar, which are other sidecars (a P/D routing proxy), and on which ports each listens.
import { containerWords, portFromArgs, type ContainerLike } from '../../router/discovery/kubernetes/model-names.js';
import type { KubeObject, NodePath } from './load.js';
import type { EngineKind } from '../../router/core/engine.js';

/** The engines lint knows the command lines and ports of (an OpenAI-compatible service has no known shape). */
export type ManifestEngineKind = Exclude<EngineKind, 'openai'>;
export type Role = 'standalone' | 'prefill' | 'decode';

export interface ProbeSpec {
  readonly httpGet?: { readonly path?: string; readonly port?: number | string; readonly host?: string };
  readonly tcpSocket?: { readonly port?: number | string };
  readonly grpc?: { readonly port?: number };
  readonly exec?: { readonly command?: readonly string[] };
  readonly initialDelaySeconds?: number;
  readonly periodSeconds?: number;
  readonly failureThreshold?: number;
}

export interface ContainerSpec extends ContainerLike {
  readonly name?: string;
  readonly image?: string;
  readonly ports?: readonly { readonly name?: string; readonly containerPort?: number }[];
  readonly env?: readonly { readonly name?: string; readonly value?: string; readonly valueFrom?: unknown }[];
  readonly envFrom?: readonly unknown[];
  readonly livenessProbe?: ProbeSpec;
  readonly readinessProbe?: ProbeSpec;
  readonly startupProbe?: ProbeSpec;
  readonly restartPolicy?: string;
}

export interface PodTemplate {
  readonly metadata?: { readonly labels?: Record<string, string>; readonly annotations?: Record<string, string> };
  readonly spec?: { readonly containers?: readonly ContainerSpec[]; readonly initContainers?: readonly ContainerSpec[] };
}

/**
 * The pod templates of an object: a Pod itself, a workload's template, both templates of a LeaderWorkerSet; `path`:
 * where the template is in the object.
 */
export function podTemplates(object: KubeObject): { where: string; template: PodTemplate; path: NodePath }[] {
  const spec = (object.spec ?? {}) as Record<string, unknown>;
  switch (object.kind) {
    case 'Pod':
      return [{ where: '', template: object as PodTemplate, path: [] }];
    case 'Deployment':
    case 'StatefulSet':
    case 'ReplicaSet':
    case 'DaemonSet':
    case 'Job':
      return spec.template ? [{ where: '', template: spec.template as PodTemplate, path: ['spec', 'template'] }] : [];
    case 'CronJob': {
      const job = (spec.jobTemplate as { spec?: { template?: PodTemplate } } | undefined)?.spec?.template;
      return job ? [{ where: '', template: job, path: ['spec', 'jobTemplate', 'spec', 'template'] }] : [];
    }
    case 'LeaderWorkerSet': {
      const lwt = (spec.leaderWorkerTemplate ?? {}) as { leaderTemplate?: PodTemplate; workerTemplate?: PodTemplate };
      const out: { where: string; template: PodTemplate; path: NodePath }[] = [];
      const at = (key: string): NodePath => ['spec', 'leaderWorkerTemplate', key];
      if (lwt.leaderTemplate) out.push({ where: 'leader', template: lwt.leaderTemplate, path: at('leaderTemplate') });
      if (lwt.workerTemplate)
        out.push({ where: lwt.leaderTemplate ? 'worker' : '', template: lwt.workerTemplate, path: at('workerTemplate') });
      return out;
    }
    default:
      return [];
  }
}

/** Where a container is in its pod template: spec.containers[i], or spec.initContainers[i] (a native sidecar). */
export function containerPath(template: PodTemplate, c: ContainerSpec): NodePath {
  const i = template.spec?.containers?.indexOf(c) ?? -1;
  if (i >= 0) return ['spec', 'containers', i];
  return ['spec', 'initContainers', template.spec?.initContainers?.indexOf(c) ?? 0];
}

/** The key of a container's arguments as written: `args`, else `command` (a shell line), else `args` (absent). */
export function argsKey(c: ContainerSpec): 'args' | 'command' {
  return c.args === undefined && c.command !== undefined ? 'command' : 'args';
}

export const WORKLOAD_KINDS = new Set(['Deployment', 'StatefulSet', 'LeaderWorkerSet']);

const IS_LLM_ROUTER = (c: ContainerSpec, words: readonly string[]): boolean =>
  /llm-router/.test(c.image ?? '') || words.some((w) => /(^|\/)llm-router$/.test(w) || /dist\/cli\/main\.js$/.test(w));

/** The engine a container runs, from its command line first, then its image. */
export function engineKind(c: ContainerSpec): ManifestEngineKind | undefined {
  const words = containerWords(c);
  if (IS_LLM_ROUTER(c, words)) return undefined;
  const line = words.join(' ');
  if (/(^|[\s/])vllm serve\b/.test(line) || line.includes('vllm.entrypoints.openai.api_server')) return 'vllm';
  if (line.includes('sglang.launch_server')) return 'sglang';
  if (line.includes('text-generation-launcher')) return 'tgi';
  // a container that sets its own command runs that command (e.g. a ray worker), not the image's engine entrypoint
  if (c.command && c.command.length > 0) return undefined;
  const image = c.image ?? '';
  if (/text-generation-inference/.test(image)) return 'tgi';
  if (/sglang/.test(image)) return 'sglang';
  if (/vllm/.test(image)) return 'vllm';
  return undefined;
}

/** An `llm-router probe` sidecar: the model-aware readiness endpoint of docs/operations.md. */
export function isProbeSidecar(c: ContainerSpec): boolean {
  const words = containerWords(c);
  return IS_LLM_ROUTER(c, words) && words.includes('probe');
}

const PROBE_SIDECAR_DEFAULT_PORT = 8090;

function flagValue(words: readonly string[], flag: string): string | undefined {
  for (let i = 0; i < words.length; i++) {
    const w = words[i] as string;
    if (w === flag) return words[i + 1];
    if (w.startsWith(flag + '=')) return w.slice(flag.length + 1);
  }
  return undefined;
}

/** Ports a container listens on: its declared containerPorts and its `--port`/`-port=` argument. */
export function listeningPorts(c: ContainerSpec): number[] {
  const words = containerWords(c);
  const ports = new Set<number>();
  for (const p of c.ports ?? []) if (typeof p.containerPort === 'number') ports.add(p.containerPort);
  const arg = portFromArgs(words) ?? Number(flagValue(words, '-port'));
  if (Number.isInteger(arg) && arg > 0) ports.add(arg);
  if (isProbeSidecar(c) && portFromArgs(words) === undefined) ports.add(PROBE_SIDECAR_DEFAULT_PORT);
  return [...ports];
}

/** The port of the engine a probe sidecar checks (from its --engine-url). */
export function probeSidecarEnginePort(c: ContainerSpec): number | undefined {
  const url = flagValue(containerWords(c), '--engine-url');
  if (url === undefined) return 8000;
  try {
    const u = new URL(url);
    return u.port ? Number(u.port) : u.protocol === 'https:' ? 443 : 80;
  } catch {
    return undefined;
  }
}

const ROLE_LABELS = ['llm-router/role', 'llm-d.ai/role', 'role', 'app.kubernetes.io/component'];

/** prefill / decode from the pod's labels or the engine's P/D arguments; standalone otherwise. */
export function podRole(template: PodTemplate, engine: ContainerSpec): Role {
  const labels = template.metadata?.labels ?? {};
  for (const key of ROLE_LABELS) {
    const v = labels[key]?.toLowerCase();
    if (v === 'prefill' || v === 'decode') return v;
  }
  const words = containerWords(engine);
  const mode = flagValue(words, '--disaggregation-mode');
  if (mode === 'prefill' || mode === 'decode') return mode;
  const kv = flagValue(words, '--kv-transfer-config') ?? '';
  if (kv.includes('kv_producer')) return 'prefill';
  if (kv.includes('kv_consumer')) return 'decode';
  return 'standalone';
}

const DEFAULT_PORT: Record<ManifestEngineKind, number> = { vllm: 8000, sglang: 30000, tgi: 80 };

/** Where the engine listens: its --port (or TGI's PORT env), else the role convention, else the engine's default. */
export function enginePort(
  engine: ContainerSpec,
  kind: ManifestEngineKind,
  role: Role,
  hasOtherSidecar: boolean,
): { port: number; from: string } {
  const arg = portFromArgs(containerWords(engine));
  if (arg !== undefined) return { port: arg, from: 'its --port argument' };
  const env = engine.env?.find((e) => e.name === 'PORT')?.value;
  if (kind === 'tgi' && env && Number.isInteger(Number(env))) return { port: Number(env), from: 'its PORT variable' };
  if (role === 'decode' && hasOtherSidecar) return { port: 8200, from: 'the decode convention (8200 behind a routing sidecar)' };
  if (role === 'prefill') return { port: 8000, from: 'the prefill convention (8000)' };
  return { port: DEFAULT_PORT[kind], from: `${kind}'s default port` };
}

/** A probe's port as a number: named ports resolve against the container's own ports, as the kubelet does. */
export function probePort(probe: ProbeSpec, container: ContainerSpec): { port: number | undefined; named?: string } {
  const raw = probe.httpGet?.port ?? probe.tcpSocket?.port ?? probe.grpc?.port;
  if (raw === undefined) return { port: undefined };
  if (typeof raw === 'number') return { port: raw };
  if (/^\d+$/.test(raw)) return { port: Number(raw) };
  const found = container.ports?.find((p) => p.name === raw)?.containerPort;
  return { port: found, named: raw };
}

export function describeProbe(probe: ProbeSpec, port: number | undefined): string {
  if (probe.httpGet) return `GET ${probe.httpGet.path ?? '/'} on port ${port ?? probe.httpGet.port}`;
  if (probe.tcpSocket) return `a TCP connect to port ${port ?? probe.tcpSocket.port}`;
  if (probe.grpc) return `a gRPC health check on port ${port ?? probe.grpc.port}`;
  if (probe.exec) return `exec ${(probe.exec.command ?? []).join(' ')}`;
  return 'no handler';
}
