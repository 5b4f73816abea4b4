import type { BatchReads, ChangeHandler, CallChange } from '../events/change.js';
import { parseRegistrations, type PushRegistration } from './registry.js';
import { pushesFor, usersToLookUp, type ProvidersEnabled } from './planner.js';
import { registrationKey, type PushDispatcher } from './dispatcher.js';

/**
 * Relay handler: plans the push messages of relayed changes (planner.ts) and sends their first
 * attempt (dispatcher.ts). The registrations and the invited calls it needs are read by the relay
 * in the write that stores the changes' events: no read of its own.
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
    await dispatcher.send(messages, 0, { registrations: byKey, calls: reads.calls });
  };
  /** Per call: the handling of its latest batch, while it runs. */
  const inFlight = new Map<string, Promise<void>>();
  return {
    name: 'push',
    concurrent: true,
    pushRegistrationsOf: (changes) => changes.flatMap(usersToLookUp),
    callsOf: (changes) => changes.filter((c) => c.kind === 'created').map((c) => c.call.callId),
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
