// The flow of a request (who it belongs to, at which priority) for flow control: from the accepted API key's entry,
// the x-gateway-inference-fairness-id header (without keys, or from a trusted key: a gateway's) and the
// x-llm-router-priority header. Pure, and cheap on every request: a request that names no other flow than its key's
// (or the default one) gets an object made once; only a header naming another allocates the result.
import type { IncomingHttpHeaders } from 'node:http';
import type { KeyEntry } from '../config/api-keys-file.js';
import {
  DEFAULT_FLOW,
  DEFAULT_TENANT,
  type FlowIdentity,
  isTenantName,
  PRIORITY_MAX,
  PRIORITY_MIN,
  TENANT_MAX_CHARS,
} from '../core/flow.js';
import { errors, type RouterError } from './errors.js';

/** the Gateway API Inference Extension's name for the tenant a request belongs to */
export const FAIRNESS_ID_HEADER = 'x-gateway-inference-fairness-id';
export const PRIORITY_HEADER = 'x-llm-router-priority';

/** at most this many digits: enough for any value in range with leading zeros, too few to overflow */
const MAX_PRIORITY_DIGITS = 6;

/** The header's integer when it is one in [PRIORITY_MIN, PRIORITY_MAX] (`-5`, `+5`, `05`); undefined otherwise. */
export function parsePriority(raw: string): number | undefined {
  const n = raw.length;
  let i = 0;
  const sign = n > 0 ? raw.charCodeAt(0) : 0;
  if (sign === 0x2d || sign === 0x2b) i = 1;
  if (n === i || n - i > MAX_PRIORITY_DIGITS) return undefined;
  let v = 0;
  for (; i < n; i++) {
    const d = raw.charCodeAt(i) - 0x30;
    if (d < 0 || d > 9) return undefined;
    v = v * 10 + d;
  }
  if (sign === 0x2d) v = -v;
  // + 0: "-0" is 0, not -0
  return v >= PRIORITY_MIN && v <= PRIORITY_MAX ? v + 0 : undefined;
}

/** what is wrong with a value, told without echoing much of it */
function shown(raw: string): string {
  return JSON.stringify(raw.length > 32 ? `${raw.slice(0, 32)}...` : raw);
}

function badFairnessId(raw: string | string[]): RouterError {
  if (typeof raw !== 'string') return errors.invalidFairnessId('it was sent more than once');
  if (raw.length > TENANT_MAX_CHARS) return errors.invalidFairnessId(`it is ${raw.length} characters long`);
  return errors.invalidFairnessId(`got ${shown(raw)}`);
}

/**
 * The flow of a request, or the 400 to answer it with. `key`: the entry of the API key the request presented
 * (`ApiKeys.entryOf`), undefined when no keys are in use. Tell the two results apart with `'status' in result`.
 *
 * - tenant: the key's tenant; without keys, or for a trusted key, the fairness id header when it is sent and not
 *   empty (else the key's tenant, or `default`). A fairness id from any other key is ignored.
 * - priority: the priority header, lowered to the key's max_priority; without it the key's priority, else 0.
 */
export function flowOf(headers: IncomingHttpHeaders, key: KeyEntry | undefined): FlowIdentity | RouterError {
  let tenant = key === undefined ? DEFAULT_TENANT : key.tenant;
  if (key === undefined || key.trusted) {
    const id = headers[FAIRNESS_ID_HEADER];
    if (id !== undefined && id !== '') {
      if (typeof id !== 'string' || !isTenantName(id)) return badFairnessId(id);
      tenant = id;
    }
  }
  let priority = key === undefined ? 0 : key.priority;
  const raw = headers[PRIORITY_HEADER];
  if (raw !== undefined) {
    const p = typeof raw === 'string' ? parsePriority(raw) : undefined;
    if (p === undefined) return errors.invalidPriority(typeof raw === 'string' ? `got ${shown(raw)}` : 'it was sent more than once');
    priority = key !== undefined && p > key.maxPriority ? key.maxPriority : p;
  }
  const made = key === undefined ? DEFAULT_FLOW : key.flow;
  return tenant === made.tenant && priority === made.priority ? made : { tenant, priority };
}
