import { nowMs, sleep } from './clock.js';
import { HistogramSet, type SerializedHistogram } from './histogram.js';
import { runLifecycles } from './openLoop.js';
import { BenchFailure, countInto, type LifecycleCounts } from './waiter.js';

/**
 * A load generator's run of call lifecycles, shared by the one-to-one and the group generators
 * (workers/calls.ts, workers/group.ts): who is called next, the calls in flight, and the run's
 * record.
 */

/** What one generator's run records of its lifecycles besides the counts. */
export interface RunRecord extends LifecycleCounts {
  anomalies: Record<string, number>;
  hist: HistogramSet;
  /** When the last lifecycle finished (epoch ms). */
  lastDoneMs: number;
}

/**
 * The users a generator calls with (one-to-one pairs, groups), taken first-in first-out so each
 * rests as long as possible between two calls: the server marks a callee busy until the relay
 * has processed the previous call's end, and a new call to a busy callee would (rightly) not
 * ring. When none is free, one in use is taken anyway and counted as an anomaly (`unrested`).
 */
export class Rota<T> {
  private queue: T[] = [];
  private readonly busy = new Set<T>();
  private readonly freedAt = new Map<T, number>();

  constructor(
    private readonly all: readonly T[],
    private readonly restMs: number,
    private readonly unrested: string,
  ) {}

  /** Every party in the queue again, at the start of a run. */
  restart(): void {
    this.queue = [...this.all];
  }

  /**
   * One lifecycle with a party: `body` runs it; done, it is timed from its scheduled start as
   * `lifecycle` and counted, or its failure is counted by its BenchFailure key.
   */
  async run(seq: number, scheduledAtMs: number, rec: RunRecord, body: (party: T) => Promise<void>): Promise<void> {
    const party = this.queue.shift() ?? this.all[seq % this.all.length]!;
    if (this.busy.has(party) || scheduledAtMs - (this.freedAt.get(party) ?? -Infinity) < this.restMs) countInto(rec.anomalies, this.unrested);
    this.busy.add(party);
    try {
      await body(party);
      const done = nowMs();
      rec.hist.get('lifecycle').recordMs(done - scheduledAtMs);
      rec.lastDoneMs = Math.max(rec.lastDoneMs, done);
      rec.completed++;
    } catch (err) {
      countInto(rec.errors, err instanceof BenchFailure ? err.key : `exception: ${(err as Error).message.slice(0, 80)}`);
    } finally {
      if (this.busy.delete(party)) this.queue.push(party);
      this.freedAt.set(party, nowMs());
    }
  }
}

export function startRecord(startAtMs: number, anomalies: Record<string, number>): RunRecord {
  return { started: 0, completed: 0, errors: {}, anomalies, hist: new HistogramSet(), lastDoneMs: startAtMs };
}

/** A recorded run as a generator hands it back (workers/calls.ts CallsResult, without its task's own counts). */
export interface RecordedRun extends LifecycleCounts {
  label: string;
  anomalies: Record<string, number>;
  hist: Record<string, SerializedHistogram>;
  /** From the first scheduled start to the last lifecycle finished. */
  spanMs: number;
  maxLagMs: number;
}

/** What a generator keeps of a call in flight: when it started, and how to fail what it still awaits. */
export interface InFlightCall {
  readonly startedAt: number;
  fail(timeoutMs: number): void;
}

/**
 * The calls in flight by callId, for the socket handlers. Each is kept 2 s after its lifecycle,
 * so late duplicates (or unexpected events) are still seen before it is forgotten.
 */
export class InFlight<S extends InFlightCall> {
  private readonly calls = new Map<string, S>();

  get(callId: string): S | undefined {
    return this.calls.get(callId);
  }

  /**
   * Runs a call's lifecycle. When it fails, `endIt` ends the call, not awaited (the failure is
   * counted at once, as the lifecycle's) and its errors ignored: a call left accepted would keep
   * its callees busy, and every later call to them would end `busy`.
   */
  async during(callId: string, st: S, body: () => Promise<void>, endIt: () => Promise<unknown>): Promise<void> {
    this.calls.set(callId, st);
    try {
      await body();
    } catch (err) {
      endIt().catch(() => {});
      throw err;
    } finally {
      setTimeout(() => this.calls.delete(callId), 2000).unref();
    }
  }

  /** Fails whatever started before `before` (one sweeper instead of a timer per lifecycle). */
  sweep(before: number, timeoutMs: number): void {
    for (const st of this.calls.values()) if (st.startedAt < before) st.fail(timeoutMs);
  }
}

/**
 * Runs the lifecycles open loop (lib/openLoop.ts runLifecycles), failing those in flight past
 * the timeout, gives late duplicates 200 ms to show, and counts the signaling sockets that
 * closed meanwhile (`closedSockets()`) as errors.
 */
export async function runRecorded(
  r: { label: string; rate: number; durationMs: number; startAtMs: number; timeoutMs: number; concurrency?: number | undefined },
  rec: RunRecord,
  progress: (data: unknown) => void,
  inFlight: InFlight<InFlightCall>,
  lifecycle: (seq: number, scheduledAtMs: number) => Promise<void>,
  closedSockets: () => number,
): Promise<RecordedRun> {
  const maxLagMs = await runLifecycles(r, rec, progress, (before) => inFlight.sweep(before, r.timeoutMs), lifecycle);
  await sleep(200); // late duplicates
  const closed = closedSockets();
  if (closed > 0) countInto(rec.errors, 'signaling socket closed', closed);
  const { started, completed, errors, anomalies } = rec;
  return { label: r.label, started, completed, errors, anomalies, hist: rec.hist.serialize(), spanMs: rec.lastDoneMs - r.startAtMs, maxLagMs };
}
