// Where each live setting goes when a new version of the settings file is applied (config-reload.ts decides what
// changed): the static source's declarations and endpoints into the catalog (level-triggered: a removed backend leaves
// the catalog, takes no new request, and its requests in flight finish on their connections, which close after them),
// the routing settings into new policies, the limits into admission and flow control. Each group is applied only
// when one of its settings changed, so that nothing else starts afresh (round-robin turns, rate-limit buckets).
import type { ModelCatalog } from '../catalog/catalog.js';
import type { FlowConfig, RouterConfig } from '../config/config.js';
import type { RouterFlagValues } from '../config/router-flags.js';
import { applyStaticSource } from '../discovery/static.js';
import type { FlowController, FlowLimits } from '../flow/controller.js';
import type { InferenceDeps } from '../server/pipeline.js';
import type { EngineSide } from './engine-side.js';
import type { AdmissionGate } from './http-side.js';

type FlagName = keyof RouterFlagValues;

/** The live settings by where they go; the last group changes nothing here (vllm_router's settings without effect). */
export const LIVE_GROUPS = {
  catalog: [
    'static-backends',
    'static-models',
    'static-backend-roles',
    'static-backend-kv-events',
    'static-backend-kv-replay',
    'static-aliases',
    'known-models',
    'lora-adapters',
  ],
  routing: ['routing-logic', 'session-key', 'prefix-block-chars', 'prefix-balance-epsilon', 'allow-routing-header'],
  admission: ['rate-limit-rps', 'rate-limit-burst', 'trusted-proxies', 'max-concurrent-requests'],
  flow: [
    'flow-queue-depth-threshold',
    'flow-kv-cache-threshold',
    'flow-metrics-staleness-ms',
    'flow-queue-timeout',
    'flow-max-requests',
    'flow-max-bytes',
    'flow-band-max-requests',
    'flow-band-max-bytes',
  ],
  none: [
    'request-stats-window',
    'static-backend-health-checks',
    'static-backend-health-check-interval',
    'static-model-types',
    'request-rewriter',
    'feature-gates',
  ],
} as const satisfies Readonly<Record<string, readonly FlagName[]>>;

/** What a new configuration is applied to: RouterApp's parts. */
export interface LiveParts {
  readonly catalog: ModelCatalog;
  readonly reroute: EngineSide['reroute'];
  readonly deps: Pick<InferenceDeps, 'policyName'>;
  readonly admission: Pick<AdmissionGate, 'update'>;
  readonly flow: Pick<FlowController, 'setLimits'> | undefined;
}

/** Flow control's thresholds, caps and time-out. */
export function flowLimits(config: FlowConfig): FlowLimits {
  return {
    thresholds: { queueDepth: config.queueDepthThreshold, kvCache: config.kvCacheThreshold, stalenessMs: config.metricsStalenessMs },
    queueTimeoutMs: config.queueTimeoutMs,
    maxRequests: config.maxRequests,
    maxBytes: config.maxBytes,
    bandMaxRequests: config.bandMaxRequests,
    bandMaxBytes: config.bandMaxBytes,
  };
}

/** Applies `config`, of which the settings in `live` changed, to the running router. */
export function applyLive(parts: LiveParts, config: RouterConfig, live: ReadonlySet<string>): void {
  const touches = (group: readonly string[]): boolean => group.some((name) => live.has(name));
  if (touches(LIVE_GROUPS.catalog)) applyStaticSource(parts.catalog, config);
  if (touches(LIVE_GROUPS.routing)) {
    parts.reroute(config);
    parts.deps.policyName = config.routingLogic;
  }
  if (touches(LIVE_GROUPS.admission)) parts.admission.update(config.security);
  if (touches(LIVE_GROUPS.flow) && parts.flow !== undefined && config.flow !== undefined) parts.flow.setLimits(flowLimits(config.flow));
}
