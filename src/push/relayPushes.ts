import type { BatchReads, ChangeHandler, CallChange } from '../calls/change.js';
import { parseRegistrations, type PushRegistration } from './registry.js';
import { missedCallPushesFor, pushesFor, usersToLookUp, type AlertsOf, type ProvidersEnabled } from './planner.js';
import { registrationKey, type PushDispatcher } from './dispatcher.js';
import { RungRegistrations } from './rungRegistrations.js';
import { missedBy } from '../calls/missed.js';

/** How old (by the Redis clock that stamped it) a relayed invitation may be and still go out unread. */
const READ_CALLS_AFTER_MS = 100;
/** At most this many (call, invitee) registrations remembered from invitations (rungRegistrations.ts). */
const MAX_RUNG = 100_000;
/** How long past the ring window a remembered invitation is kept: a late ring sweep, a relay backlog. */
const RUNG_MARGIN_MS = 30_000;

export interface PushHandlerOptions {
  /** RING_TIMEOUT_MS: how long an invitation's registrations are worth remembering (plus a margin). */
  ringTimeoutMs: number;
  /** The memory of rung registrations (a test's, with its own bounds and clock). */
  rung?: RungRegistrations;
  /** Each app's missed-call alerts (planner.ts missedCallPushesFor); none when left out. */
  alertsOf?: AlertsOf;
}

/**
 * Relay handler: plans the push messages of relayed changes (planner.ts) and sends their first
 * attempt (dispatcher.ts). The registrations and the invited calls it needs are read by the relay
 * in the write that stores the changes' events: no read of its own.
 *
 * An invitation relayed within READ_CALLS_AFTER_MS of its call's creation goes out from the call
 * as the batch knows it (its latest change in the batch: one cancelled in the same batch is not
 * pushed). Only changes written in the milliseconds since the read can be newer, and a cancel
 * among them follows with its own signal, as one made while the push is in flight does. An older
 * invitation (a backlog, a shard taken over) has its call read again with the batch's delivery,
 * so a call that ended meanwhile is not pushed (docs/architecture.md "Push").
 *
 * Batches are sent concurrently, but the pushes of one call go out in the order of its changes:
 * a batch waits for the earlier batches that hold changes of the same calls (an invitation is
 * answered by the provider before that call's cancel signal is sent).
 *
 * A member a change made miss the call gets a missed-call alert per installation, as its app
 * allows (planner.ts missedCallPushesFor): its registrations are read in the batch's write even
 * when the memory holds the ones its invitation rang (a device registered mid-ring is alerted too).
 *
 * The signals that stop a ringing (answered, declined, cancelled, unanswered; a group member
 * joining, declining, missing) go to the Android devices the invitation rang: the registrations
 * it was planned with are remembered in this process (rungRegistrations.ts), so those users are
 * not read again. They are the right ones, not only the cheaper: a device registered mid-ring
 * never rang. Whom the memory does not hold (another worker relayed the invitation, a restart,
 * a shard taken over, evicted) is read as before (docs/architecture.md "Push").
 */
export function pushHandler(dispatcher: PushDispatcher, enabled: ProvidersEnabled, opts: PushHandlerOptions): ChangeHandler {
  if (!enabled.iosVoip && !enabled.androidPush) return { name: 'push', handle: async () => {} };
  const { alertsOf } = opts;
  const rung = opts.rung ?? new RungRegistrations({ maxEntries: MAX_RUNG, lifetimeMs: opts.ringTimeoutMs + RUNG_MARGIN_MS });
  /**
   * Per change: the users left out of the batch's read because the memory held them, with what
   * it held when the batch was planned (an end handled meanwhile does not take it away).
   */
  const recalled = new WeakMap<CallChange, Map<string, readonly PushRegistration[]>>();
  const usersToRead = (c: CallChange): string[] => {
    const users = usersToLookUp(c);
    if (isInvitation(c)) return users;
    // A member who missed the call is alerted on every installation it has now, not only on
    // those its invitation rang: always read (planner.ts missedCallPushesFor).
    const missed = alertsOf ? new Set(missedBy(c).map((p) => p.userId)) : new Set<string>();
    const held = new Map<string, readonly PushRegistration[]>();
    const toRead = users.filter((u) => {
      const regs = rung.recall(c.call.callId, u);
      if (regs) held.set(u, regs);
      return !regs || missed.has(u);
    });
    if (held.size > 0) recalled.set(c, held);
    // A member do not disturb silenced was never rung, so is not among `users`, yet missed the call.
    for (const u of missed) if (!toRead.includes(u)) toRead.push(u);
    return toRead;
  };
  /** Keeps what the batch's invitations were planned with; forgets the calls that ended. In outbox order. */
  const keep = (changes: readonly CallChange[], regs: ReadonlyMap<string, PushRegistration[]>): void => {
    for (const c of changes) {
      if (c.kind === 'ended') rung.forgetCall(c.call.callId);
      else if (isInvitation(c)) {
        for (const u of usersToLookUp(c)) {
          const read = regs.get(u);
          // Signals go to Android only (planner.ts): nothing else is worth keeping.
          if (read) rung.remember(c.call.callId, u, read.filter((r) => r.kind === 'androidPush'));
        }
      }
    }
  };
  const send = async (changes: readonly CallChange[], reads: BatchReads, regs: ReadonlyMap<string, PushRegistration[]>): Promise<void> => {
    const messages = changes.flatMap((c) => {
      const held = recalled.get(c);
      const rungOf = (u: string) => held?.get(u) ?? regs.get(u) ?? [];
      const planned = [...pushesFor(c, rungOf, enabled), ...(alertsOf ? missedCallPushesFor(c, (u) => regs.get(u) ?? [], alertsOf) : [])];
      return planned.map((p) => (c.traceparent ? { ...p.data, tp: c.traceparent } : p.data));
    });
    if (messages.length === 0) return;
    const byKey = new Map<string, PushRegistration>();
    const lists = [...regs.values(), ...changes.flatMap((c) => [...(recalled.get(c)?.values() ?? [])])];
    for (const list of lists) for (const r of list) byKey.set(registrationKey(r.userId, r.installationId, r.kind), r);
    const calls = new Map(reads.calls);
    for (const c of changes) if (!reads.calls.has(c.call.callId)) calls.set(c.call.callId, c.call);
    await dispatcher.sendFirst(messages, { registrations: byKey, calls });
  };
  /** Per call: the handling of its latest batch, while it runs. */
  const inFlight = new Map<string, Promise<void>>();
  return {
    name: 'push',
    concurrent: true,
    pushRegistrationsOf: (changes) => changes.flatMap(usersToRead),
    callsOf: (changes) => {
      const now = Date.now();
      return changes.filter((c) => c.kind === 'created' && now - c.atMs >= READ_CALLS_AFTER_MS).map((c) => c.call.callId);
    },
    handle(changes, reads) {
      const callIds = [...new Set(changes.map((c) => c.call.callId))];
      const earlier = callIds.flatMap((id) => inFlight.get(id) ?? []);
      const regs = new Map<string, PushRegistration[]>();
      for (const [userId, flat] of reads.pushRegistrations) regs.set(userId, parseRegistrations(userId, flat));
      // At once, not after the earlier batches: the next batch's read is planned meanwhile.
      keep(changes, regs);
      const run = Promise.all(earlier).then(() => send(changes, reads, regs));
      // A failed batch is retried by the relay; it does not hold back the call's later pushes.
      const settled = run.catch(() => {});
      for (const id of callIds) inFlight.set(id, settled);
      void settled.then(() => {
        for (const id of callIds) if (inFlight.get(id) === settled) inFlight.delete(id);
      });
      return run;
    },
  };
}

/** A change that rings someone: its invitees are always read (their devices now). */
const isInvitation = (c: CallChange): boolean => c.kind === 'created' || c.kind === 'invited';
