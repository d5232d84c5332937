// The lint rules: each finds one way a manifest makes a pod Ready before its model is loaded, kills it while it
// loads, probes the wrong process, hides the model from the router, or keeps the router from loading its LoRA
// adapters. Pure: objects in, findings out.
import { containerWords, declaredModelNames, namesFromArgs, MODELS_ANNOTATION } from '../../router/discovery/kubernetes/model-names.js';
import type { KubeObject, LoadedObject, NodePath } from './load.js';
import {
  argsKey,
  containerPath,
  describeProbe,
  engineKind,
  enginePort,
  isProbeSidecar,
  listeningPorts,
  podRole,
  podTemplates,
  probePort,
  probeSidecarEnginePort,
  WORKLOAD_KINDS,
  type ContainerSpec,
  type ManifestEngineKind,
  type PodTemplate,
  type ProbeSpec,
} from './pods.js';
import { matches, parseSelector, type Requirement } from './selector.js';
import { checkPdEngine, checkPdModels, type PdWorkload, type Place, type Report } from './pd-rules.js';
import { checkLoraEngine, checkLoraNames, type LoraWorkload } from './lora-rules.js';
import { checkKvEngine, DEFAULT_KV_EVENTS_PORT, routerContainers, routerSetting, subscribedPort } from './kv-rules.js';

export type Severity = 'error' | 'warning';

export interface RuleInfo {
  readonly id: string;
  readonly severity: Severity;
  readonly summary: string;
}

/** Every rule, in the order the report and the docs list them. */
export const RULES: readonly RuleInfo[] = [
  {
    id: 'probe-on-health',
    severity: 'error',
    summary: "readiness or startup probe on vLLM's /health (or a bare TCP connect): passes while the model is not served",
  },
  {
    id: 'probe-on-sidecar-port',
    severity: 'error',
    summary: "readiness or startup probe on a sidecar's port (e.g. a P/D routing proxy) instead of the engine's",
  },
  {
    id: 'startup-budget-too-short',
    severity: 'error',
    summary: 'startupProbe budget (initialDelaySeconds + failureThreshold x periodSeconds) below the expected load time',
  },
  {
    id: 'probe-port-mismatch',
    severity: 'error',
    summary: 'probe port is not the port the engine listens on (--port, or the role convention)',
  },
  {
    id: 'no-startup-probe',
    severity: 'warning',
    summary: 'no startupProbe, and the livenessProbe would kill the pod before the model has loaded',
  },
  {
    id: 'no-readiness-probe',
    severity: 'warning',
    summary: 'engine container without a readinessProbe: the pod is Ready as soon as it starts',
  },
  {
    id: 'missing-served-model-name',
    severity: 'warning',
    summary: "the router takes the model's name from the engine's arguments, and there is no --served-model-name",
  },
  {
    id: 'selector-mismatch',
    severity: 'warning',
    summary: "the router's label selector (or namespace) does not match this engine workload",
  },
  {
    id: 'pd-role-missing',
    severity: 'error',
    summary: 'a prefill or decode engine without the llm-d.ai/role label, or a workload without it beside others of its model that have it',
  },
  {
    id: 'pd-prefill-without-decode',
    severity: 'error',
    summary: 'a model with a prefill workload and no decode workload: nothing can decode its requests',
  },
  {
    id: 'pd-decode-probed-through-sidecar',
    severity: 'warning',
    summary:
      'a decode pod reached through its routing sidecar with no llm-router/probe-port: the router probes the sidecar, not the engine',
  },
  {
    id: 'pd-protocol-invalid',
    severity: 'error',
    summary: 'an llm-router/pd-protocol annotation that is not vllm-nixl, llm-d-sidecar or sglang',
  },
  {
    id: 'lora-runtime-loading-off',
    severity: 'error',
    summary:
      'a workload declares LoRA adapters, but its engine cannot load them at run time: vLLM without VLLM_ALLOW_RUNTIME_LORA_UPDATING=true, SGLang with --dp-size above 1, or neither vLLM nor SGLang',
  },
  {
    id: 'lora-not-enabled',
    severity: 'error',
    summary: 'a workload declares LoRA adapters, but its vLLM or SGLang engine runs without --enable-lora (SGLang: or --lora-paths)',
  },
  {
    id: 'lora-annotation-invalid',
    severity: 'error',
    summary: 'an llm-router/lora-adapters entry that is not NAME=PATH, or an adapter named like a model (the model wins)',
  },
  {
    id: 'kvaware-no-kv-events',
    severity: 'warning',
    summary:
      'a router with --routing-logic kvaware in front of an engine that publishes no KV-cache events (no --kv-events-config with enable_kv_cache_events, TGI) or publishes them on another port than the router subscribes to',
  },
  {
    id: 'kvaware-prefix-caching-off',
    severity: 'warning',
    summary:
      'a router with --routing-logic kvaware in front of an engine with prefix caching off (vLLM --no-enable-prefix-caching, SGLang --disable-radix-cache)',
  },
];

const SEVERITY = new Map(RULES.map((r) => [r.id, r.severity]));

export interface Finding {
  readonly file: string;
  /** where the node the finding is about is written (a probe, its port, a label, the arguments), 1-based */
  readonly line: number;
  readonly column: number;
  /** Kind/name, e.g. Deployment/llama */
  readonly object: string;
  readonly namespace?: string;
  readonly container: string;
  readonly rule: string;
  readonly severity: Severity;
  readonly why: string;
  readonly fix: string;
}

export interface LintOptions {
  /** default 600; a workload's llm-router/expected-load-seconds annotation wins */
  readonly expectedLoadSeconds?: number;
  /** the router's --k8s-label-selector; when absent, taken from an llm-router Deployment in the input */
  readonly selector?: string;
  /** the router's --k8s-model-label (default model) */
  readonly modelLabel?: string;
  /** the router's --routing-logic; when absent, taken from an llm-router Deployment in the input (its args, env, config) */
  readonly routingLogic?: string;
  /** the router's --kv-events-port (default 5557, or the input's router's) */
  readonly kvEventsPort?: number;
}

const EXPECTED_LOAD_ANNOTATION = 'llm-router/expected-load-seconds';
export const DEFAULT_EXPECTED_LOAD_SECONDS = 600;

/** Defaults the kubelet applies. */
const PROBE_DEFAULTS = { periodSeconds: 10, failureThreshold: 3, initialDelaySeconds: 0 };

function budget(p: ProbeSpec): { seconds: number; text: string } {
  const period = p.periodSeconds ?? PROBE_DEFAULTS.periodSeconds;
  const failures = p.failureThreshold ?? PROBE_DEFAULTS.failureThreshold;
  const delay = p.initialDelaySeconds ?? PROBE_DEFAULTS.initialDelaySeconds;
  return { seconds: delay + failures * period, text: `${delay} s + ${failures} x ${period} s = ${delay + failures * period} s` };
}

function failuresFor(seconds: number, p: ProbeSpec): number {
  const period = p.periodSeconds ?? PROBE_DEFAULTS.periodSeconds;
  return Math.ceil((2 * seconds - (p.initialDelaySeconds ?? 0)) / period);
}

const NOT_MODEL_AWARE_PATHS = new Set(['/health', '/healthz', '/ping']);

function httpPath(p: ProbeSpec): string | undefined {
  const raw = p.httpGet?.path;
  return raw === undefined ? undefined : (raw.split('?')[0] as string).replace(/\/+$/, '') || '/';
}

interface RouterView {
  readonly selector?: Requirement[];
  readonly selectorText?: string;
  readonly namespace?: string;
  /** the router routes with --routing-logic kvaware */
  readonly kvaware?: boolean;
  /** where it subscribes to KV-cache events on a pod without llm-router/kv-events-port */
  readonly kvEventsPort?: number;
}

/** The router's selector, namespace and routing, from the options or an llm-router Deployment in the input. */
function routerView(objects: readonly LoadedObject[], opts: LintOptions): RouterView {
  const view = selectorView(objects, opts);
  let logic = opts.routingLogic;
  let port = opts.kvEventsPort;
  if (logic === undefined || port === undefined) {
    const found = objects.flatMap(({ object }) => routerContainers(object).map((r) => ({ object, ...r })))[0];
    if (found) {
      logic ??= routerSetting(objects, found.object, found.template, found.container, 'routing-logic');
      const p = Number(routerSetting(objects, found.object, found.template, found.container, 'kv-events-port'));
      if (port === undefined && Number.isInteger(p) && p > 0) port = p;
    }
  }
  return { ...view, kvaware: logic === 'kvaware', kvEventsPort: port ?? DEFAULT_KV_EVENTS_PORT };
}

/** The router's selector and namespace, from the options or an llm-router Deployment in the input. */
function selectorView(
  objects: readonly LoadedObject[],
  opts: LintOptions,
): { selector?: Requirement[]; selectorText?: string; namespace?: string } {
  if (opts.selector !== undefined) return { selector: parseSelector(opts.selector), selectorText: opts.selector };
  for (const { object } of objects) {
    for (const { template } of podTemplates(object)) {
      for (const c of template.spec?.containers ?? []) {
        const words = containerWords(c);
        if (!/llm-router/.test(c.image ?? '') || !words.includes('serve')) continue;
        const value = (flag: string): string | undefined => {
          const i = words.indexOf(flag);
          if (i >= 0) return words[i + 1];
          return words.find((w) => w.startsWith(flag + '='))?.slice(flag.length + 1);
        };
        if (value('--service-discovery') !== 'k8s') continue;
        const selectorText = value('--k8s-label-selector') ?? '';
        const namespace = value('--k8s-namespace') ?? object.metadata?.namespace;
        return { selector: parseSelector(selectorText), selectorText, ...(namespace ? { namespace } : {}) };
      }
    }
  }
  return {};
}

interface Context {
  readonly loaded: LoadedObject;
  readonly object: KubeObject;
  readonly objectName: string;
  readonly template: PodTemplate;
  /** where the pod template is in the object */
  readonly templatePath: NodePath;
  readonly opts: LintOptions;
  readonly findings: Finding[];
}

/** A node of container `c` of the context's pod template, as a path from the object's root. */
function inContainer(ctx: Context, c: ContainerSpec, ...rest: NodePath): NodePath {
  return [...ctx.templatePath, ...containerPath(ctx.template, c), ...rest];
}

/** A place a P/D, LoRA or KV rule names, as a path from the object's root. */
function placed(ctx: Context, engine: ContainerSpec, at: Place | undefined): NodePath {
  if (at === undefined || at.of === 'engine') return inContainer(ctx, engine, ...(at?.path ?? []));
  return at.of === 'template' ? [...ctx.templatePath, ...at.path] : at.path;
}

/** Where a probe's field is: the port (httpGet, tcpSocket or grpc) or the path (httpGet), else the probe itself. */
function probeField(probe: ProbeSpec, which: ProbeName, field: 'port' | 'path'): NodePath {
  if (field === 'path' && probe.httpGet) return [which, 'httpGet', 'path'];
  for (const handler of ['httpGet', 'tcpSocket', 'grpc'] as const) if (probe[handler]) return [which, handler, field];
  return probe.exec ? [which, 'exec', 'command'] : [which];
}

function report(ctx: Context, container: string, rule: string, why: string, fix: string, at: NodePath): void {
  const { line, column } = ctx.loaded.position(at);
  ctx.findings.push({
    file: ctx.loaded.file,
    line,
    column,
    object: ctx.objectName,
    ...(ctx.object.metadata?.namespace ? { namespace: ctx.object.metadata.namespace } : {}),
    container,
    rule,
    severity: SEVERITY.get(rule) as Severity,
    why,
    fix,
  });
}

function expectedLoad(ctx: Context): { seconds: number; from: string } {
  const raw =
    ctx.object.metadata?.annotations?.[EXPECTED_LOAD_ANNOTATION] ?? ctx.template.metadata?.annotations?.[EXPECTED_LOAD_ANNOTATION];
  const n = Number(raw);
  if (raw !== undefined && Number.isFinite(n) && n > 0) return { seconds: n, from: `annotation ${EXPECTED_LOAD_ANNOTATION}` };
  if (ctx.opts.expectedLoadSeconds !== undefined) return { seconds: ctx.opts.expectedLoadSeconds, from: '--expected-load-seconds' };
  return { seconds: DEFAULT_EXPECTED_LOAD_SECONDS, from: 'the default' };
}

type ProbeName = 'readinessProbe' | 'startupProbe' | 'livenessProbe';

function checkEngine(ctx: Context, engine: ContainerSpec, kind: ManifestEngineKind, others: readonly ContainerSpec[]): void {
  const name = engine.name ?? '(unnamed)';
  const sidecars = others.filter((c) => !isProbeSidecar(c));
  const probeSidecars = others.filter(isProbeSidecar);
  const role = podRole(ctx.template, engine);
  const listen = enginePort(engine, kind, role, sidecars.length > 0);
  const load = expectedLoad(ctx);
  const sidecarOf = (port: number): ContainerSpec | undefined => sidecars.find((c) => listeningPorts(c).includes(port));
  const probeSidecarOf = (port: number): ContainerSpec | undefined => probeSidecars.find((c) => listeningPorts(c).includes(port));

  for (const which of ['readinessProbe', 'startupProbe', 'livenessProbe'] as ProbeName[]) {
    const probe = engine[which];
    if (!probe) continue;
    const { port, named } = probePort(probe, engine);
    const what = `${which} ${describeProbe(probe, port)}`;
    const gatesTraffic = which !== 'livenessProbe';
    if (named !== undefined && port === undefined) {
      report(
        ctx,
        name,
        'probe-port-mismatch',
        `${which} uses the port name ${JSON.stringify(named)}, which this container does not declare; the kubelet cannot resolve it`,
        `use port ${listen.port} (the engine's port, from ${listen.from}) or declare the named port on the container`,
        inContainer(ctx, engine, ...probeField(probe, which, 'port')),
      );
      continue;
    }
    if (port === undefined) {
      if (gatesTraffic && probe.exec && kind !== 'sglang' && kind !== 'tgi' && /\/health\b/.test((probe.exec.command ?? []).join(' '))) {
        report(
          ctx,
          name,
          'probe-on-health',
          `${what} asks vLLM's /health, which answers 200 before the model is served`,
          modelAwareFix(which, kind, listen.port, probeSidecars.length > 0),
          inContainer(ctx, engine, which, 'exec', 'command'),
        );
      }
      continue;
    }
    const viaProbeSidecar = probeSidecarOf(port);
    if (viaProbeSidecar) {
      const path = httpPath(probe);
      if (gatesTraffic && path === '/live') {
        report(
          ctx,
          name,
          'probe-on-health',
          `${what} asks the probe sidecar's /live, which is 200 while the engine answers at all, loaded or not`,
          `use path /ready on port ${port}: it is 200 only when the engine lists the model`,
          inContainer(ctx, engine, ...probeField(probe, which, 'path')),
        );
      }
      const target = probeSidecarEnginePort(viaProbeSidecar);
      if (target !== listen.port) {
        report(
          ctx,
          viaProbeSidecar.name ?? '(unnamed)',
          'probe-port-mismatch',
          `the llm-router probe sidecar checks port ${target ?? '(unparsable --engine-url)'}, but engine ${name} listens on ${listen.port} (from ${listen.from})`,
          `set --engine-url http://127.0.0.1:${listen.port} on the probe sidecar`,
          inContainer(ctx, viaProbeSidecar, argsKey(viaProbeSidecar)),
        );
      }
      continue;
    }
    if (port !== listen.port) {
      const sidecar = sidecarOf(port);
      if (sidecar && gatesTraffic) {
        report(
          ctx,
          name,
          'probe-on-sidecar-port',
          `${what} reaches sidecar ${sidecar.name ?? '(unnamed)'}, not the engine: a routing proxy answers /health 200 whether or not the engine behind it has loaded (or never becomes ready at all)`,
          `probe the engine's own port ${listen.port} (from ${listen.from}) with a model-aware check`,
          inContainer(ctx, engine, ...probeField(probe, which, 'port')),
        );
      } else {
        report(
          ctx,
          name,
          'probe-port-mismatch',
          `${what} goes to port ${port}${sidecar ? ` (sidecar ${sidecar.name ?? '(unnamed)'})` : ''}, but the engine listens on ${listen.port} (from ${listen.from})`,
          `set the ${which} port to ${listen.port}`,
          inContainer(ctx, engine, ...probeField(probe, which, 'port')),
        );
      }
      continue;
    }
    if (!gatesTraffic || kind === 'sglang' || kind === 'tgi') continue;
    const path = httpPath(probe);
    if ((path !== undefined && NOT_MODEL_AWARE_PATHS.has(path)) || probe.tcpSocket) {
      const harm =
        which === 'readinessProbe'
          ? 'so the pod is Ready, and gets traffic, before the model is served'
          : 'so startup counts as done while the model may still be loading, and the startup budget no longer covers the load';
      report(
        ctx,
        name,
        'probe-on-health',
        `${what} is answered by vLLM's HTTP server whether or not the model is listed, ${harm}`,
        modelAwareFix(which, kind, listen.port, probeSidecars.length > 0),
        inContainer(ctx, engine, ...(probe.tcpSocket ? [which, 'tcpSocket'] : probeField(probe, which, 'path'))),
      );
    }
  }

  const startup = engine.startupProbe;
  const liveness = engine.livenessProbe;
  if (startup) {
    const b = budget(startup);
    if (b.seconds < load.seconds) {
      report(
        ctx,
        name,
        'startup-budget-too-short',
        `startupProbe allows ${b.text}, less than the expected load time of ${load.seconds} s (${load.from}): the kubelet restarts the container before the model has loaded, in a loop`,
        `set startupProbe.failureThreshold to ${failuresFor(load.seconds, startup)} (2 x ${load.seconds} s at periodSeconds ${startup.periodSeconds ?? PROBE_DEFAULTS.periodSeconds})`,
        inContainer(ctx, engine, 'startupProbe', 'failureThreshold'),
      );
    }
  } else if (liveness) {
    const b = budget(liveness);
    if (b.seconds < load.seconds) {
      report(
        ctx,
        name,
        'no-startup-probe',
        `no startupProbe, and livenessProbe gives up after ${b.text}, less than the expected load time of ${load.seconds} s (${load.from}): the pod is killed while it loads`,
        `add a startupProbe on the model-aware endpoint with failureThreshold x periodSeconds >= ${2 * load.seconds} s; keep liveness on /health`,
        inContainer(ctx, engine, 'livenessProbe'),
      );
    }
  }
  if (!engine.readinessProbe) {
    report(
      ctx,
      name,
      'no-readiness-probe',
      'no readinessProbe: the pod counts as Ready (and receives Service traffic) as soon as the container starts, long before the model is loaded',
      modelAwareFix('readinessProbe', kind, listen.port, probeSidecars.length > 0),
      inContainer(ctx, engine),
    );
  }
}

const MODEL_AWARE_PATH: Record<ManifestEngineKind, string> = { vllm: '/v1/models', sglang: '/health_generate', tgi: '/health' };

function modelAwareFix(which: string, kind: ManifestEngineKind, port: number, hasProbeSidecar: boolean): string {
  return hasProbeSidecar
    ? `point the ${which} at the llm-router probe sidecar's /ready`
    : `point the ${which} at GET ${MODEL_AWARE_PATH[kind]} on port ${port}, or better at an llm-router probe sidecar's /ready (docs/operations.md); keep /health for the livenessProbe`;
}

function checkModelName(ctx: Context, engine: ContainerSpec): void {
  const modelLabel = ctx.opts.modelLabel ?? 'model';
  const declared = declaredModelNames(ctx.template, modelLabel, ctx.object.metadata);
  if (declared && declared.source !== 'args') return;
  const words = containerWords(engine);
  if (words.some((w) => w === '--served-model-name' || w.startsWith('--served-model-name='))) return;
  const name = engine.name ?? '(unnamed)';
  const fromArgs = namesFromArgs(words);
  if (fromArgs.length > 0) {
    report(
      ctx,
      name,
      'missing-served-model-name',
      `the router names this model ${JSON.stringify(fromArgs[0])}, the path the engine loads: clients must send exactly that, and moving the weights renames the model`,
      `add --served-model-name <name> to the engine's arguments, or annotate the workload ${MODELS_ANNOTATION}: <name>`,
      inContainer(ctx, engine, argsKey(engine)),
    );
  } else {
    report(
      ctx,
      name,
      'missing-served-model-name',
      'the router cannot tell which model this engine serves: no annotation, no model label, no model in the arguments',
      `annotate the workload ${MODELS_ANNOTATION}: <name>, or pass --served-model-name <name> to the engine`,
      inContainer(ctx, engine),
    );
  }
}

function checkSelector(ctx: Context, engine: ContainerSpec, router: RouterView): void {
  if (!router.selector) return;
  const name = engine.name ?? '(unnamed)';
  const ns = ctx.object.metadata?.namespace;
  if (router.namespace && ns && ns !== router.namespace) {
    report(
      ctx,
      name,
      'selector-mismatch',
      `the router watches namespace ${router.namespace}; this workload is in ${ns}, so its model is unknown there (404)`,
      `run a router in ${ns}, or set its --k8s-namespace ${ns}`,
      ['metadata', 'namespace'],
    );
    return;
  }
  const kind = ctx.object.kind ?? '';
  const podLabels = ctx.template.metadata?.labels;
  if (WORKLOAD_KINDS.has(kind) && !matches(router.selector, ctx.object.metadata?.labels)) {
    report(
      ctx,
      name,
      'selector-mismatch',
      `the ${kind}'s own labels do not match the router's selector ${JSON.stringify(router.selectorText)}: at zero replicas its model is unknown (404) instead of scaled-to-zero (503)`,
      `add labels matching ${JSON.stringify(router.selectorText)} to the ${kind}'s metadata.labels`,
      ['metadata', 'labels'],
    );
  }
  if (!matches(router.selector, podLabels)) {
    report(
      ctx,
      name,
      'selector-mismatch',
      `the pod labels do not match the router's selector ${JSON.stringify(router.selectorText)}: its pods never become endpoints`,
      `add labels matching ${JSON.stringify(router.selectorText)} to the pod template`,
      [...ctx.templatePath, 'metadata', 'labels'],
    );
  }
}

/** Lints every object; findings are in the order they are written (file, line, column). */
export function lintObjects(objects: readonly LoadedObject[], opts: LintOptions = {}): Finding[] {
  const findings: Finding[] = [];
  const router = routerView(objects, opts);
  const workloads: PdWorkload[] = [];
  const loraWorkloads: LoraWorkload[] = [];
  for (const loaded of objects) {
    const { object } = loaded;
    // the model name and the selector belong to the workload: checked once, on its first engine container
    let first = true;
    for (const { where, template, path: templatePath } of podTemplates(object)) {
      const objectName = `${object.kind}/${object.metadata?.name ?? '(unnamed)'}${where ? ` (${where})` : ''}`;
      const ctx: Context = { loaded, object, objectName, template, templatePath, opts, findings };
      const containers = template.spec?.containers ?? [];
      const nativeSidecars = (template.spec?.initContainers ?? []).filter((c) => c.restartPolicy === 'Always');
      for (const c of containers) {
        const kind = engineKind(c);
        if (!kind) continue;
        const others = [...containers.filter((o) => o !== c), ...nativeSidecars];
        checkEngine(ctx, c, kind, others);
        if (first) {
          checkModelName(ctx, c);
          checkSelector(ctx, c, router);
          const sidecars = others.filter((o) => !isProbeSidecar(o));
          const port = enginePort(c, kind, podRole(template, c), sidecars.length > 0).port;
          const toReport: Report = (rule, why, fix, at) => report(ctx, c.name ?? '(unnamed)', rule, why, fix, placed(ctx, c, at));
          const pd = checkPdEngine(object, template, c, sidecars, port, opts.modelLabel ?? 'model', toReport);
          // a Pod a workload owns is counted through its workload
          if (pd && !(object.kind === 'Pod' && object.metadata?.ownerReferences?.length)) workloads.push(pd);
          // the router reads adapters from the workloads it watches only
          const lora = pd && WORKLOAD_KINDS.has(object.kind ?? '') ? checkLoraEngine(object, c, kind, pd.models, toReport) : undefined;
          if (lora) loraWorkloads.push(lora);
          // the KV-cache rules apply to the engines a kvaware router routes to: those its selector matches
          const ns = object.metadata?.namespace;
          const seen =
            (!router.namespace || !ns || ns === router.namespace) &&
            (!router.selector || matches(router.selector, template.metadata?.labels));
          if (router.kvaware && seen) {
            const port = subscribedPort(template, router.kvEventsPort ?? DEFAULT_KV_EVENTS_PORT);
            checkKvEngine(template, c, kind, port, toReport);
          }
          first = false;
        }
      }
    }
  }
  checkPdModels(workloads);
  checkLoraNames(loraWorkloads, new Set(workloads.flatMap((w) => w.models)));
  // in the order they are written: by file (in input order), line and column
  const fileOrder = new Map<string, number>();
  for (const { file } of objects) if (!fileOrder.has(file)) fileOrder.set(file, fileOrder.size);
  return findings.sort((a, b) => (fileOrder.get(a.file) ?? 0) - (fileOrder.get(b.file) ?? 0) || a.line - b.line || a.column - b.column);
}
