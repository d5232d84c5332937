// Waiting in tests: "no request hung" as an assertion (a promise that must settle in time), and waiting for a condition
// instead of sleeping a fixed time.

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
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
