import { topologyOf, type RedisClient } from '../redis/connection.js';
import { keys, shardOf, type KeySpace } from '../redis/keys.js';
import { runScript, type ScriptCall } from '../redis/scripts.js';
import { OPAQUE_ID_PATTERN, OPAQUE_ID_RULE } from '../commands/schemas.js';
import { SIGNAL_KINDS, STATE_KINDS } from '../calls/presence.js';
import { SIGNAL_CUSTOM_MAX_BYTES, SIGNAL_REACTION_MAX_CHARS } from '../config/signalLimits.js';
import type { Logger } from '../util/logger.js';
import type { ClientFrame, ServerFrame } from './protocol.js';
import { signalMessage } from './signalNotice.js';

/**
 * Live in-call signals (docs/signaling.md "Live signals"): mute, speaking, raised hand, camera,
 * reactions and small app-defined signals, sent by a joined member to the call's other joined
 * members over the socket. Not stored in any log and never replayed: at most once, in order per
 * sender. The signals a gateway receives while its previous run is in flight share one script run
 * (lua/sendSignals.lua; on a cluster one per call shard), which checks each sender is joined,
 * counts each call's limit, keeps the state kinds in the call's presence map (an unchanged state
 * is not sent again) and, on a single Redis, publishes them together for all their recipients in
 * the same round trip (src/gateway/signalNotice.ts).
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

/**
 * At most this many signals share a script run: a turn of a flooded gateway does not hold Redis
 * for long (a signal costs the script a few µs).
 */
const MAX_SIGNALS_PER_SCRIPT = 128;
/**
 * Signals waiting for Redis beyond this many are refused at once (`unavailable`): a stalled Redis
 * (each run waits at most REDIS_COMMAND_TIMEOUT_MS) does not pile them up.
 */
const MAX_QUEUED_SIGNALS = 4096;

const STATE_KIND_SET: ReadonlySet<string> = new Set(STATE_KINDS);

export type SignalInput = { callId: string; kind: string; value: unknown };
/** A signal as checked, with its value's JSON. */
export type CheckedSignal = { signal: SignalInput; valueJson: string };

/**
 * A `signal` client frame's fields besides `type` (docs/signaling.md "Live signals"), checked by
 * hand rather than by a zod union: this runs for every signal, and the union with its refinement
 * was a tenth of the gateway's CPU per signal. Returns the signal with its value's JSON, or what
 * is wrong with the frame.
 */
export function checkSignalFrame(frame: Record<string, unknown>): CheckedSignal | { problem: string } {
  const { callId, kind, value } = frame;
  if (typeof callId !== 'string' || !OPAQUE_ID_PATTERN.test(callId)) return { problem: `callId: ${OPAQUE_ID_RULE}` };
  if (typeof kind === 'string' && STATE_KIND_SET.has(kind)) {
    if (typeof value !== 'boolean') return { problem: `value: a ${kind} signal's value is true or false` };
    return { signal: { callId, kind, value }, valueJson: value ? 'true' : 'false' };
  }
  if (kind === 'reaction') {
    if (typeof value !== 'string' || value.length < 1 || value.length > SIGNAL_REACTION_MAX_CHARS) return { problem: `value: a reaction is a string of 1 to ${SIGNAL_REACTION_MAX_CHARS} characters` };
    return { signal: { callId, kind, value }, valueJson: JSON.stringify(value) };
  }
  if (kind === 'custom') {
    const valueJson = jsonOf(value);
    if (valueJson === undefined || Buffer.byteLength(valueJson) > SIGNAL_CUSTOM_MAX_BYTES) return { problem: `value: a JSON value of at most ${SIGNAL_CUSTOM_MAX_BYTES} bytes` };
    return { signal: { callId, kind, value }, valueJson };
  }
  return { problem: `kind: one of ${SIGNAL_KINDS.join(', ')}` };
}

/** `value` as JSON; undefined when it has none (a MessagePack frame can carry a 64-bit integer as a BigInt). */
function jsonOf(value: unknown): string | undefined {
  try {
    return value === undefined ? undefined : JSON.stringify(value);
  } catch {
    return undefined;
  }
}

/** What a `signal` frame came to. */
export type SignalOutcome =
  | { kind: 'sent'; recipients: number }
  | { kind: 'same' }
  | { kind: 'refused'; reason: 'not_found' | 'not_joined' }
  | { kind: 'limited'; retryAfterMs: number };

/** A signal to send: its sender, call and kind, and the JSON its recipients get. */
export interface QueuedSignal {
  userId: string;
  installationId: string;
  callId: string;
  kind: string;
  /** For a state kind, '1' or '0'; '' otherwise. */
  state: string;
  signalJson: string;
}

/** lua/sendSignals.lua's call for `signals`: four keys per call, six arguments per signal. */
export function signalsScriptCall(ks: KeySpace, signals: readonly QueuedSignal[], opts: { noticeChannel: string; limit: number; viewTtlMs?: number }): ScriptCall<'sendSignals'> {
  const callIndex = new Map<string, number>();
  const callKeys: string[] = [];
  const rest: string[] = [];
  for (const s of signals) {
    let n = callIndex.get(s.callId);
    if (n === undefined) {
      n = callIndex.size + 1;
      callIndex.set(s.callId, n);
      callKeys.push(keys.call(ks, s.callId), keys.callPresence(ks, s.callId), keys.callSignalLimit(ks, s.callId), keys.callSignalView(ks, s.callId));
    }
    rest.push(String(n), s.userId, s.installationId, s.kind, s.state, s.signalJson);
  }
  return {
    keys: callKeys,
    args: {
      noticeChannel: opts.noticeChannel,
      limit: String(opts.limit),
      windowMs: String(SIGNAL_LIMIT_WINDOW_MS),
      presenceTtlMs: String(PRESENCE_TTL_MS),
      viewTtlMs: String(opts.viewTtlMs ?? SIGNAL_VIEW_TTL_MS),
      signals: rest,
    },
  };
}

interface Waiting extends QueuedSignal {
  done: (outcome: SignalOutcome) => void;
  failed: (err: unknown) => void;
}

export class SignalSender {
  /** A single Redis: the script publishes the signals on an early channel. */
  private readonly single: boolean;
  /** Signals not sent yet: they go together, once the run in flight returns. */
  private queued: Waiting[] = [];
  /** A run in flight, or one about to start: a new signal only queues. */
  private busy = false;

  constructor(
    private readonly redis: RedisClient,
    private readonly ks: KeySpace,
    /** RATE_CALL_SIGNALS_PER_S: signals per call per second, all senders together (0: off). */
    private readonly perCallPerS: number,
  ) {
    this.single = topologyOf(redis) === 'single';
  }

  /**
   * Sends `signal`: after this turn of the event loop when nothing is in flight (setImmediate:
   * uWebSockets.js hands each frame to its own callback, and microtasks run after each), else
   * once the run in flight returns, with every signal received meanwhile. So a signal alone waits
   * for nothing, and under load a run carries what arrived during one round trip: one script
   * run, one publication and one wake-up of each gateway for all of them, where those, not the
   * checks, were most of what a signal cost Redis and the gateways.
   */
  send(userId: string, installationId: string, { signal, valueJson }: CheckedSignal): Promise<SignalOutcome> {
    if (this.queued.length >= MAX_QUEUED_SIGNALS) return Promise.reject(new Error('too many signals waiting for Redis'));
    const { callId, kind, value } = signal;
    const signalJson = `{"callId":${JSON.stringify(callId)},"userId":${JSON.stringify(userId)},"kind":"${kind}","value":${valueJson},"atMs":${Date.now()}}`;
    const state = STATE_KIND_SET.has(kind) ? (value ? '1' : '0') : '';
    return new Promise((done, failed) => {
      this.queued.push({ userId, installationId, callId, kind, state, signalJson, done, failed });
      if (!this.busy) {
        this.busy = true;
        setImmediate(() => void this.flush());
      }
    });
  }

  /** Sends what is queued, and again what queued meanwhile, until nothing is. */
  private async flush(): Promise<void> {
    while (this.queued.length > 0) {
      const turn = this.queued;
      this.queued = [];
      // A cluster: one script per call shard (its keys share the shard's slot).
      const groups = new Map<number, Waiting[]>();
      for (const s of turn) {
        const group = this.single ? 0 : shardOf(s.callId, this.ks.shards);
        const signals = groups.get(group);
        if (signals) signals.push(s);
        else groups.set(group, [s]);
      }
      const runs: Promise<void>[] = [];
      for (const signals of groups.values()) {
        const noticeChannel = this.single ? keys.earlyChannel(this.ks, shardOf(signals[0]!.callId, this.ks.shards)) : '';
        for (let i = 0; i < signals.length; i += MAX_SIGNALS_PER_SCRIPT) runs.push(this.run(signals.slice(i, i + MAX_SIGNALS_PER_SCRIPT), noticeChannel));
      }
      await Promise.all(runs);
      // The reply came in the middle of the event loop's poll phase: frames read after it in the
      // same phase join the next run too (setImmediate runs once the phase is over).
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
    this.busy = false;
  }

  /** One script run for `batch`; settles each signal's promise, and never rejects. */
  private async run(batch: Waiting[], noticeChannel: string): Promise<void> {
    try {
      const call = signalsScriptCall(this.ks, batch, { noticeChannel, limit: this.perCallPerS });
      const replies = (await runScript(this.redis, 'sendSignals', call.keys, call.args)) as (string | number)[][];
      batch.forEach((s, i) => this.settle(s, replies[i]!, noticeChannel));
    } catch (err) {
      // A signal settled already stays so.
      for (const s of batch) s.failed(err);
    }
  }

  private settle(s: Waiting, [outcome, first, second]: (string | number)[], noticeChannel: string): void {
    if (outcome === 'same') return s.done({ kind: 'same' });
    if (outcome === 'limited') return s.done({ kind: 'limited', retryAfterMs: Number(first) });
    if (outcome === 'error') return s.done({ kind: 'refused', reason: first === 'not_found' ? 'not_found' : 'not_joined' });
    const recipients = Number(first);
    // A single Redis: the script published it.
    if (noticeChannel !== '' || recipients === 0) return s.done({ kind: 'sent', recipients });
    // A cluster: each recipient's channel is in its user's slot, not the call's. Issued in order
    // on the connection to that slot's node, so a sender's signals stay in order.
    const to = String(second).split('\t');
    const sends: Promise<unknown>[] = [];
    for (let j = 0; j + 1 < to.length; j += 2) sends.push(this.redis.spublish(keys.liveChannel(this.ks, to[j]!), signalMessage(to[j + 1]!, s.signalJson)));
    void Promise.all(sends).then(() => s.done({ kind: 'sent', recipients }), s.failed);
  }
}

/**
 * A `signal` client frame sent on (docs/signaling.md "Live signals"): nothing to answer when sent
 * or unchanged; else the `error` frame to answer with (a malformed frame, or a refusal).
 */
export async function sendSignalFrame(sender: SignalSender, me: { userId: string; installationId: string }, frame: ClientFrame, logger: Logger): Promise<Extract<ServerFrame, { type: 'error' }> | undefined> {
  const checked = checkSignalFrame(frame);
  if ('problem' in checked) return { type: 'error', code: 'bad_message', detail: `signal: ${checked.problem}` };
  const callId = checked.signal.callId;
  try {
    const outcome = await sender.send(me.userId, me.installationId, checked);
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
