import type { ChangeHandler, CallChange } from '../events/change.js';
import type { CallRecord } from '../calls/model.js';
import type { PushRegistry, PushRegistration } from './registry.js';
import { pushesFor, usersToLookUp, type ProvidersEnabled } from './planner.js';
import { registrationKey, type PushDispatcher } from './dispatcher.js';

interface Prepared {
  registrations: Promise<Map<string, PushRegistration[]>>;
  invitedCalls: Promise<Map<string, CallRecord | undefined>>;
}

/**
 * Relay handler: plans the push messages of relayed changes (planner.ts) and sends their first
 * attempt (dispatcher.ts). The registrations and the invited calls it needs are read while the
 * changes' events are stored (prepare), in the same write.
 */
export function pushHandler(
  registry: PushRegistry,
  peekCall: (callId: string) => Promise<CallRecord | undefined>,
  dispatcher: PushDispatcher,
  enabled: ProvidersEnabled,
): ChangeHandler<Prepared> {
  const prepare = (changes: readonly CallChange[]): Prepared => {
    const users = new Set<string>();
    for (const c of changes) for (const u of usersToLookUp(c)) users.add(u);
    const registrations = Promise.all([...users].map(async (u) => [u, await registry.list(u)] as const)).then((e) => new Map(e));
    const invited = [...new Set(changes.filter((c) => c.kind === 'created').map((c) => c.call.callId))];
    const invitedCalls = Promise.all(invited.map(async (id) => [id, await peekCall(id)] as const)).then((e) => new Map(e));
    // Changes whose events fail to be stored never reach handle(): their reads' failures are not news.
    registrations.catch(() => {});
    invitedCalls.catch(() => {});
    return { registrations, invitedCalls };
  };
  if (!enabled.iosVoip && !enabled.androidPush) return { name: 'push', handle: async () => {} };
  return {
    name: 'push',
    prepare,
    async handle(changes, prepared) {
      const { registrations, invitedCalls } = prepared ?? prepare(changes);
      const regs = await registrations;
      const messages = changes.flatMap((c) =>
        pushesFor(c, (u) => regs.get(u) ?? [], enabled).map((p) => (c.traceparent ? { ...p.data, tp: c.traceparent } : p.data)),
      );
      if (messages.length === 0) return;
      const byKey = new Map<string, PushRegistration>();
      for (const list of regs.values()) for (const r of list) byKey.set(registrationKey(r.userId, r.installationId, r.kind), r);
      await dispatcher.send(messages, 0, { registrations: byKey, calls: await invitedCalls });
    },
  };
}
