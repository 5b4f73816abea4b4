import { nowMs, sleep, sleepUntil } from './clock.js';
import { countInto, type LifecycleCounts } from './waiter.js';

/**
 * Open-loop arrivals: the i-th start is scheduled at startAtMs + i / rate, whatever happened to
 * the earlier ones, and its latency is measured from that scheduled time, so a stalled server
 * (or generator) shows up in the latencies instead of silently lowering the load (no
 * coordinated omission). Returns once every start has been launched; `lagMs` is how late the
 * generator itself launched starts at worst.
 */
export async function openLoop(
  rate: number,
  durationMs: number,
  startAtMs: number,
  launch: (seq: number, scheduledAtMs: number) => void,
): Promise<{ launched: number; maxLagMs: number }> {
  const total = Math.max(1, Math.round((rate * durationMs) / 1000));
  const interval = 1000 / rate;
  await sleepUntil(startAtMs);
  let i = 0;
  let maxLagMs = 0;
  await new Promise<void>((done) => {
    const tick = () => {
      const now = nowMs();
      while (i < total) {
        const at = startAtMs + i * interval;
        if (at > now) break;
        maxLagMs = Math.max(maxLagMs, now - at);
        launch(i, at);
        i++;
      }
      if (i >= total) return done();
      const wait = startAtMs + i * interval - nowMs();
      setTimeout(tick, Math.max(0, Math.min(wait, 1)));
    };
    tick();
  });
  return { launched: total, maxLagMs };
}

/**
 * Closed loop (saturation): `concurrency` lifecycles in flight, each next one started as one
 * ends, until `durationMs` has passed; each is timed from its own start. What it measures is the
 * throughput the system gives when kept busy, not a latency under a fixed load.
 */
export async function closedLoop(
  concurrency: number,
  durationMs: number,
  startAtMs: number,
  launch: (seq: number, startedAtMs: number) => Promise<void>,
): Promise<{ launched: number; maxLagMs: number }> {
  await sleepUntil(startAtMs);
  // A generator that got the run late (a loaded machine) still runs for the whole duration, from
  // when it could start: else a short run could end before it launched anything.
  const startedAtMs = nowMs();
  const end = Math.max(startAtMs, startedAtMs) + durationMs;
  let seq = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (nowMs() < end) await launch(seq++, nowMs()).catch(() => undefined);
    }),
  );
  return { launched: seq, maxLagMs: Math.max(0, startedAtMs - startAtMs) };
}

/**
 * One generator's measured run of `send`, each timed from the time it is given (its start, or its
 * scheduled start): closed loop (`concurrency` in flight) or open loop at `rate`. Every 250 ms
 * `sweep` fails what is older than the timeout, every second `tick` reports progress, and the
 * end waits for the stragglers, but no longer than the timeout and a second.
 */
export async function driveLoad(
  r: ({ mode: 'closed'; concurrency: number } | { mode: 'open'; rate: number }) & { durationMs: number; startAtMs: number; timeoutMs: number },
  sweep: (startedBefore: number) => void,
  tick: () => void,
  send: (fromMs: number) => Promise<void>,
): Promise<void> {
  const running = new Set<Promise<void>>();
  const sweeper = setInterval(() => sweep(nowMs() - r.timeoutMs), 250);
  const ticker = setInterval(tick, 1000);
  try {
    const launch = (_seq: number, fromMs: number) => {
      const p = send(fromMs);
      running.add(p);
      void p.finally(() => running.delete(p));
      return p;
    };
    if (r.mode === 'closed') await closedLoop(r.concurrency, r.durationMs, r.startAtMs, launch);
    else await openLoop(r.rate, r.durationMs, r.startAtMs, launch);
    const deadline = nowMs() + r.timeoutMs + 1000;
    while (running.size > 0 && nowMs() < deadline) await Promise.race([...running, sleep(100)]);
  } finally {
    clearInterval(sweeper);
    clearInterval(ticker);
  }
}

/**
 * One generator's open-loop run of lifecycles: launches `lifecycle` at the rate, fails every
 * in-flight lifecycle older than the timeout (`sweep`, every 250 ms), reports progress every
 * second, then drains, but not for ever: whatever still runs after the timeout (plus a margin)
 * counts as an error and is left behind. Returns the generator's own worst launch lag.
 */
export async function runLifecycles(
  r: { label: string; rate: number; durationMs: number; startAtMs: number; timeoutMs: number; concurrency?: number | undefined },
  counts: LifecycleCounts,
  progress: (data: unknown) => void,
  sweep: (startedBefore: number) => void,
  lifecycle: (seq: number, scheduledAtMs: number) => Promise<void>,
): Promise<number> {
  const running = new Set<Promise<void>>();
  const sweeper = setInterval(() => sweep(nowMs() - r.timeoutMs), 250);
  const errorCount = () => Object.values(counts.errors).reduce((a, b) => a + b, 0);
  const ticker = setInterval(() => progress({ label: r.label, started: counts.started, completed: counts.completed, errors: errorCount(), inflight: running.size }), 1000);
  try {
    const launch = (seq: number, sched: number) => {
      counts.started++;
      const p = lifecycle(seq, sched);
      running.add(p);
      void p.finally(() => running.delete(p));
      return p;
    };
    const { maxLagMs } = r.concurrency ? await closedLoop(r.concurrency, r.durationMs, r.startAtMs, launch) : await openLoop(r.rate, r.durationMs, r.startAtMs, launch);
    const drainDeadline = nowMs() + r.timeoutMs + 2000;
    while (running.size > 0 && nowMs() < drainDeadline) await Promise.race([...running, sleep(100)]);
    if (running.size > 0) countInto(counts.errors, 'timeout: still running after the drain deadline', running.size);
    return maxLagMs;
  } finally {
    clearInterval(sweeper);
    clearInterval(ticker);
  }
}
