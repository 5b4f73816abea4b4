/**
 * Wall-clock time in epoch milliseconds with sub-millisecond resolution, comparable across the
 * bench's processes on this machine (each process's performance.timeOrigin is an epoch time).
 */
export function nowMs(): number {
  return performance.timeOrigin + performance.now();
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Sleeps until the given epoch time (ms); returns at once when it has passed. */
export async function sleepUntil(epochMs: number): Promise<void> {
  const wait = epochMs - nowMs();
  if (wait > 0) await sleep(wait);
}
