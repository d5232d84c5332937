// Every `llm-router serve` setting, once. Flags, env (LLM_ROUTER_<NAME>) and the YAML file (--config) all map onto this table.
// Names follow vllm_router where it has one, so that its users can swap binaries.
import type { FlagSpec } from '../cli/flags.js';

export const ROUTING_LOGICS = ['roundrobin'] as const;
export const ENGINE_KINDS = ['vllm', 'sglang', 'tgi', 'openai'] as const;

export const ROUTER_FLAGS: readonly FlagSpec[] = [
  { name: 'config', kind: 'string', help: 'YAML file with settings (keys are flag names); flags and env override it' },
  { name: 'host', kind: 'string', default: '0.0.0.0', help: 'address to listen on' },
  { name: 'port', kind: 'int', default: 8001, min: 0, help: 'port to listen on (0 = any free port)' },
  { name: 'service-discovery', kind: 'string', default: 'static', help: 'where engines come from: static (k8s is not available in this version)' },
  { name: 'static-backends', kind: 'list', default: [], help: 'engine URLs, comma separated, zipped one to one with --static-models (a URL may repeat)' },
  { name: 'static-models', kind: 'list', default: [], help: 'model served by each static backend, comma separated' },
  { name: 'static-aliases', kind: 'list', default: [], help: 'alias:model pairs, comma separated; requests for the alias go to the model' },
  {
    name: 'known-models', kind: 'list', default: [], aliases: ['k8s-known-models'], env: ['VLLM_ROUTER_KNOWN_MODELS'],
    help: 'models that exist even with no engine (scaled to zero): they answer 503 + Retry-After, not 404',
  },
  { name: 'routing-logic', kind: 'string', default: 'roundrobin', help: `routing policy: ${ROUTING_LOGICS.join(', ')}` },
  { name: 'log-level', kind: 'string', default: 'info', choices: ['trace', 'debug', 'info', 'warn', 'warning', 'error', 'critical', 'fatal', 'silent'], help: 'log level' },
  { name: 'log-format', kind: 'string', default: 'text', choices: ['text', 'json'], help: 'log format' },
  { name: 'log-stats', kind: 'boolean', default: false, help: 'log a summary of models, endpoints and requests periodically' },
  { name: 'log-stats-interval', kind: 'number', default: 10, min: 0.1, help: 'seconds between --log-stats lines' },
  { name: 'max-body-bytes', kind: 'int', default: 32 * 1024 * 1024, min: 1, help: 'largest request body accepted (413 body_too_large above it)' },
  { name: 'retry-after', kind: 'int', default: 5, min: 1, help: 'Retry-After seconds on 503 model_unavailable answers' },
  { name: 'engine-kind', kind: 'string', default: 'vllm', choices: ENGINE_KINDS, help: 'how to tell that an engine has loaded its model' },
  { name: 'engine-api-key', kind: 'string', env: ['VLLM_API_KEY'], help: 'API key sent to engines as Authorization: Bearer (probes and requests)' },
  { name: 'forward-client-auth', kind: 'boolean', default: false, help: "forward the client's Authorization header to engines (otherwise it is dropped and --engine-api-key is sent)" },
  { name: 'probe-interval', kind: 'number', default: 1, min: 0.05, help: 'seconds between probes of an endpoint that is not ready yet' },
  { name: 'probe-ready-interval', kind: 'number', default: 5, min: 0.05, help: 'seconds between probes of a ready endpoint' },
  { name: 'probe-timeout', kind: 'number', default: 2, min: 0.05, aliases: ['backend-health-check-timeout-seconds'], help: 'seconds a probe may take' },
  { name: 'probe-failure-threshold', kind: 'int', default: 3, min: 1, help: 'consecutive failed probes that mark a ready endpoint failed' },
  { name: 'probe-success-threshold', kind: 'int', default: 1, min: 1, help: 'consecutive good probes that mark an endpoint ready' },
  { name: 'probe-startup-timeout', kind: 'number', default: 1800, min: 1, help: 'seconds an endpoint may take to become ready before it counts as failed' },
  { name: 'probe-warmup', kind: 'boolean', default: false, help: 'send a one-token completion before declaring an endpoint ready' },
  { name: 'passive-failure-threshold', kind: 'int', default: 3, min: 1, help: 'consecutive failed requests that mark an endpoint failed at once' },
  { name: 'max-instance-failover-reroute-attempts', kind: 'int', default: 2, min: 0, help: 'retries on another endpoint when an engine fails before any byte reached the client' },
  { name: 'connect-timeout', kind: 'number', default: 2, min: 0.01, help: 'seconds to connect to an engine' },
  { name: 'response-timeout', kind: 'number', default: 300, min: 0.01, help: 'seconds until the engine sends response headers' },
  { name: 'idle-timeout', kind: 'number', default: 120, min: 0.01, help: 'seconds allowed between two chunks of a response' },
  { name: 'total-timeout', kind: 'number', default: 0, min: 0, help: 'seconds a whole request may take (0 = no limit)' },
  { name: 'engine-stats-interval', kind: 'number', default: 1, min: 0.05, help: 'seconds between scrapes of engine /metrics (load signals for /engines)' },
  { name: 'request-stats-window', kind: 'int', default: 60, min: 1, help: 'accepted for vllm_router compatibility; Prometheus computes windows from our counters' },
  { name: 'static-backend-health-checks', kind: 'boolean', default: false, help: 'accepted for vllm_router compatibility; model-aware probing is always on' },
  { name: 'static-model-types', kind: 'list', default: [], help: 'accepted for vllm_router compatibility (chat, completion, embeddings, rerank, score, ...); probes never send inference' },
  { name: 'request-rewriter', kind: 'string', default: 'noop', choices: ['noop'], help: 'accepted for vllm_router compatibility; only noop exists' },
  { name: 'feature-gates', kind: 'string', default: '', help: 'accepted for vllm_router compatibility when empty' },
];

const NOT_SUPPORTED = 'remove it from the command line';

/** vllm_router flags that llm-router refuses with a one-line reason instead of silently ignoring them. */
export const REFUSED_FLAGS: ReadonlyMap<string, string> = new Map([
  ['enable-batch-api', `the batch/files API is not implemented; ${NOT_SUPPORTED}`],
  ['file-storage-class', `the batch/files API is not implemented; ${NOT_SUPPORTED}`],
  ['file-storage-path', `the batch/files API is not implemented; ${NOT_SUPPORTED}`],
  ['batch-processor', `the batch/files API is not implemented; ${NOT_SUPPORTED}`],
  ['callbacks', `Python callback handlers cannot be loaded; ${NOT_SUPPORTED}`],
  ['dynamic-config-yaml', 'use --config FILE (a YAML file of flag names) instead'],
  ['dynamic-config-json', 'use --config FILE (a YAML file of flag names) instead'],
  ['static-model-labels', `model labels (P/D disaggregation) are not implemented; ${NOT_SUPPORTED}`],
  ['prefill-model-labels', `P/D disaggregated routing is not implemented; ${NOT_SUPPORTED}`],
  ['decode-model-labels', `P/D disaggregated routing is not implemented; ${NOT_SUPPORTED}`],
  ['kv-aware-threshold', `kvaware routing (LMCache controller) is not implemented; ${NOT_SUPPORTED}`],
  ['lmcache-controller-port', `kvaware routing (LMCache controller) is not implemented; ${NOT_SUPPORTED}`],
  ['lmcache-health-check-interval', `kvaware routing (LMCache controller) is not implemented; ${NOT_SUPPORTED}`],
  ['lmcache-worker-timeout', `kvaware routing (LMCache controller) is not implemented; ${NOT_SUPPORTED}`],
  ['sentry-dsn', `Sentry reporting is not implemented; ${NOT_SUPPORTED}`],
  ['sentry-traces-sample-rate', `Sentry reporting is not implemented; ${NOT_SUPPORTED}`],
  ['sentry-profile-session-sample-rate', `Sentry reporting is not implemented; ${NOT_SUPPORTED}`],
  ['otel-endpoint', `OpenTelemetry tracing is not implemented; ${NOT_SUPPORTED}`],
  ['otel-service-name', `OpenTelemetry tracing is not implemented; ${NOT_SUPPORTED}`],
  ['otel-secure', `OpenTelemetry tracing is not implemented; ${NOT_SUPPORTED}`],
  ['semantic-cache-model', `the semantic cache is not implemented; ${NOT_SUPPORTED}`],
  ['semantic-cache-dir', `the semantic cache is not implemented; ${NOT_SUPPORTED}`],
  ['semantic-cache-threshold', `the semantic cache is not implemented; ${NOT_SUPPORTED}`],
  ['k8s-port', 'Kubernetes discovery is not available in this version; use --service-discovery static'],
  ['k8s-namespace', 'Kubernetes discovery is not available in this version; use --service-discovery static'],
  ['k8s-label-selector', 'Kubernetes discovery is not available in this version; use --service-discovery static'],
  ['k8s-service-discovery-type', 'Kubernetes discovery is not available in this version; use --service-discovery static'],
  ['k8s-watcher-timeout-seconds', 'Kubernetes discovery is not available in this version; use --service-discovery static'],
  ['session-key', 'session routing is not available in this version; use --routing-logic roundrobin'],
]);
