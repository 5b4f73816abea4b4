import type { ChangeHandler, CallChange } from '../events/change.js';
import type { CallRecord } from '../calls/model.js';
import { parseRegistrations, type PushRegistration } from './registry.js';
import { pushesFor, usersToLookUp, type ProvidersEnabled } from './planner.js';
import { registrationKey, type PushDispatcher } from './dispatcher.js';

/** The invited calls, read while the changes' events are stored (undefined: gone). */
type InvitedCalls = Promise<Map<string, CallRecord | undefined>>;

/**
 * Relay handler: plans the push messages of relayed changes (planner.ts) and sends their first
 * attempt (dispatcher.ts). The registrations it needs come back from the scripts that store the
 * users' events, and the invited calls are read in the same write (prepare): no read of its own.
 */
export function pushHandler(
  peekCall: (callId: string) => Promise<CallRecord | undefined>,
  dispatcher: PushDispatcher,
  enabled: ProvidersEnabled,
): ChangeHandler<InvitedCalls> {
  if (!enabled.iosVoip && !enabled.androidPush) return { name: 'push', handle: async () => {} };
  const prepare = (changes: readonly CallChange[]): InvitedCalls => {
    const invited = [...new Set(changes.filter((c) => c.kind === 'created').map((c) => c.call.callId))];
    const calls = Promise.all(invited.map(async (id) => [id, await peekCall(id)] as const)).then((e) => new Map(e));
    // Changes whose events fail to be stored never reach handle(): this read's failure is not news.
    calls.catch(() => {});
    return calls;
  };
  return {
    name: 'push',
    pushRegistrationsOf: (changes) => changes.flatMap(usersToLookUp),
    prepare,
    async handle(changes, prepared, stored) {
      const regs = new Map<string, PushRegistration[]>();
      for (const [userId, flat] of stored) regs.set(userId, parseRegistrations(userId, flat));
      const messages = changes.flatMap((c) =>
        pushesFor(c, (u) => regs.get(u) ?? [], enabled).map((p) => (c.traceparent ? { ...p.data, tp: c.traceparent } : p.data)),
      );
      if (messages.length === 0) return;
      const byKey = new Map<string, PushRegistration>();
      for (const list of regs.values()) for (const r of list) byKey.set(registrationKey(r.userId, r.installationId, r.kind), r);
      await dispatcher.send(messages, 0, { registrations: byKey, calls: await (prepared ?? prepare(changes)) });
    },
  };
}
