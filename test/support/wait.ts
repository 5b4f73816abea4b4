/**
 * The test suite's only ways to wait (docs/development.md "Development": tests bound their waits with
 * timeouts that fail, and never assert elapsed time).
 */

/** Resolves after `ms`. Only for pacing load or letting time pass on purpose (a ring window). */
export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export interface WaitOptions {
  /** Pause between checks. Default 25 ms. */
  intervalMs?: number;
  /** What to add to the failure: the state last seen (a log tail, the nodes of a cluster). */
  detail?: () => string | Promise<string>;
}

/**
 * Polls `check` until it returns true; fails after `timeoutMs`. A check that throws fails the
 * wait at once (a process that exited will not start answering).
 */
export async function waitUntil(what: string, check: () => Promise<boolean> | boolean, timeoutMs = 5000, opts: WaitOptions = {}): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) {
      const detail = opts.detail ? `:\n${await opts.detail()}` : '';
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${detail}`);
    }
    await sleep(opts.intervalMs ?? 25);
  }
}

/** `promise`, or a failure naming `what` if it does not settle within `ms`. */
export async function within<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([promise, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}
