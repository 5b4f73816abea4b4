/**
 * A one-shot "this event arrived at time t" slot: the socket handler fires it, the lifecycle
 * awaits it (or finds it already fired: events may beat the HTTP response that caused them).
 */
export class Waiter {
  at: number | undefined;
  private resolve: ((at: number) => void) | undefined;
  private reject: ((err: Error) => void) | undefined;
  private failed: Error | undefined;

  /** Records the arrival; false when it had already arrived (a duplicate). */
  fire(at: number): boolean {
    if (this.at !== undefined) return false;
    this.at = at;
    this.resolve?.(at);
    this.resolve = this.reject = undefined;
    return true;
  }

  fail(err: Error): void {
    if (this.at !== undefined || this.failed) return;
    this.failed = err;
    this.reject?.(err);
    this.resolve = this.reject = undefined;
  }

  wait(): Promise<number> {
    if (this.at !== undefined) return Promise.resolve(this.at);
    if (this.failed) return Promise.reject(this.failed);
    return new Promise((res, rej) => {
      this.resolve = res;
      this.reject = rej;
    });
  }
}

/** An error whose `key` counts it in a run's error table. */
export class BenchFailure extends Error {
  constructor(readonly key: string) {
    super(key);
  }
}

/** What a load generator counts of the lifecycles it ran (over a run, a step or a minute). */
export interface LifecycleCounts {
  started: number;
  completed: number;
  /** Failed lifecycles by BenchFailure key. */
  errors: Record<string, number>;
}

export function countInto(map: Record<string, number>, key: string, n = 1): void {
  map[key] = (map[key] ?? 0) + n;
}
