// The KV-cache rules of `llm-router lint`: what leaves a router with --routing-logic kvaware blind to an engine's
// KV cache. The router routes on the KV-cache events engines publish over ZeroMQ (vLLM's and SGLang's
// --kv-events-config, with enable_kv_cache_events), subscribing at the pod's llm-router/kv-events-port (else its own
// --kv-events-port, 5557); an engine that publishes none, publishes elsewhere, or caches no prefix (vLLM
// --no-enable-prefix-caching, SGLang --disable-radix-cache) is routed to as if it held nothing.
import { parse as parseYaml } from 'yaml';
import { KV_EVENTS_PORT_ANNOTATION } from '../../router/discovery/kubernetes/desired.js';
import { containerWords, flagValues } from '../../router/discovery/kubernetes/model-names.js';
import { portAnnotation } from '../../router/discovery/kubernetes/pd-labels.js';
import type { KubeObject, LoadedObject } from './load.js';
import { annotationPath, type Place, type Report } from './pd-rules.js';
import { argsKey, podTemplates, type ContainerSpec, type ManifestEngineKind, type PodTemplate } from './pods.js';

/** the router's --kv-events-port default */
export const DEFAULT_KV_EVENTS_PORT = 5557;
const KV_EVENTS_FLAG = '--kv-events-config';

const truthy = (v: unknown): boolean => v === true || (typeof v === 'string' && ['1', 'true'].includes(v.trim().toLowerCase()));

/** A flag's values from the arguments as given (a JSON value may hold blanks), else from the words of a shell line. */
function values(engine: ContainerSpec, flag: string): string[] {
  const given = flagValues([...(engine.command ?? []), ...(engine.args ?? [])], flag, false);
  return given.length > 0 ? given : flagValues(containerWords(engine), flag, false);
}

interface KvEvents {
  /** enable_kv_cache_events is true */
  readonly enabled: boolean;
  /** the publisher, when given */
  readonly publisher?: string;
  /** the port of the endpoint, when it has one */
  readonly port?: number;
  /** the value as given, for messages */
  readonly text?: string;
}

/** The engine's KV-event config: --kv-events-config JSON, or vLLM's dotted --kv-events-config.FIELD arguments. */
function kvEvents(engine: ContainerSpec): KvEvents {
  const fields: Record<string, unknown> = {};
  let text: string | undefined;
  for (const raw of values(engine, KV_EVENTS_FLAG)) {
    text = raw;
    try {
      const parsed: unknown = JSON.parse(raw);
      if (parsed && typeof parsed === 'object') Object.assign(fields, parsed);
    } catch {
      // the engine refuses to start with it; it publishes nothing
    }
  }
  for (const field of ['enable_kv_cache_events', 'publisher', 'endpoint']) {
    const dotted = values(engine, `${KV_EVENTS_FLAG}.${field}`).at(-1);
    if (dotted !== undefined) fields[field] = dotted;
  }
  const endpoint = typeof fields.endpoint === 'string' ? fields.endpoint : 'tcp://*:5557';
  const port = /^tcp:\/\/.*:(\d+)$/.exec(endpoint)?.[1];
  return {
    enabled: truthy(fields.enable_kv_cache_events),
    ...(typeof fields.publisher === 'string' ? { publisher: fields.publisher } : {}),
    ...(port !== undefined ? { port: Number(port) } : {}),
    ...(text !== undefined ? { text } : {}),
  };
}

/** The prefix-cache switch that turns it off, when the engine has it. */
function prefixCachingOff(engine: ContainerSpec, kind: ManifestEngineKind): string | undefined {
  const words = containerWords(engine);
  if (kind === 'vllm') {
    if (words.includes('--no-enable-prefix-caching')) return '--no-enable-prefix-caching';
    const explicit = flagValues(words, '--enable-prefix-caching', false).at(-1);
    if (explicit !== undefined && ['false', '0'].includes(explicit.toLowerCase())) return `--enable-prefix-caching=${explicit}`;
  }
  if (kind === 'sglang' && words.includes('--disable-radix-cache')) return '--disable-radix-cache';
  return undefined;
}

/** The checks of one engine container in front of which a router runs --routing-logic kvaware. */
export function checkKvEngine(
  template: PodTemplate,
  engine: ContainerSpec,
  kind: ManifestEngineKind,
  routerPort: number,
  report: Report,
): void {
  if (kind === 'tgi') {
    report(
      'kvaware-no-kv-events',
      "the router routes with --routing-logic kvaware on the engines' KV-cache events, and TGI publishes none: the router sees this engine as holding nothing and never sends it a request for the prefix it has cached",
      'serve this model with vLLM or SGLang publishing KV-cache events, or route it with a router of another --routing-logic',
    );
    return;
  }
  const kv = kvEvents(engine);
  const args: Place = { of: 'engine', path: [argsKey(engine)] };
  const runs = kv.text === undefined ? `without ${KV_EVENTS_FLAG}` : `with ${KV_EVENTS_FLAG} ${kv.text}`;
  const example = `${KV_EVENTS_FLAG} '{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://*:${routerPort}","replay_endpoint":"tcp://*:${routerPort + 1}","topic":""}'`;
  if (!kv.enabled || (kv.publisher !== undefined && kv.publisher !== 'zmq')) {
    report(
      'kvaware-no-kv-events',
      `the router routes with --routing-logic kvaware on the engines' KV-cache events, but this engine runs ${runs}${kv.enabled ? ` (publisher ${JSON.stringify(kv.publisher)}, not zmq)` : kv.text === undefined ? '' : ' (enable_kv_cache_events is not true)'}: it publishes nothing, so the router sees it as holding no prefix`,
      `start the engine with ${example}`,
      args,
    );
  } else if (kv.port !== undefined && kv.port !== routerPort) {
    const annotated = portAnnotation(template.metadata?.annotations, KV_EVENTS_PORT_ANNOTATION);
    report(
      'kvaware-no-kv-events',
      `the engine publishes its KV-cache events on port ${kv.port}, but the router subscribes at ${routerPort} (${annotated !== undefined ? `annotation ${KV_EVENTS_PORT_ANNOTATION}` : `no ${KV_EVENTS_PORT_ANNOTATION} annotation: the router's --kv-events-port`}): it receives none of them`,
      `annotate the pod template ${KV_EVENTS_PORT_ANNOTATION}: "${kv.port}"`,
      annotated !== undefined ? { of: 'template', path: annotationPath(KV_EVENTS_PORT_ANNOTATION) } : args,
    );
  }
  const off = prefixCachingOff(engine, kind);
  if (off !== undefined) {
    report(
      'kvaware-prefix-caching-off',
      `the router routes with --routing-logic kvaware to the engine that has cached the longest prefix of a prompt, but this engine runs with ${off}: it caches no prefix, so no request is sped up by being sent to it`,
      kind === 'vllm' ? 'remove --no-enable-prefix-caching (vLLM caches prefixes by default)' : 'remove --disable-radix-cache',
      args,
    );
  }
}

/**
 * The port the router subscribes to on a pod, read as its discovery reads it: the pod's llm-router/kv-events-port
 * annotation (a workload's own annotations are not read), else the router's --kv-events-port.
 */
export function subscribedPort(template: PodTemplate, routerDefault: number): number {
  return portAnnotation(template.metadata?.annotations, KV_EVENTS_PORT_ANNOTATION) ?? routerDefault;
}

/** A setting of a router container, read as the router reads it: flag, then LLM_ROUTER_* env, then its --config file. */
export function routerSetting(
  objects: readonly LoadedObject[],
  object: KubeObject,
  template: PodTemplate,
  router: ContainerSpec,
  flag: string,
): string | undefined {
  const words = containerWords(router);
  const fromArgs = flagValues(words, `--${flag}`, false).at(-1);
  if (fromArgs !== undefined) return fromArgs;
  const env = (router.env ?? []).filter((e) => e.name === `LLM_ROUTER_${flag.toUpperCase().replaceAll('-', '_')}`).at(-1);
  if (env?.value !== undefined) return String(env.value);
  const file = flagValues(words, '--config', false).at(-1);
  const config = file === undefined ? undefined : configFile(objects, object, template, router, file);
  if (!config) return undefined;
  const camel = flag.replace(/-(\w)/g, (_m, c: string) => c.toUpperCase());
  for (const key of [flag, flag.replaceAll('-', '_'), camel]) {
    const v = config[key];
    if (v !== undefined && v !== null) return String(v);
  }
  return undefined;
}

/** The router's --config file when a ConfigMap in the input provides it (through a volume mount of the container). */
function configFile(
  objects: readonly LoadedObject[],
  object: KubeObject,
  template: PodTemplate,
  router: ContainerSpec,
  file: string,
): Record<string, unknown> | undefined {
  const mounts = (router as { volumeMounts?: readonly { name?: string; mountPath?: string; subPath?: string }[] }).volumeMounts ?? [];
  const volumes = ((template.spec ?? {}) as { volumes?: readonly { name?: string; configMap?: { name?: string } }[] }).volumes ?? [];
  for (const m of mounts) {
    if (!m.mountPath) continue;
    const dir = m.mountPath.replace(/\/+$/, '');
    let key: string | undefined;
    if (m.subPath !== undefined && file === dir) key = m.subPath;
    else if (m.subPath === undefined && file.startsWith(dir + '/') && !file.slice(dir.length + 1).includes('/'))
      key = file.slice(dir.length + 1);
    if (key === undefined) continue;
    const cmName = volumes.find((v) => v.name === m.name)?.configMap?.name;
    if (!cmName) continue;
    const ns = object.metadata?.namespace;
    const cm = objects.find(
      ({ object: o }) => o.kind === 'ConfigMap' && o.metadata?.name === cmName && (o.metadata?.namespace ?? ns) === ns,
    )?.object as { data?: Record<string, string> } | undefined;
    const text = cm?.data?.[key];
    if (text === undefined) continue;
    try {
      const parsed: unknown = parseYaml(text);
      return parsed && typeof parsed === 'object' ? (parsed as Record<string, unknown>) : undefined;
    } catch {
      return undefined;
    }
  }
  return undefined;
}

/** Whether the object's pod templates run an llm-router serve container, and which (for routerView). */
export function routerContainers(object: KubeObject): { template: PodTemplate; container: ContainerSpec }[] {
  const out: { template: PodTemplate; container: ContainerSpec }[] = [];
  for (const { template } of podTemplates(object))
    for (const c of template.spec?.containers ?? []) {
      if (/llm-router/.test(c.image ?? '') && containerWords(c).includes('serve')) out.push({ template, container: c });
    }
  return out;
}
