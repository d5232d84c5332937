// From the present pods and workloads to what the catalog needs: endpoints (from pods) and declared models
// (from workloads, at any replica count). Pure: the same objects give the same answer on every router replica.
import { bracketHost } from '../../util/host.js';
import type { EndpointSpec, KvEventsSource } from '../../core/endpoint.js';
import type { Declaration } from '../../catalog/catalog.js';
import { parseAdapterAnnotation, type AdapterDeclaration } from '../../core/lora.js';
import { parseTokenizerValue } from '../../core/tokenizer.js';
import { declaredModelNames, PORT_ANNOTATION, type ObjectMetaLike, type PodShape } from './model-names.js';
import {
  BOOTSTRAP_PORT_ANNOTATION,
  PD_PROTOCOL_ANNOTATION,
  pdProtocolOf,
  portAnnotation,
  PROBE_PORT_ANNOTATION,
  ROLE_LABEL,
  roleOf,
} from './pd-labels.js';

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
  /** kvaware: each pod's KV-cache event ports unless annotated; undefined = endpoints get no event source */
  readonly kvEvents?: KvEventsPorts | undefined;
}

export interface KvEventsPorts {
  /** the publisher port on each pod IP, unless its llm-router/kv-events-port annotation says */
  readonly port: number;
  /** the replay port, unless its llm-router/kv-events-replay-port annotation says; undefined = none */
  readonly replayPort: number | undefined;
}

/** a pod's engine speaks https (or http) whatever --k8s-engine-scheme says */
const SCHEME_ANNOTATION = 'llm-router/scheme';
export const KV_EVENTS_PORT_ANNOTATION = 'llm-router/kv-events-port';
export const KV_EVENTS_REPLAY_PORT_ANNOTATION = 'llm-router/kv-events-replay-port';
/** a data-parallel engine publishes rank r on port + r (and replays on replay port + r) */
export const KV_EVENTS_DP_SIZE_ANNOTATION = 'llm-router/kv-events-dp-size';
/** no engine runs more data-parallel ranks in one pod than this; a larger annotation is a typo */
const MAX_DP_SIZE = 64;

/** Where a pod's engine publishes KV-cache events: one publisher (and replay socket) per data-parallel rank. */
export function podKvEvents(ip: string, annotations: Readonly<Record<string, string>> | undefined, ports: KvEventsPorts): KvEventsSource {
  const port = portAnnotation(annotations, KV_EVENTS_PORT_ANNOTATION) ?? ports.port;
  const replay = portAnnotation(annotations, KV_EVENTS_REPLAY_PORT_ANNOTATION) ?? ports.replayPort;
  const dp = Number(annotations?.[KV_EVENTS_DP_SIZE_ANNOTATION] ?? 1);
  const ranks = Number.isInteger(dp) && dp >= 1 && dp <= MAX_DP_SIZE ? dp : 1;
  const eventsUrls: string[] = [];
  const replayUrls: (string | undefined)[] = [];
  for (let r = 0; r < ranks && port + r < 65536; r++) {
    eventsUrls.push(`tcp://${bracketHost(ip)}:${port + r}`);
    replayUrls.push(replay !== undefined && replay + r < 65536 ? `tcp://${bracketHost(ip)}:${replay + r}` : undefined);
  }
  return { eventsUrls, replayUrls };
}

/**
 * kvaware: how the router tokenizes prompts for the pod's models: `engine` (its /tokenize), `off`, a Hub repo
 * (`hf:REPO[@REVISION]` or `org/name`, fetched into the router's Hugging Face cache) or the absolute path of a Hugging
 * Face tokenizer directory in the router's own filesystem (mounted into the router pod). Put on the workload's pod
 * template, it is the model's; --tokenizers MODEL=... wins over it, and it wins over --tokenizer.
 */
export const TOKENIZER_ANNOTATION = 'llm-router/tokenizer';

/** The pod's llm-router/tokenizer, or why it is ignored. */
export function podTokenizer(annotations: Readonly<Record<string, string>> | undefined): { tokenizer?: string; invalid?: string } {
  const raw = annotations?.[TOKENIZER_ANNOTATION]?.trim();
  if (raw === undefined || raw === '') return {};
  const parsed = parseTokenizerValue(raw, { absolutePathOnly: true });
  if (parsed.ok) return { tokenizer: raw };
  return { invalid: `${TOKENIZER_ANNOTATION}: ${JSON.stringify(raw)} ${parsed.why}; the annotation is ignored` };
}

/** a base model's workload: the LoRA adapters the router may load on its engines, NAME=PATH comma separated */
export const LORA_ADAPTERS_ANNOTATION = 'llm-router/lora-adapters';

export interface Desired {
  readonly endpoints: EndpointSpec[];
  readonly declarations: Declaration[];
  /** LoRA adapters of the workloads' models (their llm-router/lora-adapters annotation) */
  readonly adapters: AdapterDeclaration[];
  /** objects that matched the selector but name no model, for a warning */
  readonly unnamed: string[];
  /** objects whose P/D label or annotation has a value the router does not know, with why, for a warning */
  readonly invalid: { readonly object: string; readonly why: string }[];
}

export function podReady(pod: PodLike): boolean {
  return (pod.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True');
}

function podPort(pod: PodLike, fallback: number): number {
  return portAnnotation(pod.metadata?.annotations, PORT_ANNOTATION) ?? fallback;
}

function podScheme(pod: PodLike, fallback: 'http' | 'https'): 'http' | 'https' {
  const raw = pod.metadata?.annotations?.[SCHEME_ANNOTATION]?.trim().toLowerCase();
  return raw === 'http' || raw === 'https' ? raw : fallback;
}

function templateOf(w: WorkloadLike): PodShape | undefined {
  return w.spec?.template ?? w.spec?.leaderWorkerTemplate?.leaderTemplate ?? w.spec?.leaderWorkerTemplate?.workerTemplate;
}

function nameOf(kind: string, meta: ObjectMetaLike | undefined): string {
  return `${kind}/${meta?.namespace ?? ''}/${meta?.name ?? ''}`;
}

function badRole(labels: Readonly<Record<string, string>> | undefined): string {
  return `${ROLE_LABEL}: ${JSON.stringify(labels?.[ROLE_LABEL])} is not prefill, decode or prefill-decode; it is not routed to`;
}

/**
 * The adapters a workload's llm-router/lora-adapters annotation declares (its own, else its pod template's), and the
 * entries that are not NAME=PATH; undefined without the annotation. Their base is the workload's first model, the one
 * vLLM names as their parent.
 */
export function workloadAdapters(
  w: WorkloadLike,
  models: readonly string[],
): { adapters: AdapterDeclaration[]; invalid: string[] } | undefined {
  const annotation =
    w.metadata?.annotations?.[LORA_ADAPTERS_ANNOTATION] ?? templateOf(w)?.metadata?.annotations?.[LORA_ADAPTERS_ANNOTATION];
  const base = models[0];
  return annotation === undefined || base === undefined ? undefined : parseAdapterAnnotation(annotation, base);
}

export function desiredState(pods: readonly PodLike[], workloads: readonly WorkloadLike[], opts: DesiredOptions): Desired {
  const endpoints: EndpointSpec[] = [];
  const declarations: Declaration[] = [];
  const adapters: AdapterDeclaration[] = [];
  const unnamed: string[] = [];
  const invalid: { object: string; why: string }[] = [];
  const protocolOf = (object: string, ...annotations: (Readonly<Record<string, string>> | undefined)[]) => {
    for (const a of annotations) {
      const found = pdProtocolOf(a);
      if (found.invalid !== undefined)
        invalid.push({
          object,
          why: `${PD_PROTOCOL_ANNOTATION}: ${JSON.stringify(found.invalid)} is not vllm-nixl, llm-d-sidecar or sglang; the annotation is ignored`,
        });
      if (found.protocol) return { pdProtocol: found.protocol };
    }
    return {};
  };
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
    const object = nameOf('Pod', pod.metadata);
    const role = roleOf(pod.metadata?.labels);
    if (role === undefined) {
      invalid.push({ object, why: badRole(pod.metadata?.labels) });
      continue;
    }
    const annotations = pod.metadata?.annotations;
    const scheme = podScheme(pod, opts.scheme);
    const probePort = portAnnotation(annotations, PROBE_PORT_ANNOTATION);
    const bootstrapPort = portAnnotation(annotations, BOOTSTRAP_PORT_ANNOTATION);
    const tokenizer = opts.kvEvents ? podTokenizer(annotations) : {};
    if (tokenizer.invalid) invalid.push({ object, why: tokenizer.invalid });
    endpoints.push({
      id: `${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}`,
      url: `${scheme}://${bracketHost(ip)}:${podPort(pod, opts.port)}`,
      models: [...names.names],
      ...(terminating ? { draining: true } : {}),
      ...(role !== 'both' ? { role } : {}),
      ...(probePort !== undefined ? { probeUrl: `${scheme}://${bracketHost(ip)}:${probePort}` } : {}),
      ...(bootstrapPort !== undefined ? { bootstrapPort } : {}),
      ...protocolOf(object, annotations),
      ...(opts.kvEvents ? { kvEvents: podKvEvents(ip, annotations, opts.kvEvents) } : {}),
      ...(tokenizer.tokenizer ? { tokenizer: tokenizer.tokenizer } : {}),
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
    const object = nameOf(w.kind ?? 'Workload', w.metadata);
    const role = roleOf(template?.metadata?.labels);
    if (role === undefined) {
      invalid.push({ object, why: badRole(template?.metadata?.labels) });
      continue;
    }
    // the workload's own annotation first: it is the one `kubectl annotate deployment` sets
    const protocol = protocolOf(object, w.metadata?.annotations, template?.metadata?.annotations);
    for (const model of names.names)
      declarations.push({ model, replicasWanted: replicas > 0, ...(role !== 'both' ? { role } : {}), ...protocol });
    const parsed = workloadAdapters(w, names.names);
    if (parsed) {
      adapters.push(...parsed.adapters);
      for (const why of parsed.invalid) invalid.push({ object, why: `${LORA_ADAPTERS_ANNOTATION}: ${why}; that entry is ignored` });
    }
  }
  endpoints.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  // workloads that disagree on an adapter's path: the first in this order wins, on every replica
  const key = (a: AdapterDeclaration): string => `${a.name}\n${a.base}\n${a.path}`;
  adapters.sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
  return { endpoints, declarations, adapters, unnamed, invalid };
}
