// Waiting in tests: "no request hung" as an assertion (a promise that must settle in time), and waiting for a condition
// instead of sleeping a fixed time. Every wait is bounded and says what it waited for; the bounds are generous (a busy
// machine is slow, not wrong) and cost nothing when the condition comes sooner.

/** Rejects when the promise does not settle within `ms`. */
export async function within<T>(ms: number, what: string, p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`hung: ${what} did not finish within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([p, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Polls until `check` returns true (or throws after `timeoutMs`, saying what it waited for). */
export async function until(what: string, check: () => Promise<boolean> | boolean, timeoutMs = 15_000, everyMs = 50): Promise<void> {
  await eventually(what, check, (ok) => ok, timeoutMs, everyMs);
}

/**
 * Polls `probe` until `ok(value)` and returns that value; after `timeoutMs` throws, saying what it waited for and the
 * last value seen. For a wait whose failure is only understood with what was seen instead (a status, a state, a count).
 */
export async function eventually<T>(
  what: string,
  probe: () => Promise<T> | T,
  ok: (value: T) => boolean,
  timeoutMs = 15_000,
  everyMs = 50,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (ok(value)) return value;
    if (Date.now() > deadline) {
      const last = typeof value === 'boolean' ? '' : `; last seen: ${JSON.stringify(value)}`;
      throw new Error(`timed out after ${timeoutMs} ms waiting for: ${what}${last}`);
    }
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
