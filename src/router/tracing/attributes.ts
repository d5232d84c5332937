// The attribute and span names the router's traces use, once. Names follow the OpenTelemetry semantic conventions where
// they have one (HTTP, server, URL, error, GenAI); the router's own are under llm_router.*. Values are names, numbers,
// states and the router's own codes: never a prompt, a body, a key or an Authorization header.

// HTTP and network (stable semantic conventions)
export const HTTP_REQUEST_METHOD = 'http.request.method';
export const HTTP_ROUTE = 'http.route';
export const HTTP_RESPONSE_STATUS_CODE = 'http.response.status_code';
export const SERVER_ADDRESS = 'server.address';
export const SERVER_PORT = 'server.port';
export const URL_PATH = 'url.path';
export const URL_FULL = 'url.full';
export const ERROR_TYPE = 'error.type';
// GenAI (semantic conventions, development)
export const GEN_AI_REQUEST_MODEL = 'gen_ai.request.model';
export const GEN_AI_RESPONSE_MODEL = 'gen_ai.response.model';
// the resource
export const SERVICE_NAME = 'service.name';
export const SERVICE_INSTANCE_ID = 'service.instance.id';
export const SERVICE_VERSION = 'service.version';
export const PROCESS_PID = 'process.pid';

// the router's own
export const REQUEST_ID = 'llm_router.request_id';
/** the model the request resolved to (an alias's target, an adapter) */
export const RESOLVED_MODEL = 'llm_router.model';
export const STREAM = 'llm_router.stream';
/** the stable code of an error the router answered itself (model_not_found, queue_full, ...) */
export const ERROR_CODE = 'llm_router.error_code';
export const MODEL_STATE = 'llm_router.model_state';
/** a held request: the model's state when the hold ended */
export const MODEL_STATE_AFTER = 'llm_router.model_state_after';
export const HOLD_OUTCOME = 'llm_router.hold.outcome';
/** flow control: the request's tenant, priority, and how its wait ended (dispatched, or why refused) */
export const FLOW_TENANT = 'llm_router.flow.tenant';
export const FLOW_PRIORITY = 'llm_router.flow.priority';
export const FLOW_OUTCOME = 'llm_router.flow.outcome';
export const ENDPOINT = 'llm_router.endpoint';
export const ROLE = 'llm_router.role';
export const ATTEMPT = 'llm_router.attempt';
export const OUTCOME = 'llm_router.outcome';
export const FAILURE = 'llm_router.failure';
export const TIME_TO_FIRST_BYTE_MS = 'llm_router.time_to_first_byte_ms';
export const POLICY = 'llm_router.routing.policy';
export const KV_BLOCKS = 'llm_router.kv.blocks';
export const KV_MATCHED_BLOCKS = 'llm_router.kv.matched_blocks';
export const KV_FALLBACK = 'llm_router.kv.fallback';
export const TOKENIZE_OUTCOME = 'llm_router.tokenize.outcome';
export const ADAPTER = 'llm_router.adapter';
export const ADAPTER_WAITED = 'llm_router.adapter.waited';
export const BODY_BYTES = 'llm_router.body_bytes';
export const PD_PROTOCOL = 'llm_router.pd.protocol';
export const DECODE_ENDPOINT = 'llm_router.decode.endpoint';
export const PREFILL_ENDPOINT = 'llm_router.prefill.endpoint';
export const WORKER = 'llm_router.worker';
/** a stream's migration (event llm_router.migration): tokens the client had, which migration of the request, why not */
export const MIGRATION_TOKENS = 'llm_router.migration.tokens_sent';
export const MIGRATION_NUMBER = 'llm_router.migration.number';
export const MIGRATION_REASON = 'llm_router.migration.reason';

// event names (on the request's span)
export const EVENT = {
  /** a stream broken mid-way: continued on another engine, or why not */
  migration: 'llm_router.migration',
} as const;

// span names
export const SPAN = {
  readBody: 'llm_router.read_body',
  /** a request for a model not known yet, waiting for discovery's first listing */
  syncWait: 'llm_router.sync_wait',
  hold: 'llm_router.hold',
  /** a request waiting in flow control for room on its saturated pool */
  flow: 'llm_router.flow',
  route: 'llm_router.route',
  tokenize: 'llm_router.tokenize',
  adapter: 'llm_router.adapter',
  adapterLoad: 'llm_router.lora.load',
  adapterUnload: 'llm_router.lora.unload',
  engine: 'llm_router.engine',
  prefill: 'llm_router.engine.prefill',
} as const;
