// The endpoint lifecycle as pure functions: what a probe result or a run of request failures does to an endpoint's state,
// and when to probe next. The prober owns the timers; this file owns the rules.
import type { EndpointState } from '../core/endpoint.js';
import type { ProbeConfig } from '../config/config.js';
import type { ProbeResult } from './rules.js';

export interface ProbeCounters {
  /** consecutive good probes */
  successes: number;
  /** consecutive bad probes */
  failures: number;
  /** how many backoff steps a failed endpoint has taken */
  backoff: number;
}

export interface EndpointFacts {
  readonly state: EndpointState;
  readonly everReady: boolean;
  readonly discoveredAt: number;
  readonly draining: boolean;
}

export interface Transition {
  readonly state: EndpointState;
  readonly error: string | undefined;
}

const MAX_BACKOFF_MS = 30_000;

/** Applies one probe result; mutates the counters, returns the state to move to. */
export function afterProbe(e: EndpointFacts, c: ProbeCounters, r: ProbeResult, cfg: ProbeConfig, now: number): Transition {
  if (e.draining) return { state: 'draining', error: undefined };
  if (r.verdict === 'ready') {
    c.successes++;
    c.failures = 0;
    if (c.successes >= cfg.successThreshold) {
      c.backoff = 0;
      return { state: 'ready', error: undefined };
    }
    return { state: e.state === 'discovered' ? 'serving-api' : e.state, error: undefined };
  }
  c.successes = 0;
  c.failures++;
  // a name mismatch is no load: the engine serves other models, and no wait will change that
  if (r.mismatch !== undefined) {
    c.backoff = e.state === 'failed' ? c.backoff + 1 : 1;
    return { state: 'failed', error: r.detail };
  }
  if (!e.everReady) {
    // an engine that has never been ready is starting, not failing — until the startup budget is spent
    if (now - e.discoveredAt > cfg.startupTimeoutMs) {
      c.backoff++;
      return { state: 'failed', error: `not ready ${Math.round(cfg.startupTimeoutMs / 1000)} s after discovery: ${r.detail}` };
    }
    if (e.state === 'failed') return { state: 'failed', error: r.detail };
    return { state: r.verdict === 'serving-api' ? 'serving-api' : e.state, error: r.detail };
  }
  if (r.verdict === 'serving-api') {
    // it answers but the model is not (or no longer) loaded: an engine restarting in place is loading again
    if (e.state === 'failed' || c.failures >= cfg.failureThreshold) return { state: 'serving-api', error: r.detail };
    return { state: e.state, error: r.detail };
  }
  if (e.state === 'failed') {
    c.backoff++;
    return { state: 'failed', error: r.detail };
  }
  // a refused connection means the process is gone: no reason to wait for more probes
  if (r.refused || c.failures >= cfg.failureThreshold) {
    c.backoff = 1;
    return { state: 'failed', error: r.detail };
  }
  return { state: e.state, error: r.detail };
}

/**
 * Milliseconds until the next probe: fast while coming up, slow when ready, backing off while failed. While requests
 * are held for one of the endpoint's models (`wanted`), a coming-up or failed endpoint is probed at the wake interval,
 * so the held requests go the moment its model has loaded instead of up to a probe interval later.
 */
export function nextProbeDelay(state: EndpointState, c: ProbeCounters, cfg: ProbeConfig, wanted = false): number {
  switch (state) {
    case 'ready':
      return c.failures > 0 ? cfg.intervalMs : cfg.readyIntervalMs;
    case 'failed':
      if (wanted) return cfg.wakeIntervalMs;
      return Math.min(cfg.intervalMs * 2 ** Math.max(0, c.backoff - 1), Math.max(MAX_BACKOFF_MS, cfg.intervalMs));
    default:
      return wanted ? Math.min(cfg.intervalMs, cfg.wakeIntervalMs) : cfg.intervalMs;
  }
}
