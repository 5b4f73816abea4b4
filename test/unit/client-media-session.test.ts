import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { MediaSessionKeeper, MediaSessionStoppedError, mediaSessionRetryDelay, type MediaSession, type MediaSessionReason } from '@calling-backend/client';

/**
 * The client package's media-session keeper (packages/client/src/media.ts) on a scripted source
 * and vitest's fake clock: when it renews, which failures it retries after how long, and when it
 * stops. Against a real server and Janus: test/integration/janus-group.test.ts.
 */

const TTL_MS = 30_000;
const session = (n: number): MediaSession => ({ iceServers: [{ urls: [`turn:t.example:3478?n=${n}`] }], expiresAtMs: Date.now() + TTL_MS });
const problem = (status: number, code: string, retryAfterS?: number) => Object.assign(new Error(code), { status, code, retryAfterS });

/** A source that answers from `script` in order (an Error is thrown), then fresh sessions. */
function source(script: (MediaSession | Error)[] = []) {
  let n = 0;
  const calls: number[] = [];
  return {
    calls,
    async mediaSession() {
      calls.push(Date.now());
      const next = script.shift() ?? session(++n);
      if (next instanceof Error) throw next;
      return next;
    },
  };
}

beforeEach(() => void vi.useFakeTimers({ now: 1_800_000_000_000 }));
afterEach(() => void vi.useRealTimers());

describe('mediaSessionRetryDelay', () => {
  it('503 sfu_unavailable and 429 after their retry-after; no SFU (no retry-after) and 4xx never; network, 401 and 5xx with full jitter', () => {
    expect(mediaSessionRetryDelay(problem(503, 'sfu_unavailable', 2), 0)).toBe(2000);
    expect(mediaSessionRetryDelay(problem(429, 'rate_limited', 5), 3)).toBe(5000);
    expect(mediaSessionRetryDelay(problem(503, 'sfu_unavailable'), 0)).toBeUndefined();
    for (const [status, code] of [[403, 'forbidden'], [404, 'not_found'], [409, 'answer_conflict']] as const) expect(mediaSessionRetryDelay(problem(status, code), 0)).toBeUndefined();
    // The demo's ProblemError keeps the code in `problem`.
    expect(mediaSessionRetryDelay({ status: 503, problem: { code: 'sfu_unavailable' }, retryAfterS: 2 }, 0)).toBe(2000);
    for (const err of [new TypeError('fetch failed'), problem(401, 'unauthorized'), problem(503, 'unavailable'), problem(500, 'internal')]) {
      for (const n of [0, 3, 10]) {
        const d = mediaSessionRetryDelay(err, n, 30_000)!;
        expect(d).toBeGreaterThanOrEqual(0);
        expect(d).toBeLessThan(Math.min(30_000, 1000 * 2 ** n));
      }
    }
  });
});

describe('MediaSessionKeeper', () => {
  it('renews at 80 % of each lifetime and hands every session over in order', async () => {
    const src = source();
    const got: MediaSessionReason[] = [];
    const keeper = new MediaSessionKeeper({ client: src, callId: 'c', onSession: (_s, why) => got.push(why) });
    const t0 = Date.now();
    await keeper.start();
    expect(keeper.renewsAtMs).toBe(t0 + 0.8 * TTL_MS);
    await vi.advanceTimersByTimeAsync(0.8 * TTL_MS);
    await vi.advanceTimersByTimeAsync(0.8 * TTL_MS);
    expect(src.calls.map((t) => t - t0)).toEqual([0, 0.8 * TTL_MS, 1.6 * TTL_MS]);
    expect(got).toEqual(['first', 'renewal', 'renewal']);
    // A refresh asks at once and starts the schedule again from its session.
    await keeper.refresh();
    expect(got.at(-1)).toBe('refresh');
    expect(keeper.renewsAtMs).toBe(Date.now() + 0.8 * TTL_MS);
    keeper.stop();
    await vi.advanceTimersByTimeAsync(TTL_MS);
    expect(src.calls).toHaveLength(4);
  });

  it('waits out a 503 sfu_unavailable for its retry-after, and stops for good on a 403', async () => {
    const refused = problem(403, 'forbidden');
    const src = source([problem(503, 'sfu_unavailable', 2), session(1), refused]);
    const retries: number[] = [];
    let stopped: unknown;
    const keeper = new MediaSessionKeeper({ client: src, callId: 'c', onSession: () => {}, onRetry: (_e, d) => retries.push(d), onStopped: (e) => (stopped = e) });
    const t0 = Date.now();
    const first = keeper.start();
    await vi.advanceTimersByTimeAsync(2000);
    await first;
    expect(src.calls.map((t) => t - t0)).toEqual([0, 2000]);
    expect(retries).toEqual([2000]);

    // The member left: the next request is refused, and the keeper asks no more.
    await expect(keeper.refresh()).rejects.toBe(refused);
    expect(stopped).toBe(refused);
    expect(keeper.renewsAtMs).toBeUndefined();
    await vi.advanceTimersByTimeAsync(TTL_MS);
    expect(src.calls).toHaveLength(3);
    await expect(keeper.refresh()).rejects.toBeInstanceOf(MediaSessionStoppedError);
  });

  it('stop() ends a wait between retries: the waiting request rejects, nothing more is asked', async () => {
    const src = source([problem(503, 'sfu_unavailable', 2)]);
    const keeper = new MediaSessionKeeper({ client: src, callId: 'c', onSession: () => {} });
    const first = keeper.start();
    const outcome = first.catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(500);
    keeper.stop();
    expect(await outcome).toBeInstanceOf(MediaSessionStoppedError);
    await vi.advanceTimersByTimeAsync(TTL_MS);
    expect(src.calls).toHaveLength(1);
  });

  it('never renews sooner than a second apart, even when the device clock says the session has expired', async () => {
    const src = source([{ iceServers: [], expiresAtMs: Date.now() - 60_000 }]);
    const keeper = new MediaSessionKeeper({ client: src, callId: 'c', onSession: () => {} });
    const t0 = Date.now();
    await keeper.start();
    await vi.advanceTimersByTimeAsync(1000);
    expect(src.calls.map((t) => t - t0)).toEqual([0, 1000]);
    keeper.stop();
  });
});
