import { nowMs, sleepUntil } from './clock.js';

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
