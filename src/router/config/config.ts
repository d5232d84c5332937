// Builds the router's typed configuration from flags, env and the YAML file, and validates it as a whole.
import { isHttpToken } from '../util/http-token.js';
import { isIP } from 'node:net';
import { z } from 'zod';
import { parseFlags, UsageError, type FlagSource, type FlagValue } from './flags.js';
import { CONFIG_FILE_FLAGS, configFileOf, parseConfigText, readConfigText, type ConfigFileRef } from './config-file.js';
import { tracingSection, type TracingConfig } from './tracing-config.js';
import type { EngineTlsConfig } from './engine-tls.js';
import { REFUSED_FLAGS, ROUTER_FLAGS, ROUTING_LOGICS, type RouterFlagValues } from './router-flags.js';
import type { EngineClientKind, EngineKind } from '../core/engine.js';
import type { EndpointRole, PdProtocol } from '../core/pd.js';
import type { KvEventsSource } from '../core/endpoint.js';
import { kvConfig, staticKvEvents, type KvConfig } from './kv-config.js';
import { parseAdapterFlag, type AdapterDeclaration } from '../core/lora.js';

export type RoutingLogic = (typeof ROUTING_LOGICS)[number];
export type LogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal' | 'silent';

export interface StaticBackend {
  readonly url: string;
  readonly models: readonly string[];
  readonly role: EndpointRole;
  /** its KV-cache event stream (--static-backend-kv-events / --static-backend-kv-replay) */
  readonly kvEvents?: KvEventsSource;
}

/** Prefill/decode disaggregation (src/router/proxy/pd). */
export interface PdConfig {
  /** of a P/D model whose workload names none */
  readonly protocol: PdProtocol;
  /** sglang: the prefill's bootstrap port unless its pod names one */
  readonly sglangBootstrapPort: number;
  /** prompts shorter than this go decode-only where the protocol allows it; 0 = never */
  readonly minPromptChars: number;
}

/** LoRA adapters (src/router/adapters). */
export interface LoraConfig {
  /** --lora-adapters */
  readonly adapters: readonly AdapterDeclaration[];
  /** an adapter is loaded on one more engine when all its holders carry this many requests; 0 = never */
  readonly spillThreshold: number;
  /** slots of an engine whose /metrics does not report max_lora */
  readonly maxLorasPerEngine: number;
  /** an engine whose load of an adapter failed is not asked again for it this long */
  readonly loadCooldownMs: number;
}

export interface ProbeConfig {
  readonly intervalMs: number;
  /** the interval while requests are held for one of the endpoint's models */
  readonly wakeIntervalMs: number;
  readonly readyIntervalMs: number;
  readonly timeoutMs: number;
  readonly failureThreshold: number;
  readonly successThreshold: number;
  readonly startupTimeoutMs: number;
  readonly warmup: boolean;
}

export interface TimeoutConfig {
  readonly connectMs: number;
  readonly headersMs: number;
  readonly idleMs: number;
  /** 0 = no limit */
  readonly totalMs: number;
}

export interface KubernetesConfig {
  readonly namespace: string | undefined;
  readonly labelSelector: string | undefined;
  readonly port: number;
  /** unless a pod's llm-router/scheme annotation says otherwise */
  readonly scheme: 'http' | 'https';
  readonly modelLabel: string;
  readonly resyncMs: number;
  /** kvaware in use: each pod's KV-cache event ports unless annotated (--kv-events-port, --kv-events-replay-port) */
  readonly kvEvents: { readonly port: number; readonly replayPort: number | undefined } | undefined;
}

export interface ScalingConfig {
  readonly coldStartWaitMs: number;
  readonly coldStartWaitPerModelMs: ReadonlyMap<string, number>;
  readonly queueSize: number;
  readonly releasePerEndpoint: number;
  /** undefined = the KEDA scaler is off */
  readonly kedaScalerPort: number | undefined;
  readonly graceMs: number;
  readonly wakeAlarmMs: number;
  readonly maxRetryAfterSeconds: number;
  /** the other router replicas, for the KEDA scaler's sum (admin base URLs) */
  readonly peers: readonly string[];
  /** label selector of the router's own pods (peers found in Kubernetes) */
  readonly peerSelector: string | undefined;
  /** namespace of those pods (--scaler-peer-namespace, else --k8s-namespace; undefined: the pod's own, else the kubeconfig's) */
  readonly peerNamespace: string | undefined;
  readonly peerTimeoutMs: number;
  /** TLS on the KEDA scaler's port (PEM files, read at startup); undefined: plaintext */
  readonly kedaTls: { readonly certFile: string; readonly keyFile: string; readonly caFile: string | undefined } | undefined;
}

/** an address block: 10.0.0.0/8, fd00::/8, or one address */
export interface Cidr {
  readonly address: string;
  readonly prefix: number;
  readonly family: 'ipv4' | 'ipv6';
}

export function parseCidr(text: string): Cidr | undefined {
  const [address = '', prefixText, ...rest] = text.trim().split('/');
  const version = isIP(address);
  if (version === 0 || rest.length > 0) return undefined;
  const bits = version === 4 ? 32 : 128;
  if (prefixText !== undefined && !/^\d{1,3}$/.test(prefixText)) return undefined;
  const prefix = prefixText === undefined ? bits : Number(prefixText);
  if (prefix > bits) return undefined;
  return { address, prefix, family: version === 4 ? 'ipv4' : 'ipv6' };
}

function trustedProxies(list: readonly string[]): Cidr[] {
  return list.map((text) => {
    const c = parseCidr(text);
    if (!c) throw new UsageError(`--trusted-proxies: ${JSON.stringify(text)} is not an address or CIDR block (10.0.0.0/8, fd00::/8)`);
    return c;
  });
}

export interface SecurityConfig {
  readonly apiKeys: readonly string[];
  readonly apiKeysFile: string | undefined;
  /** undefined: admin endpoints stay on the main port */
  readonly adminPort: number | undefined;
  readonly maxHeaderBytes: number;
  /** 0 = no rate limit */
  readonly rateLimitRps: number;
  readonly rateLimitBurst: number;
  /** peers whose X-Forwarded-For names the client (--trusted-proxies) */
  readonly trustedProxies: readonly Cidr[];
  /** 0 = no limit */
  readonly maxConcurrentRequests: number;
  readonly clientTimeoutMs: number;
  readonly drainMs: number;
  readonly shutdownTimeoutMs: number;
}

export interface RouterConfig {
  readonly host: string;
  readonly port: number;
  readonly serviceDiscovery: 'static' | 'k8s';
  /** set when serviceDiscovery is k8s */
  readonly kubernetes: KubernetesConfig | undefined;
  readonly staticBackends: readonly StaticBackend[];
  readonly pd: PdConfig;
  readonly lora: LoraConfig;
  /** alias -> target model */
  readonly aliases: ReadonlyMap<string, string>;
  readonly knownModels: readonly string[];
  readonly routingLogic: RoutingLogic;
  /** kvaware: KV-cache events and tokenization */
  readonly kv: KvConfig;
  readonly logLevel: LogLevel;
  readonly logFormat: 'text' | 'json';
  readonly logStatsIntervalMs: number;
  /** router processes sharing the port (node:cluster); 1 = this process serves */
  readonly workers: number;
  /** plain inference requests skip node:http (src/router/server/fast) */
  readonly fastPath: boolean;
  readonly maxBodyBytes: number;
  /** JSON routes: the smaller of this and maxBodyBytes */
  readonly maxJsonBodyBytes: number;
  readonly retryAfterSeconds: number;
  readonly syncWaitMs: number;
  readonly scaling: ScalingConfig;
  readonly engineKind: EngineKind;
  readonly engineApiKey: string | undefined;
  readonly engineTls: EngineTlsConfig;
  /** connections per engine at most (0 = no cap) */
  readonly maxConnectionsPerEngine: number;
  /** the engine client on the request path; only the benchmark sets it (env LLM_ROUTER_ENGINE_CLIENT=undici) */
  readonly engineClient: EngineClientKind;
  readonly forwardClientAuth: boolean;
  /** a client's kv_transfer_params go to engines of models not served P/D (never to P/D ones: the router names those) */
  readonly allowClientKvTransferParams: boolean;
  readonly security: SecurityConfig;
  readonly probe: ProbeConfig;
  readonly passiveFailureThreshold: number;
  readonly maxFailoverAttempts: number;
  /** --migration-limit: continuations of a stream broken mid-way, per request (0: off; src/router/proxy/migration) */
  readonly migrationLimit: number;
  readonly timeouts: TimeoutConfig;
  readonly engineStatsIntervalMs: number;
  /** --flow-control and its thresholds and caps; undefined when off */
  readonly flow: FlowConfig | undefined;
  /** session routing: lower-cased name of the header carrying the session key */
  readonly sessionKey: string | undefined;
  readonly prefixBlockChars: number;
  readonly prefixBalanceEpsilon: number;
  /** honour the x-llm-router-routing request header */
  readonly allowRoutingHeader: boolean;
  /** OpenTelemetry tracing (src/router/tracing); undefined: off (no endpoint configured) */
  readonly tracing: TracingConfig | undefined;
  /** settings accepted for vllm_router compatibility that change nothing, with the reason, for a startup log line */
  readonly compatibilityNotes: readonly string[];
}

const modelName = z
  .string()
  .min(1)
  .max(512)
  .regex(/^[^\s,]+$/, 'model names cannot contain spaces or commas');
const httpUrl = z.string().refine((s) => {
  try {
    const u = new URL(s);
    return (u.protocol === 'http:' || u.protocol === 'https:') && u.pathname.replace(/\/+$/, '') === '' && !u.search;
  } catch {
    return false;
  }
}, 'must be an http(s) URL with no path, e.g. http://10.0.0.5:8000');

function seconds(n: number | undefined): number {
  return Math.round((n ?? 0) * 1000);
}

/** prefill-decode is llm-d's name for both */
const ROLE_WORDS: ReadonlyMap<string, EndpointRole> = new Map([
  ['prefill', 'prefill'],
  ['decode', 'decode'],
  ['both', 'both'],
  ['prefill-decode', 'both'],
]);

function zipBackends(urls: readonly string[], models: readonly string[], roleWords: readonly string[]): StaticBackend[] {
  if (urls.length !== models.length) {
    throw new UsageError(
      `--static-backends has ${urls.length} URL(s) but --static-models has ${models.length} model(s); they are zipped one to one`,
    );
  }
  if (roleWords.length > 0 && roleWords.length !== urls.length) {
    throw new UsageError(
      `--static-backends has ${urls.length} URL(s) but --static-backend-roles has ${roleWords.length} role(s); they are zipped one to one`,
    );
  }
  const byUrl = new Map<string, { role: EndpointRole; models: string[] }>();
  urls.forEach((raw, i) => {
    const url = raw.replace(/\/+$/, '');
    const parsed = httpUrl.safeParse(url);
    if (!parsed.success)
      throw new UsageError(`--static-backends: ${JSON.stringify(raw)} ${parsed.error.issues[0]?.message ?? 'is invalid'}`);
    const model = models[i] as string;
    const m = modelName.safeParse(model);
    if (!m.success) throw new UsageError(`--static-models: ${JSON.stringify(model)}: ${m.error.issues[0]?.message ?? 'is invalid'}`);
    const word = roleWords[i]?.trim().toLowerCase() ?? 'both';
    const role = ROLE_WORDS.get(word);
    if (role === undefined)
      throw new UsageError(`--static-backend-roles: ${JSON.stringify(word)} is not a role; use prefill, decode or both`);
    const seen = byUrl.get(url) ?? { role, models: [] };
    if (seen.role !== role)
      throw new UsageError(`--static-backend-roles: ${url} is listed as ${seen.role} and as ${role}; an engine has one role`);
    if (!seen.models.includes(model)) seen.models.push(model);
    byUrl.set(url, seen);
  });
  return [...byUrl].map(([url, { role, models }]) => ({ url, models, role }));
}

function parseAliases(pairs: readonly string[]): Map<string, string> {
  const aliases = new Map<string, string>();
  for (const pair of pairs) {
    const idx = pair.indexOf(':');
    const alias = pair.slice(0, idx).trim();
    const target = pair.slice(idx + 1).trim();
    if (idx <= 0 || !alias || !target) throw new UsageError(`--static-aliases: ${JSON.stringify(pair)} must look like alias:model`);
    if (alias === target) throw new UsageError(`--static-aliases: ${JSON.stringify(pair)} points at itself`);
    aliases.set(alias, target);
  }
  for (const [alias, target] of aliases) {
    if (aliases.has(target))
      throw new UsageError(`--static-aliases: ${alias} -> ${target} -> ${aliases.get(target)}: aliases cannot chain`);
  }
  return aliases;
}

function parsePerModelSeconds(pairs: readonly string[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const pair of pairs) {
    const idx = pair.lastIndexOf('=');
    const model = pair.slice(0, idx).trim();
    const value = Number(pair.slice(idx + 1));
    if (idx <= 0 || !model || !Number.isFinite(value) || value < 0)
      throw new UsageError(`--cold-start-wait-per-model: ${JSON.stringify(pair)} must look like model=seconds`);
    out.set(model, Math.round(value * 1000));
  }
  return out;
}

/** --lora-adapters: each NAME@BASE=PATH, a name given once, and never the name of a model or alias. */
function parseLoraAdapters(entries: readonly string[], models: ReadonlySet<string>): AdapterDeclaration[] {
  const byName = new Map<string, AdapterDeclaration>();
  for (const entry of entries) {
    const parsed = parseAdapterFlag(entry);
    if (!parsed.ok) throw new UsageError(`--lora-adapters: ${parsed.why}`);
    const a = parsed.value;
    const m = modelName.safeParse(a.base);
    if (!m.success)
      throw new UsageError(`--lora-adapters: base model ${JSON.stringify(a.base)}: ${m.error.issues[0]?.message ?? 'is invalid'}`);
    if (byName.has(a.name)) throw new UsageError(`--lora-adapters: ${a.name} is given twice`);
    if (models.has(a.name))
      throw new UsageError(`--lora-adapters: ${a.name} is also a model or alias name; an adapter needs a name of its own`);
    if (a.name === a.base) throw new UsageError(`--lora-adapters: ${a.name} names itself as its base`);
    byName.set(a.name, a);
  }
  return [...byName.values()];
}

function normaliseLevel(level: RouterFlagValues['log-level']): LogLevel {
  if (level === 'warning') return 'warn';
  if (level === 'critical') return 'fatal';
  return level;
}

function isRoutingLogic(name: string): name is RoutingLogic {
  return (ROUTING_LOGICS as readonly string[]).includes(name);
}

/** KV-cache events are consumed only where kvaware can be asked for: its routing logic, or the per-request header. */
export function usesKvEvents(routingLogic: string, allowRoutingHeader: boolean): boolean {
  return routingLogic === 'kvaware' || allowRoutingHeader;
}

/**
 * The flag values (flags, env, the settings file, defaults), where each came from, and what the file gave. `fileText`:
 * the file's text as already read (a reload); else the file named in argv or env is read now.
 */
function readFlagValues(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
  fileText?: string,
): Omit<RouterSettings, 'config'> {
  const file = configFileOf(argv, env);
  const text = file ? (fileText ?? readConfigText(file)) : undefined;
  const fileValues = file && text !== undefined ? parseConfigText(file, text) : undefined;
  const parsed = parseFlags(argv, ROUTER_FLAGS, {
    env,
    envPrefix: 'LLM_ROUTER_',
    ...(fileValues && file ? { file: fileValues, fileName: `${file.flag} ${file.path}` } : {}),
    refused: REFUSED_FLAGS,
    notInFile: CONFIG_FILE_FLAGS,
    // the benchmark's switch between engine clients, and the settings a --workers primary starts its workers with (app/config-reload.ts)
    envAllowed: ['LLM_ROUTER_ENGINE_CLIENT', 'LLM_ROUTER_WORKER_SETTINGS'],
    envOtherPrefixes: ['LLM_ROUTER_SIM_', 'LLM_ROUTER_PROBE_', 'LLM_ROUTER_LINT_', 'LLM_ROUTER_DEMO_'],
  });
  return { values: parsed.values, sources: parsed.sources, fromFile: parsed.fromFile, file, fileText: text };
}

/** Whether a flag was given at all (on the command line, in env or in the file), by the sources of a parse. */
export function explicitIn(sources: ReadonlyMap<string, FlagSource>): (name: string) => boolean {
  return (name) => {
    const s = sources.get(name);
    return s !== undefined && s !== 'default';
  };
}

/** Discovery: static or Kubernetes, and for Kubernetes where and how its pods are found. */
function discoverySection(v: RouterFlagValues): Pick<RouterConfig, 'serviceDiscovery' | 'kubernetes'> {
  const discovery = v['service-discovery'];
  if (v['k8s-service-discovery-type'] !== 'pod-ip') {
    throw new UsageError(
      `--k8s-service-discovery-type ${JSON.stringify(v['k8s-service-discovery-type'])} is not available; only pod-ip is`,
    );
  }
  const kubernetes: KubernetesConfig | undefined =
    discovery === 'k8s'
      ? {
          namespace: v['k8s-namespace'] || undefined,
          labelSelector: v['k8s-label-selector'] || undefined,
          port: v['k8s-port'],
          scheme: v['k8s-engine-scheme'],
          modelLabel: v['k8s-model-label'],
          resyncMs: seconds(v['k8s-resync-seconds']),
          kvEvents: usesKvEvents(v['routing-logic'], v['allow-routing-header'])
            ? { port: v['kv-events-port'], replayPort: v['kv-events-replay-port'] }
            : undefined,
        }
      : undefined;
  return { serviceDiscovery: discovery, kubernetes };
}

/** Routing: the policy, the session header, prefix affinity, the per-request header (--feature-gates is refused here). */
function routingSection(
  v: RouterFlagValues,
): Pick<RouterConfig, 'routingLogic' | 'sessionKey' | 'prefixBlockChars' | 'prefixBalanceEpsilon' | 'allowRoutingHeader'> {
  const routing = v['routing-logic'];
  if (!isRoutingLogic(routing)) {
    throw new UsageError(`--routing-logic ${JSON.stringify(routing)} is not available; choose one of: ${ROUTING_LOGICS.join(', ')}`);
  }
  const sessionKey = v['session-key']?.trim().toLowerCase() || undefined;
  if (sessionKey !== undefined && !isHttpToken(sessionKey))
    throw new UsageError(`--session-key ${JSON.stringify(sessionKey)} is not a valid header name`);
  if (routing === 'session' && sessionKey === undefined)
    throw new UsageError('--routing-logic session needs --session-key HEADER (the request header that names the session)');
  if (v['feature-gates'])
    throw new UsageError(`--feature-gates ${JSON.stringify(v['feature-gates'])}: llm-router has no feature gates; remove the flag`);
  return {
    routingLogic: routing,
    sessionKey,
    prefixBlockChars: v['prefix-block-chars'],
    prefixBalanceEpsilon: v['prefix-balance-epsilon'],
    allowRoutingHeader: v['allow-routing-header'],
  };
}

/** Models: static backends (with their KV event sources), aliases, known models, and the LoRA adapters declared by flag. */
function modelsSection(v: RouterFlagValues): Pick<RouterConfig, 'staticBackends' | 'aliases' | 'knownModels' | 'lora'> {
  const kvSources = staticKvEvents(v['static-backends'], v);
  const staticBackends = zipBackends(v['static-backends'], v['static-models'], v['static-backend-roles']).map((b) => {
    const kvEvents = kvSources.get(b.url);
    return kvEvents ? { ...b, kvEvents } : b;
  });
  const aliases = parseAliases(v['static-aliases']);
  const knownModels = [...new Set(v['known-models'])];
  for (const m of [...knownModels, ...aliases.keys(), ...aliases.values()]) {
    const r = modelName.safeParse(m);
    if (!r.success) throw new UsageError(`model name ${JSON.stringify(m)}: ${r.error.issues[0]?.message ?? 'is invalid'}`);
  }
  const modelNames = new Set([...knownModels, ...staticBackends.flatMap((b) => b.models), ...aliases.keys()]);
  const loraAdapters = parseLoraAdapters(v['lora-adapters'], modelNames);
  return {
    staticBackends,
    aliases,
    knownModels,
    lora: {
      adapters: loraAdapters,
      spillThreshold: v['lora-spill-threshold'],
      maxLorasPerEngine: v['max-loras-per-engine'],
      loadCooldownMs: seconds(v['lora-load-cooldown-seconds']),
    },
  };
}

/** The KEDA scaler's peers and TLS: the part of scaling checked before the engine flags (its errors come first). */
function scalerSection(v: RouterFlagValues): Pick<ScalingConfig, 'peers' | 'kedaTls'> {
  const peers = v['scaler-peers'].map((u) => u.replace(/\/+$/, ''));
  for (const u of peers) {
    if (!httpUrl.safeParse(u).success)
      throw new UsageError(`--scaler-peers ${JSON.stringify(u)}: must be an http(s) base URL with no path, e.g. http://10.0.0.7:9090`);
  }
  const kedaCert = v['keda-tls-cert'] || undefined;
  const kedaKey = v['keda-tls-key'] || undefined;
  const kedaCa = v['keda-tls-ca'] || undefined;
  if ((kedaCert === undefined) !== (kedaKey === undefined))
    throw new UsageError('--keda-tls-cert and --keda-tls-key go together: give both or neither');
  if (kedaCa !== undefined && kedaCert === undefined)
    throw new UsageError('--keda-tls-ca (client certificates) needs --keda-tls-cert and --keda-tls-key (the server side of TLS)');
  if (kedaCert !== undefined && v['keda-scaler-port'] === undefined)
    throw new UsageError('--keda-tls-cert secures the KEDA scaler: set --keda-scaler-port too');
  return {
    peers,
    kedaTls: kedaCert !== undefined && kedaKey !== undefined ? { certFile: kedaCert, keyFile: kedaKey, caFile: kedaCa } : undefined,
  };
}

/** Engines: their kind, credentials, TLS, connection cap and the engine client on the request path. */
function engineSection(
  v: RouterFlagValues,
  env: Readonly<Record<string, string | undefined>>,
): Pick<
  RouterConfig,
  | 'engineKind'
  | 'engineApiKey'
  | 'engineTls'
  | 'maxConnectionsPerEngine'
  | 'engineClient'
  | 'forwardClientAuth'
  | 'allowClientKvTransferParams'
> {
  const clientCert = v['engine-client-cert'] || undefined;
  const clientKey = v['engine-client-key'] || undefined;
  if ((clientCert === undefined) !== (clientKey === undefined))
    throw new UsageError('--engine-client-cert and --engine-client-key go together: give both or neither');
  const engineClient = env.LLM_ROUTER_ENGINE_CLIENT ?? 'h1';
  if (engineClient !== 'h1' && engineClient !== 'undici')
    throw new UsageError(`LLM_ROUTER_ENGINE_CLIENT=${JSON.stringify(engineClient)}: h1 or undici`);
  return {
    engineKind: v['engine-kind'],
    engineApiKey: v['engine-api-key'] || undefined,
    engineTls: {
      caFile: v['engine-ca-file'] || undefined,
      clientCertFile: clientCert,
      clientKeyFile: clientKey,
      insecure: v['engine-tls-insecure'],
    },
    maxConnectionsPerEngine: v['max-connections-per-engine'],
    engineClient,
    forwardClientAuth: v['forward-client-auth'],
    allowClientKvTransferParams: v['allow-client-kv-transfer-params'],
  };
}

/** vllm_router settings accepted for compatibility that change nothing: a startup log line each. */
function compatibilityNotes(explicit: (name: string) => boolean): string[] {
  const notes: string[] = [];
  if (explicit('request-stats-window'))
    notes.push('--request-stats-window has no effect: llm-router exports counters and histograms; Prometheus computes windows');
  if (explicit('static-backend-health-checks'))
    notes.push('--static-backend-health-checks has no effect: model-aware probing of every endpoint is always on');
  if (explicit('static-backend-health-check-interval'))
    notes.push('--static-backend-health-check-interval has no effect: endpoints are probed every --probe-interval');
  if (explicit('static-model-types'))
    notes.push('--static-model-types has no effect: probes read /v1/models and never send inference requests');
  return notes;
}

/** Scaling: cold-start holds, the KEDA scaler (its peers and TLS checked earlier by scalerSection), scale-to-zero. */
function scalingSection(v: RouterFlagValues, scaler: Pick<ScalingConfig, 'peers' | 'kedaTls'>): ScalingConfig {
  return {
    coldStartWaitMs: seconds(v['cold-start-wait']),
    coldStartWaitPerModelMs: parsePerModelSeconds(v['cold-start-wait-per-model']),
    queueSize: v['cold-start-queue-size'],
    releasePerEndpoint: v['cold-start-release-per-endpoint'],
    kedaScalerPort: v['keda-scaler-port'],
    graceMs: seconds(v['scale-to-zero-grace-seconds']),
    wakeAlarmMs: seconds(v['wake-alarm-seconds']),
    maxRetryAfterSeconds: v['max-retry-after'],
    peers: scaler.peers,
    peerSelector: v['scaler-peer-selector'] || undefined,
    peerNamespace: v['scaler-peer-namespace'] || v['k8s-namespace'] || undefined,
    peerTimeoutMs: v['scaler-peer-timeout-ms'],
    kedaTls: scaler.kedaTls,
  };
}

/** Security: API keys, the admin port, header and rate limits, trusted proxies, concurrency, client and shutdown times. */
function securitySection(v: RouterFlagValues): SecurityConfig {
  return {
    apiKeys: v['api-key'],
    apiKeysFile: v['api-keys-file'] || undefined,
    adminPort: v['admin-port'],
    maxHeaderBytes: v['max-header-bytes'],
    rateLimitRps: v['rate-limit-rps'],
    rateLimitBurst: v['rate-limit-burst'] || Math.max(1, Math.ceil(v['rate-limit-rps'])),
    trustedProxies: trustedProxies(v['trusted-proxies']),
    maxConcurrentRequests: v['max-concurrent-requests'],
    clientTimeoutMs: seconds(v['client-timeout']),
    drainMs: seconds(v['drain-seconds']),
    shutdownTimeoutMs: seconds(v['shutdown-timeout']),
  };
}

/** Health: active probes of every endpoint, and how many failed requests mark one failed. */
function probeSection(v: RouterFlagValues): ProbeConfig {
  return {
    intervalMs: seconds(v['probe-interval']),
    wakeIntervalMs: seconds(v['probe-wake-interval']),
    readyIntervalMs: seconds(v['probe-ready-interval']),
    timeoutMs: seconds(v['probe-timeout']),
    failureThreshold: v['probe-failure-threshold'],
    successThreshold: v['probe-success-threshold'],
    startupTimeoutMs: seconds(v['probe-startup-timeout']),
    warmup: v['probe-warmup'],
  };
}

/** Timeouts of a request to an engine: connect, headers, idle between body bytes, the whole request. */
/** Flow control (src/router/flow): its thresholds, time-out and caps. */
export interface FlowConfig {
  readonly queueDepthThreshold: number;
  readonly kvCacheThreshold: number;
  readonly metricsStalenessMs: number;
  readonly queueTimeoutMs: number;
  readonly maxRequests: number;
  readonly maxBytes: number;
  readonly bandMaxRequests: number;
  readonly bandMaxBytes: number;
}

/**
 * --flow-control: off, nothing; on, its settings, and the engine-stats interval it needs (metrics older than
 * --flow-metrics-staleness-ms count as full, so they are scraped every 0.1 s unless --engine-stats-interval is given).
 */
function flowSection(v: RouterFlagValues, explicit: (name: string) => boolean): { flow: FlowConfig | undefined; statsIntervalMs: number } {
  const given = seconds(v['engine-stats-interval']);
  if (!v['flow-control']) return { flow: undefined, statsIntervalMs: given };
  const statsIntervalMs = explicit('engine-stats-interval') ? given : 100;
  const staleness = v['flow-metrics-staleness-ms'];
  if (staleness <= statsIntervalMs)
    throw new UsageError(
      `--flow-metrics-staleness-ms ${staleness} must exceed the engine-stats interval (${statsIntervalMs} ms): every engine would count as saturated between two scrapes`,
    );
  if (v['flow-kv-cache-threshold'] > 1) throw new UsageError('--flow-kv-cache-threshold is a share of the KV cache: at most 1');
  return {
    statsIntervalMs,
    flow: {
      queueDepthThreshold: v['flow-queue-depth-threshold'],
      kvCacheThreshold: v['flow-kv-cache-threshold'],
      metricsStalenessMs: staleness,
      queueTimeoutMs: seconds(v['flow-queue-timeout']),
      maxRequests: v['flow-max-requests'],
      maxBytes: v['flow-max-bytes'],
      bandMaxRequests: v['flow-band-max-requests'],
      bandMaxBytes: v['flow-band-max-bytes'],
    },
  };
}

function timeoutsSection(v: RouterFlagValues): TimeoutConfig {
  return {
    connectMs: seconds(v['connect-timeout']),
    headersMs: seconds(v['response-timeout']),
    idleMs: seconds(v['idle-timeout']),
    totalMs: seconds(v['total-timeout']),
  };
}

/** The router's settings: its configuration and the flag values it was built from, with their sources. */
export interface RouterSettings {
  readonly config: RouterConfig;
  readonly values: RouterFlagValues;
  /** where each flag's value came from */
  readonly sources: ReadonlyMap<string, FlagSource>;
  /** what the settings file gave, by flag name (also where a flag or env wins over it) */
  readonly fromFile: ReadonlyMap<string, FlagValue>;
  /** the settings file, when one is named */
  readonly file: ConfigFileRef | undefined;
  /** its text, as read for these settings */
  readonly fileText: string | undefined;
}

/** Static discovery with no backend, no known model and no alias routes nothing: refused at start-up and on a reload. */
export function requireSomethingToRoute(config: RouterConfig): void {
  if (
    config.serviceDiscovery === 'static' &&
    config.staticBackends.length === 0 &&
    config.knownModels.length === 0 &&
    config.aliases.size === 0
  ) {
    throw new UsageError(
      'nothing to route to: give engines with --static-backends URL,... and --static-models MODEL,... (env LLM_ROUTER_STATIC_BACKENDS, LLM_ROUTER_STATIC_MODELS), or --service-discovery k8s, or declare --known-models',
    );
  }
}

/** The router's configuration from argv, env and the settings file (--config). */
export function loadRouterConfig(argv: readonly string[], env: Readonly<Record<string, string | undefined>> = process.env): RouterConfig {
  return loadRouterSettings(argv, env).config;
}

/**
 * The router's settings from argv, env and the settings file; `fileText`, the file's text as a reload read it (else
 * the file is read now). Every check of a start-up runs, so a new version of the file is refused for what a start-up
 * would refuse.
 */
export function loadRouterSettings(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>> = process.env,
  fileText?: string,
): RouterSettings {
  const read = readFlagValues(argv, env, fileText);
  return { ...read, config: buildRouterConfig(read.values, explicitIn(read.sources), env) };
}

/**
 * The configuration from flag values. Each section is built by its own function; they run in the order their usage
 * errors are reported (the first one found is thrown), which is why the KEDA scaler's checks (scalerSection) come
 * before the engine flags' while the rest of scaling is read with the other sections.
 */
export function buildRouterConfig(
  v: RouterFlagValues,
  explicit: (name: string) => boolean,
  env: Readonly<Record<string, string | undefined>>,
): RouterConfig {
  const discovery = discoverySection(v);
  const routing = routingSection(v);
  const models = modelsSection(v);
  const scaler = scalerSection(v);
  const engine = engineSection(v, env);
  const tracing = tracingSection(v, env);
  const flow = flowSection(v, explicit);
  const notes = compatibilityNotes(explicit);
  if (tracing === undefined && (explicit('otel-service-name') || explicit('otel-secure')))
    notes.push(
      '--otel-service-name and --otel-secure have no effect without an endpoint: tracing is off (set --otel-endpoint or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)',
    );

  // the remaining sections are built in this literal, in the order they always were (kv, scaling, security)
  return {
    host: v.host,
    port: v.port,
    serviceDiscovery: discovery.serviceDiscovery,
    kubernetes: discovery.kubernetes,
    staticBackends: models.staticBackends,
    pd: {
      protocol: v['pd-protocol'],
      sglangBootstrapPort: v['sglang-bootstrap-port'],
      minPromptChars: v['pd-min-prompt-chars'],
    },
    lora: models.lora,
    aliases: models.aliases,
    knownModels: models.knownModels,
    routingLogic: routing.routingLogic,
    kv: kvConfig(v, env),
    logLevel: normaliseLevel(v['log-level']),
    logFormat: v['log-format'],
    logStatsIntervalMs: v['log-stats'] ? seconds(v['log-stats-interval']) : 0,
    workers: v.workers,
    fastPath: v['fast-path'],
    maxBodyBytes: v['max-body-bytes'],
    maxJsonBodyBytes: v['max-json-body-bytes'],
    retryAfterSeconds: v['retry-after'],
    syncWaitMs: seconds(v['sync-wait-seconds']),
    scaling: scalingSection(v, scaler),
    engineKind: engine.engineKind,
    engineApiKey: engine.engineApiKey,
    engineTls: engine.engineTls,
    maxConnectionsPerEngine: engine.maxConnectionsPerEngine,
    engineClient: engine.engineClient,
    forwardClientAuth: engine.forwardClientAuth,
    allowClientKvTransferParams: engine.allowClientKvTransferParams,
    security: securitySection(v),
    probe: probeSection(v),
    passiveFailureThreshold: v['passive-failure-threshold'],
    maxFailoverAttempts: v['max-instance-failover-reroute-attempts'],
    migrationLimit: v['migration-limit'],
    timeouts: timeoutsSection(v),
    engineStatsIntervalMs: flow.statsIntervalMs,
    flow: flow.flow,
    sessionKey: routing.sessionKey,
    prefixBlockChars: routing.prefixBlockChars,
    prefixBalanceEpsilon: routing.prefixBalanceEpsilon,
    allowRoutingHeader: routing.allowRoutingHeader,
    tracing,
    compatibilityNotes: notes,
  };
}
