import { z } from 'zod';
import { topologyOf, type RedisClient } from '../redis/connection.js';
import { keys, shardOf, type KeySpace } from '../redis/keys.js';
import { runScript } from '../redis/scripts.js';
import { opaqueId } from '../commands/schemas.js';
import { STATE_KINDS } from '../calls/presence.js';
import { SIGNAL_CUSTOM_MAX_BYTES } from '../config/signalLimits.js';
import type { Logger } from '../util/logger.js';
import type { ClientFrame, ServerFrame } from './protocol.js';
import { signalMessage } from './signalNotice.js';

/**
 * Live in-call signals (docs/signaling.md "Live signals"): mute, speaking, raised hand, camera,
 * reactions and small app-defined signals, sent by a joined member to the call's other joined
 * members over the socket. Not stored in any log and never replayed: at most once, in order per
 * sender. One script run per signal (lua/sendSignal.lua) checks the sender is joined, counts the
 * call's limit, keeps the state kinds in the call's presence map (an unchanged state is not sent
 * again) and, on a single Redis, publishes it once for all recipients in the same round trip
 * (src/gateway/signalNotice.ts).
 */


/** The call's signal limit's window (RATE_CALL_SIGNALS_PER_S). */
const SIGNAL_LIMIT_WINDOW_MS = 1000;
/** The presence map outlives its last write by this much (a call's state is gone with it long before). */
const PRESENCE_TTL_MS = 24 * 3600_000;
/**
 * A call's signal view lives this long after it was made (lua/includes/presence.lua
 * signalSender): long enough to be made a few times a call, short enough that it is gone soon
 * after the call's last signal.
 */
const SIGNAL_VIEW_TTL_MS = 10 * 60_000;


const customValue = z.unknown().refine((v) => v !== undefined && Buffer.byteLength(JSON.stringify(v)) <= SIGNAL_CUSTOM_MAX_BYTES, {
  message: `a JSON value of at most ${SIGNAL_CUSTOM_MAX_BYTES} bytes`,
});

/** A `signal` client frame's fields besides `type` (docs/signaling.md "Live signals"). */
export const signalFrame = z.union([
  z.object({ callId: opaqueId, kind: z.enum(STATE_KINDS), value: z.boolean() }),
  z.object({ callId: opaqueId, kind: z.literal('reaction'), value: z.string().min(1).max(32) }),
  z.object({ callId: opaqueId, kind: z.literal('custom'), value: customValue }),
]);

export type SignalInput = { callId: string; kind: string; value: unknown };

/** What a `signal` frame came to. */
export type SignalOutcome =
  | { kind: 'sent'; recipients: number }
  | { kind: 'same' }
  | { kind: 'refused'; reason: 'not_found' | 'not_joined' }
  | { kind: 'limited'; retryAfterMs: number };

export class SignalSender {
  /** A single Redis: the script publishes each signal on its call shard's early channel. */
  private readonly single: boolean;

  constructor(
    private readonly redis: RedisClient,
    private readonly ks: KeySpace,
    /** RATE_CALL_SIGNALS_PER_S: signals per call per second, all senders together (0: off). */
    private readonly perCallPerS: number,
  ) {
    this.single = topologyOf(redis) === 'single';
  }

  async send(userId: string, installationId: string, signal: SignalInput): Promise<SignalOutcome> {
    const { callId, kind, value } = signal;
    const signalJson = JSON.stringify({ callId, userId, kind, value, atMs: Date.now() });
    const stateKind = (STATE_KINDS as readonly string[]).includes(kind);
    const reply = (await runScript(this.redis, 'sendSignal', [keys.call(this.ks, callId), keys.callPresence(this.ks, callId), keys.callSignalLimit(this.ks, callId), keys.callSignalView(this.ks, callId)], {
      userId,
      installationId,
      kind,
      state: stateKind ? (value ? '1' : '0') : '',
      signalJson,
      noticeChannel: this.single ? keys.earlyChannel(this.ks, shardOf(callId, this.ks.shards)) : '',
      limit: String(this.perCallPerS),
      windowMs: String(SIGNAL_LIMIT_WINDOW_MS),
      presenceTtlMs: String(PRESENCE_TTL_MS),
      viewTtlMs: String(SIGNAL_VIEW_TTL_MS),
    })) as (string | number)[];
    const [outcome, ...rest] = reply;
    if (outcome === 'same') return { kind: 'same' };
    if (outcome === 'limited') return { kind: 'limited', retryAfterMs: Number(rest[0]) };
    if (outcome === 'error') return { kind: 'refused', reason: rest[0] === 'not_found' ? 'not_found' : 'not_joined' };
    const recipients = Number(rest[0]);
    // A single Redis: the script published it.
    if (this.single || recipients === 0) return { kind: 'sent', recipients };
    // A cluster: each recipient's channel is in its user's slot, not the call's. Issued in order
    // on the connection to that slot's node, so a sender's signals stay in order.
    const to = String(rest[1]).split('\t');
    const sends: Promise<unknown>[] = [];
    for (let i = 0; i + 1 < to.length; i += 2) sends.push(this.redis.spublish(keys.liveChannel(this.ks, to[i]!), signalMessage(to[i + 1]!, signalJson)));
    await Promise.all(sends);
    return { kind: 'sent', recipients };
  }
}

/**
 * A `signal` client frame sent on (docs/signaling.md "Live signals"): nothing to answer when sent
 * or unchanged; else the `error` frame to answer with (a malformed frame, or a refusal).
 */
export async function sendSignalFrame(sender: SignalSender, me: { userId: string; installationId: string }, frame: ClientFrame, logger: Logger): Promise<Extract<ServerFrame, { type: 'error' }> | undefined> {
  const parsed = signalFrame.safeParse(frame);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return { type: 'error', code: 'bad_message', detail: `signal: ${issue ? `${issue.path.join('.') || 'frame'}: ${issue.message}` : 'invalid'}` };
  }
  const callId = parsed.data.callId;
  try {
    const outcome = await sender.send(me.userId, me.installationId, parsed.data);
    if (outcome.kind === 'refused') {
      const detail = outcome.reason === 'not_found' ? 'no such call' : 'only a member joined to the call, from its joined installation, may send signals';
      return { type: 'error', code: 'signal_refused', reason: outcome.reason, callId, detail };
    }
    if (outcome.kind === 'limited') {
      return { type: 'error', code: 'signal_refused', reason: 'rate_limited', callId, retryAfterMs: outcome.retryAfterMs, detail: 'too many signals on this call; this one was dropped' };
    }
    return undefined;
  } catch (err) {
    logger.warn({ err: (err as Error).message, userId: me.userId }, 'signal failed');
    return { type: 'error', code: 'signal_refused', reason: 'unavailable', callId, detail: 'temporary failure; this signal was dropped' };
  }
}
