// What forwarding a request tells the rest of the router: how an attempt failed, and who hears about it (the prober,
// which alone moves endpoint states).
import type { Endpoint } from './endpoint.js';

export type FailureKind =
  | 'connect'
  | 'reset'
  | 'engine-5xx'
  /** an engine refused a stream's continuation (a 4xx, or an answer that is no stream): the request's, not the engine's fault */
  | 'engine-4xx'
  | 'engine-busy'
  /** the engine answered 404 for a LoRA adapter: it does not hold it (only for requests that ask to learn it) */
  | 'model-missing'
  | 'headers-timeout'
  | 'idle-timeout'
  | 'total-timeout'
  | 'protocol'
  | 'other';

/** Counts the requests forwarded to each endpoint now (the catalog, which owns endpoints). */
export interface InFlightLedger {
  requestStarted(endpoint: Endpoint): void;
  requestEnded(endpoint: Endpoint): void;
}

/** Where attempt results go: passive health and metrics. */
export interface ForwardObserver {
  succeeded(endpoint: Endpoint): void;
  failed(endpoint: Endpoint, failure: FailureKind, detail: string): void;
  failover(model: string): void;
}

/**
 * How a stream broken mid-way fared (--migration-limit, src/router/proxy/migration): `migrated`, continued on another
 * engine; `completed`, a continuation reached the stream's end; `failed`, a continuation got no stream from the
 * engines tried; `refused`, a stream that must not be continued (n > 1, logprobs, echo, a seed, tool calls, ...);
 * `limit`, the request had its --migration-limit migrations; `no-endpoint`, no other ready endpoint.
 */
export type MigrationOutcome = 'migrated' | 'completed' | 'failed' | 'refused' | 'limit' | 'no-endpoint';

export const MIGRATION_OUTCOMES: readonly MigrationOutcome[] = ['migrated', 'completed', 'failed', 'refused', 'limit', 'no-endpoint'];

/** Where migrations are told: metrics and the dashboard's timeline. */
export interface MigrationObserver {
  migration(model: string, outcome: MigrationOutcome): void;
}
