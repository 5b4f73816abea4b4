import type { ChangeHandler } from '../events/relay.js';
import type { CallChange } from '../events/change.js';
import type { PushRegistry, PushRegistration } from './registry.js';
import { pushesFor, usersToLookUp, type ProvidersEnabled } from './planner.js';
import { jobIdPart, type Queues } from './queues.js';

/**
 * Relay handler: plans the push messages of a batch of changes and adds them in one bulk call.
 * The registrations it needs are read while the batch's events are delivered (prefetch).
 */
export function pushEnqueuer(registry: PushRegistry, queues: Queues, enabled: ProvidersEnabled, dedupTtlMs: number): ChangeHandler {
  if (!enabled.iosVoip && !enabled.androidPush) return async () => {};
  const prefetched = new WeakMap<readonly CallChange[], Promise<Map<string, PushRegistration[]>>>();
  const lookUp = async (changes: readonly CallChange[]) => {
    const users = new Set<string>();
    for (const c of changes) for (const u of usersToLookUp(c)) users.add(u);
    const regs = new Map<string, PushRegistration[]>();
    await Promise.all([...users].map(async (u) => regs.set(u, await registry.list(u))));
    return regs;
  };
  const handler: ChangeHandler = async (changes) => {
    const early = prefetched.get(changes);
    prefetched.delete(changes);
    const regs = await (early ?? lookUp(changes));
    const jobs = changes.flatMap((c) => pushesFor(c, (u) => regs.get(u) ?? [], enabled));
    if (jobs.length === 0) return;
    await queues.push.addBulk(
      jobs.map((j) => ({ name: j.data.t, data: j.data, opts: { deduplication: { id: j.id, ttl: dedupTtlMs } } })),
    );
  };
  handler.prefetch = (changes) => {
    const p = lookUp(changes);
    // A batch whose delivery fails never runs its effects: its lookup's failure is not news.
    p.catch(() => {});
    prefetched.set(changes, p);
  };
  return handler;
}

const timerJobId = (callId: string) => `expire.${jobIdPart(callId)}`;

/**
 * Relay handler: one delayed expiry job per new call, at its expiresAtMs; removed again when the
 * call stops ringing first (answer, cancel, decline), which costs one script instead of running
 * a job that would find nothing to do. The job ending the call itself is running and stays.
 */
export function timerEnqueuer(queues: Queues): ChangeHandler {
  return async (changes) => {
    const created = changes.filter((c) => c.kind === 'created');
    const stoppedRinging = changes.filter(
      (c) => (c.kind === 'answered' || (c.kind === 'ended' && c.call.acceptedAtMs === undefined)) && c.call.endedBy !== 'system',
    );
    const now = Date.now();
    await Promise.all([
      created.length > 0 &&
        queues.timers.addBulk(
          created.map((c) => ({
            name: 'expire',
            data: { callId: c.call.callId },
            opts: { jobId: timerJobId(c.call.callId), delay: Math.max(0, c.call.expiresAtMs - now) },
          })),
        ),
      ...stoppedRinging.map((c) => queues.timers.remove(timerJobId(c.call.callId))),
    ]);
  };
}
