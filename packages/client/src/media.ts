import type { MediaSession } from './types.js';

/**
 * Keeps a call's media session fresh for as long as the call lasts (docs/api.md "Media session"):
 * it asks for one at `start()`, asks again at `renewAt` of each session's lifetime (80 %, before
 * `expiresAtMs`), and hands every new session to `onSession`, where the media layer applies it:
 * a Janus client sends the new `sfu.token` on its session's later requests (keepalives included,
 * so the session lives on), a peer connection takes the new `iceServers` with
 * `RTCPeerConnection.setConfiguration`. `refresh()` asks at once: before an ICE restart (coturn
 * gives no new allocation for an expired credential) and to reconnect after the SFU restarted.
 *
 * A 503 `sfu_unavailable` with `retry-after` (the SFU is down or refusing) and a 429 are asked
 * again after that delay; a network failure, a 401 or a 5xx after a backoff with full jitter
 * (1 s doubling up to `maxBackoffMs`). Anything else ends the keeping (`onStopped`): 403, 404 and
 * 409 say the installation is no longer in the call, and a 503 without `retry-after` says the
 * server has no SFU for it. `stop()` ends it too (hang-up).
 *
 * Errors are read by shape (`status`, `code` or `problem.code`, `retryAfterS`), so the keeper
 * works with the package's `CallingClient` and with any client whose errors look like its
 * `ProblemError`; this module imports nothing at run time (the demo loads it as it is built).
 */

/** Where sessions come from: the package's `CallingClient`, or anything with the same method. */
export interface MediaSessionSource {
  mediaSession(callId: string): Promise<MediaSession>;
}

/** Why a session was fetched: the first, a timed renewal, or a `refresh()`. */
export type MediaSessionReason = 'first' | 'renewal' | 'refresh';

export interface MediaSessionKeeperOptions {
  client: MediaSessionSource;
  callId: string;
  /** Each new session, in order; apply it to the media layer here. */
  onSession: (session: MediaSession, reason: MediaSessionReason) => void;
  /** A failed request that will be retried after `delayMs`. */
  onRetry?: (err: unknown, delayMs: number) => void;
  /** The keeping ended for good on `err` (not in the call any more, no SFU); not called on `stop()`. */
  onStopped?: (err: unknown) => void;
  /** The fraction of a session's lifetime after which it is renewed (0 < renewAt < 1; 0.8). */
  renewAt?: number;
  /** The longest backoff between failed requests, in ms (30 000). */
  maxBackoffMs?: number;
}

/** `start()` or `refresh()` after `stop()`, or one that was waiting when `stop()` came. */
export class MediaSessionStoppedError extends Error {
  override name = 'MediaSessionStoppedError';
  constructor() {
    super('media session: stopped');
  }
}

/** The shortest time between two timed renewals, in ms. */
const MIN_RENEWAL_MS = 1000;

interface ProblemShape {
  status?: unknown;
  code?: unknown;
  retryAfterS?: unknown;
  problem?: { code?: unknown };
}

/**
 * How long to wait before asking again after `err` (attempt `n`, from 0), or undefined: do not.
 * Exported for tests and for clients that schedule their own requests.
 */
export function mediaSessionRetryDelay(err: unknown, n: number, maxBackoffMs = 30_000): number | undefined {
  const e = (typeof err === 'object' && err !== null ? err : {}) as ProblemShape;
  const status = typeof e.status === 'number' ? e.status : undefined;
  const code = typeof e.code === 'string' ? e.code : typeof e.problem?.code === 'string' ? e.problem.code : undefined;
  const retryAfterS = typeof e.retryAfterS === 'number' && e.retryAfterS >= 0 ? e.retryAfterS : undefined;
  if ((status === 503 && code === 'sfu_unavailable') || status === 429) return retryAfterS === undefined ? undefined : retryAfterS * 1000;
  if (status === undefined || status === 401 || status >= 500) return Math.random() * Math.min(maxBackoffMs, 1000 * 2 ** n);
  return undefined;
}

export class MediaSessionKeeper {
  /** The latest session, once there is one. */
  current: MediaSession | undefined;
  /** When the next timed renewal is due (epoch ms), while one is scheduled. */
  renewsAtMs: number | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private inFlight: Promise<MediaSession> | undefined;
  private wake: (() => void) | undefined;
  private stopped = false;

  constructor(private readonly o: MediaSessionKeeperOptions) {
    const renewAt = o.renewAt ?? 0.8;
    if (!(renewAt > 0 && renewAt < 1)) throw new RangeError('MediaSessionKeeper: renewAt must be between 0 and 1');
  }

  /** The first session (retried as above); renewals follow on their own. */
  start(): Promise<MediaSession> {
    return this.fetch('first');
  }

  /** A new session now (before an ICE restart, or to reconnect to the SFU); shares one in flight. */
  refresh(): Promise<MediaSession> {
    return this.fetch('refresh');
  }

  /** No more requests or renewals; a request waiting to be retried rejects with MediaSessionStoppedError. */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.renewsAtMs = undefined;
    this.wake?.();
  }

  private fetch(reason: MediaSessionReason): Promise<MediaSession> {
    if (this.stopped) return Promise.reject(new MediaSessionStoppedError());
    if (this.inFlight) return this.inFlight;
    clearTimeout(this.timer);
    this.renewsAtMs = undefined;
    const p = this.attempt(reason).finally(() => {
      if (this.inFlight === p) this.inFlight = undefined;
    });
    this.inFlight = p;
    return p;
  }

  private async attempt(reason: MediaSessionReason): Promise<MediaSession> {
    for (let n = 0; ; n++) {
      let session: MediaSession;
      try {
        session = await this.o.client.mediaSession(this.o.callId);
      } catch (err) {
        if (this.stopped) throw new MediaSessionStoppedError();
        const delay = mediaSessionRetryDelay(err, n, this.o.maxBackoffMs);
        if (delay === undefined) {
          this.stop();
          this.o.onStopped?.(err);
          throw err;
        }
        this.o.onRetry?.(err, delay);
        await this.sleep(delay);
        if (this.stopped) throw new MediaSessionStoppedError();
        continue;
      }
      if (this.stopped) throw new MediaSessionStoppedError();
      this.current = session;
      this.schedule(session);
      this.o.onSession(session, reason);
      return session;
    }
  }

  private schedule(session: MediaSession): void {
    // Not sooner than MIN_RENEWAL_MS: a device clock far ahead of the server's would otherwise see
    // every session as expired and ask again at once, without end.
    const delay = Math.max(MIN_RENEWAL_MS, (session.expiresAtMs - Date.now()) * (this.o.renewAt ?? 0.8));
    this.renewsAtMs = Date.now() + delay;
    // A renewal that fails for good is reported through onStopped; a stop() rejects it quietly.
    this.timer = setTimeout(() => void this.fetch('renewal').catch(() => undefined), delay);
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(done, ms);
      const wake = () => {
        clearTimeout(t);
        done();
      };
      function done() {
        resolve();
      }
      this.wake = wake;
    });
  }
}
