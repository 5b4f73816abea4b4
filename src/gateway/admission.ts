import { TokenBucket } from '../limits/rateLimiter.js';

/**
 * Admission control for a reconnect storm (docs/signaling.md "A reconnect storm"): a gateway
 * takes at most WS_ADMISSIONS_PER_S new sockets a second, one second's worth at once. A socket
 * beyond it is closed at once with 1013 (try again later) and a time to come back, before its
 * token is verified or anything is read for it. The times handed out are spaced one admission
 * apart, so the devices of a crashed gateway come back as a queue at the rate this gateway can
 * sync them, instead of all at once, again and again; without it the surviving gateway's event
 * loop stalls on thousands of syncs, its listen backlog overflows, and the kernel drops the
 * connections, whose retries then wait 1, 3, 7, 15, 31 s (the bench's `reconnect` scenario).
 */
export class Admission {
  private readonly bucket: TokenBucket | undefined;
  /** The latest time to come back handed out, epoch ms. */
  private lastSlotMs = 0;
  /** Sockets refused so far. */
  refused = 0;

  constructor(
    private readonly perSecond: number,
    now = Date.now(),
  ) {
    this.bucket = perSecond > 0 ? new TokenBucket({ limit: perSecond, windowMs: 1000 }, now) : undefined;
  }

  /** 0: admitted; else in how many ms the client is to try again. */
  admit(now = Date.now()): number {
    if (!this.bucket) return 0;
    const decision = this.bucket.take(now);
    if (decision.allowed) return 0;
    this.refused++;
    this.lastSlotMs = Math.max(this.lastSlotMs + 1000 / this.perSecond, now + decision.retryAfterMs);
    return Math.ceil(this.lastSlotMs - now);
  }

  /**
   * Over how long a gateway holding `sockets` sockets wants its devices to spread their first
   * reconnect after it dies (the `synced` frame's `reconnectWindowMs`): the time this rate takes
   * to admit those beyond one second's worth (which come in at once), at most a minute. Only worth
   * saying past the client's own first window (250 ms): 0 otherwise, and when there is no limit. A crashed gateway sends no close frame, so
   * its devices can only use what it told them before; without it they all come back within
   * 250 ms, and past the listen backlog the kernel drops their connections, whose retries wait
   * 1, 3, 7, 15 s.
   */
  reconnectWindowMs(sockets: number): number {
    if (this.perSecond <= 0) return 0;
    const ms = Math.min(MAX_RECONNECT_WINDOW_MS, Math.ceil((Math.max(0, sockets - this.perSecond) * 1000) / this.perSecond));
    return ms > CLIENT_FIRST_WINDOW_MS ? ms : 0;
  }
}

/** The client package's first reconnect window (packages/client: 250 ms × 2^0). */
const CLIENT_FIRST_WINDOW_MS = 250;
const MAX_RECONNECT_WINDOW_MS = 60_000;
