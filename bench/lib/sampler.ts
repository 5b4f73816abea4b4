/**
 * Readings taken every `everyMs` while something runs (the soak's memory series). A heap read
 * once a minute lands anywhere in the garbage collector's cycle (one process's swung 40-117 MB
 * between minutes), so the soak reads often and keeps the lowest reading of each minute: the
 * floor right after a collection, which is what retained memory (a leak) raises.
 */
export class Sampler<T> {
  private readonly readings: T[] = [];
  private readonly timer: ReturnType<typeof setInterval>;
  private pending: Promise<void> = Promise.resolve();

  constructor(everyMs: number, read: () => T | undefined | Promise<T | undefined>) {
    const take = async () => {
      const r = await Promise.resolve(read()).catch(() => undefined);
      if (r !== undefined) this.readings.push(r);
    };
    this.pending = take();
    this.timer = setInterval(() => {
      // One reading at a time: a slow one (a busy process) is not overtaken by the next.
      this.pending = this.pending.then(take);
    }, everyMs);
  }

  /** Stops and returns every reading taken (the first was taken at construction). */
  async stop(): Promise<T[]> {
    clearInterval(this.timer);
    await this.pending;
    return this.readings;
  }
}

/** The smallest of `pick` over `readings` (NaN when none has a finite value). */
export function minOf<T>(readings: readonly T[], pick: (r: T) => number | undefined): number {
  const vs = readings.map(pick).filter((v): v is number => v !== undefined && Number.isFinite(v));
  return vs.length ? Math.min(...vs) : NaN;
}

/** The largest of `pick` over `readings` (NaN when none has a finite value). */
export function maxOf<T>(readings: readonly T[], pick: (r: T) => number | undefined): number {
  const vs = readings.map(pick).filter((v): v is number => v !== undefined && Number.isFinite(v));
  return vs.length ? Math.max(...vs) : NaN;
}
