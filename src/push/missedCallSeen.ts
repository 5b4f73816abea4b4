import type { Redis, Cluster } from 'ioredis';
import { keys, type KeySpace } from '../redis/keys.js';
import { MISSED_END_REASONS } from '../calls/missed.js';
import { CALLER_END_TAG } from '../events/audience.js';
import type { Logger } from '../util/logger.js';
import type { PushMessage } from './queues.js';

/**
 * An installation that knows it missed the call gets no missed-call alert (docs/protocol.md
 * "Missed-call alerts"): one that sent a ringing receipt for the call and then had the end that
 * made its user miss the call written to one of its sockets. Its app shows its own missed-call
 * notification; an alert would be a second one.
 *
 * Two marks in the user's slot, each one `SET` with a TTL, and one `MGET` of both per alert before
 * its claim (src/push/dispatcher.ts sendFirst: an alert to an installation that never rang goes at
 * once, one that rang waits the grace unless already seen, and is read again then):
 *  - `rang`: written on the receipt path only (src/commands/ringing.ts), every receipt of the
 *    installation (not only the member's first, the one that changes the call). It lives a ring
 *    window, the alerts' grace and a minute: a member misses the call at most a ring window
 *    after its receipt (each member rings in its own window), and its alerts are checked a grace
 *    after that. A check that comes later (a relay far behind) finds no mark and sends the alert.
 *  - `endseen`: written by the gateway, fire-and-forget, when it writes to a socket a `call.ended`
 *    that makes its user miss the call (missedEndIn): only those reasons, never an answered
 *    call's end, so the common path writes nothing. Its value is the event's revision: only the
 *    end that made the member miss the call (the alert's own revision) counts, not an earlier end
 *    of its part (a removal while it rang, then a new invitation). It lives an hour, as the
 *    alert's claim (missedCallClaims.ts).
 *
 * "Written to its socket" is what the gateway knows: a socket that dies with the frame in its
 * buffer counted as seen. And the mark races the alert: see MISSED_CALL_ALERT_GRACE_MS.
 */

/** How many recent marks a gateway remembers, so the early copy of an end and its log copy write one mark. */
const RECENT_ENDS = 1024;

/** How long an `endseen` mark lives: as long as an alert's claim. */
export const END_SEEN_TTL_MS = 3_600_000;
/** How long past a ring window and the grace a `rang` mark lives: a ring sweep or a relay a little behind. */
export const RANG_MARGIN_MS = 60_000;

type MissedMessage = Extract<PushMessage, { t: 'missed' }>;

/**
 * An alert's installation as its marks say: it never rang (`unrung`: nothing can skip its alert,
 * which goes at once), it rang (`rang`: its end may still be on its way to a socket), or it rang
 * and saw the end (`seen`: skipped).
 */
export type AlertMark = 'unrung' | 'rang' | 'seen';

export interface MissedCallSeenSettings extends KeySpace {
  /** RING_TIMEOUT_MS. */
  ringTimeoutMs: number;
  /** MISSED_CALL_ALERT_GRACE_MS. */
  alertGraceMs: number;
}

export class MissedCallSeen {
  private readonly rangTtlMs: number;
  /** The ends this process marked last (installation, call, revision), oldest first. */
  private readonly recentEnds = new Set<string>();

  constructor(
    private readonly redis: Redis | Cluster,
    private readonly settings: MissedCallSeenSettings,
    private readonly logger: Logger,
  ) {
    this.rangTtlMs = settings.ringTimeoutMs + settings.alertGraceMs + RANG_MARGIN_MS;
  }

  /**
   * A ringing receipt of `installationId` (src/commands/ringing.ts): one `SET` after the receipt's
   * script. A failure is logged, not answered: the receipt stands, and the alert simply goes.
   */
  async noteRang(userId: string, callId: string, installationId: string): Promise<void> {
    try {
      await this.redis.set(keys.missedCallRang(this.settings, userId, callId, installationId), '1', 'PX', this.rangTtlMs);
    } catch (err) {
      this.logger.warn({ err: (err as Error).message, userId, installationId }, 'noting a ringing receipt for the missed-call alert failed; its alert will go');
    }
  }

  /**
   * A gateway wrote the end of `revision` to a socket of `installationId` (missedEndIn):
   * fire-and-forget. On a single Redis a live socket gets the end twice, early and from the log
   * (docs/signaling.md "Early events"): the second is not written again.
   */
  noteEndSeen(userId: string, callId: string, installationId: string, revision: string): void {
    const id = `${userId}\n${installationId}\n${callId}\n${revision}`;
    if (this.recentEnds.has(id)) return;
    this.recentEnds.add(id);
    if (this.recentEnds.size > RECENT_ENDS) this.recentEnds.delete(this.recentEnds.values().next().value!);
    this.redis.set(keys.missedCallEndSeen(this.settings, userId, callId, installationId), revision, 'PX', END_SEEN_TTL_MS).catch((err: unknown) => {
      this.logger.warn({ err: (err as Error).message, userId, installationId }, 'noting an end seen on a socket failed; its missed-call alert will go');
    });
  }

  /** Each alert's installation by its marks (AlertMark): one MGET each, in the user's slot, auto-pipelined. */
  marks(msgs: readonly MissedMessage[]): Promise<AlertMark[]> {
    const ks = this.settings;
    return Promise.all(
      msgs.map(async (m): Promise<AlertMark> => {
        const [rang, endSeen] = await this.redis.mget(keys.missedCallRang(ks, m.userId, m.callId, m.installationId), keys.missedCallEndSeen(ks, m.userId, m.callId, m.installationId));
        if (rang === null) return 'unrung';
        return endSeen === m.payload.revision ? 'seen' : 'rang';
      }),
    );
  }
}

/**
 * The call and revision of a `call.ended` event that makes the member it is written to miss the
 * call, else undefined; `only` is the installation the event was for ('' or undefined: every
 * installation of the user). A member's ringing installations get such an end without `only`
 * (src/events/audience.ts, groupAudience.ts), with one of MISSED_END_REASONS; an answered call's
 * end goes to the one installation in the call (`only`), or, a one-to-one call's, to its caller
 * (CALLER_END_TAG), and is never looked into further. Every other event is passed over by one
 * substring test.
 */
export function missedEndIn(json: string, only: string | undefined): { callId: string; revision: string } | undefined {
  if (only || !json.includes('"type":"call.ended"')) return undefined;
  let e: { eventId?: unknown; callId?: unknown; revision?: unknown; reason?: unknown };
  try {
    e = JSON.parse(json) as typeof e;
  } catch {
    return undefined;
  }
  if (typeof e.reason !== 'string' || !MISSED_END_REASONS.has(e.reason)) return undefined;
  if (typeof e.callId !== 'string' || typeof e.revision !== 'string' || typeof e.eventId !== 'string') return undefined;
  if (e.eventId.endsWith(`:${CALLER_END_TAG}`)) return undefined;
  return { callId: e.callId, revision: e.revision };
}
