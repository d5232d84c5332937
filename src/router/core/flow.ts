// A request's flow for flow control: who it belongs to (its tenant) and at which priority. The words and bounds live
// here so that the API-keys file's parser (config), the flow of a request (server) and the flow controller below the
// server all read them alike.

/** Who a request belongs to and how urgent it is. Negative priority: sheddable (refused at once when saturated). */
export interface FlowIdentity {
  readonly tenant: string;
  readonly priority: number;
}

/** The tenant of a request that names none (no API keys in use and no fairness id). */
export const DEFAULT_TENANT = 'default';

/** Priorities are integers in [PRIORITY_MIN, PRIORITY_MAX]; a larger one is served first. */
export const PRIORITY_MIN = -1000;
export const PRIORITY_MAX = 1000;

/** A tenant name (a fairness id or a key's `tenant`) may hold at most this many characters. */
export const TENANT_MAX_CHARS = 128;

/** The flow of a request with no key, no fairness id and no priority header: one object, never copied. */
export const DEFAULT_FLOW: FlowIdentity = Object.freeze({ tenant: DEFAULT_TENANT, priority: 0 });

/** True for 1..TENANT_MAX_CHARS printable ASCII characters (space to `~`), not starting or ending with a space. */
export function isTenantName(s: string): boolean {
  const n = s.length;
  if (n === 0 || n > TENANT_MAX_CHARS || s.charCodeAt(0) === 0x20 || s.charCodeAt(n - 1) === 0x20) return false;
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

/** True for an integer in [PRIORITY_MIN, PRIORITY_MAX]. */
export function isPriority(n: unknown): n is number {
  return typeof n === 'number' && Number.isInteger(n) && n >= PRIORITY_MIN && n <= PRIORITY_MAX;
}
