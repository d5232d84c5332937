// The whole request's time (--total-timeout): one deadline per request, taken when forwarding starts and shared by every
// engine call it makes (attempts, failovers, a P/D prefill call); each call arms a timer that aborts it at the deadline.

/** The whole request's time (--total-timeout) is over. */
export class TotalTimeoutError extends Error {
  readonly code = 'LLM_ROUTER_TOTAL_TIMEOUT';
}

/** The deadline (ms since the epoch) of a request that starts now; 0 when --total-timeout is off (0). */
export function totalDeadline(totalMs: number): number {
  return totalMs > 0 ? Date.now() + totalMs : 0;
}

/**
 * A timer that calls `abort` with a TotalTimeoutError at `deadline` (at least 1 ms from now); undefined when there is
 * no deadline (0). The caller clears it when its call settles.
 */
export function armTotalTimer(deadline: number, abort: (err: Error) => void): NodeJS.Timeout | undefined {
  if (deadline <= 0) return undefined;
  return setTimeout(() => abort(new TotalTimeoutError('total request time exceeded')), Math.max(deadline - Date.now(), 1));
}
