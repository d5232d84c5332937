// What forwarding a request tells the rest of the router: how an attempt failed, and who hears about it (the prober,
// which alone moves endpoint states).
import type { Endpoint } from './endpoint.js';

export type FailureKind =
  | 'connect'
  | 'reset'
  | 'engine-5xx'
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
