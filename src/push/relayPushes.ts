import type { BatchReads, ChangeHandler, CallChange } from '../calls/change.js';
import { parseRegistrations, type PushRegistration } from './registry.js';
import { pushesFor, usersToLookUp, type ProvidersEnabled } from './planner.js';
import { registrationKey, type PushDispatcher } from './dispatcher.js';

/** How old (by the Redis clock that stamped it) a relayed invitation may be and still go out unread. */
const READ_CALLS_AFTER_MS = 100;

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
 */
export function pushHandler(dispatcher: PushDispatcher, enabled: ProvidersEnabled): ChangeHandler {
  if (!enabled.iosVoip && !enabled.androidPush) return { name: 'push', handle: async () => {} };
  const send = async (changes: readonly CallChange[], reads: BatchReads): Promise<void> => {
    const regs = new Map<string, PushRegistration[]>();
    for (const [userId, flat] of reads.pushRegistrations) regs.set(userId, parseRegistrations(userId, flat));
    const messages = changes.flatMap((c) =>
      pushesFor(c, (u) => regs.get(u) ?? [], enabled).map((p) => (c.traceparent ? { ...p.data, tp: c.traceparent } : p.data)),
    );
    if (messages.length === 0) return;
    const byKey = new Map<string, PushRegistration>();
    for (const list of regs.values()) for (const r of list) byKey.set(registrationKey(r.userId, r.installationId, r.kind), r);
    const calls = new Map(reads.calls);
    for (const c of changes) if (!reads.calls.has(c.call.callId)) calls.set(c.call.callId, c.call);
    await dispatcher.send(messages, 0, { registrations: byKey, calls });
  };
  /** Per call: the handling of its latest batch, while it runs. */
  const inFlight = new Map<string, Promise<void>>();
  return {
    name: 'push',
    concurrent: true,
    pushRegistrationsOf: (changes) => changes.flatMap(usersToLookUp),
    callsOf: (changes) => {
      const now = Date.now();
      return changes.filter((c) => c.kind === 'created' && now - c.atMs >= READ_CALLS_AFTER_MS).map((c) => c.call.callId);
    },
    handle(changes, reads) {
      const callIds = [...new Set(changes.map((c) => c.call.callId))];
      const earlier = callIds.flatMap((id) => inFlight.get(id) ?? []);
      const run = Promise.all(earlier).then(() => send(changes, reads));
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
