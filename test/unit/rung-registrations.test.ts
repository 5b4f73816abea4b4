import { describe, expect, it } from 'vitest';
import { RungRegistrations } from '../../src/push/rungRegistrations.js';
import { pushHandler } from '../../src/push/relayPushes.js';
import type { PushDispatcher } from '../../src/push/dispatcher.js';
import type { PushMessage } from '../../src/push/queues.js';
import type { BatchReads, CallChange } from '../../src/calls/change.js';
import type { PairCall } from '../../src/calls/model.js';
import type { PushRegistration } from '../../src/push/registry.js';
import { registration, ringingCall } from '../support/callRecords.js';

/**
 * The memory of what a call's invitation rang (src/push/rungRegistrations.ts, docs/architecture.md
 * "Push"): its bounds with a fake clock, and the push handler leaving the remembered users out of
 * the relay's read while still reading everyone it does not remember.
 */

const reg = registration;

function memory(maxEntries = 3, lifetimeMs = 1000) {
  let now = 0;
  const m = new RungRegistrations({ maxEntries, lifetimeMs, now: () => now });
  return { m, advance: (ms: number) => (now += ms) };
}

describe('rung registrations: bounds', () => {
  it('holds at most maxEntries, the oldest evicted first', () => {
    const { m } = memory(3);
    for (const u of ['a', 'b', 'c', 'd']) m.remember('call-1', u, [reg(u, `${u}-phone`)]);
    expect(m.size).toBe(3);
    expect(m.recall('call-1', 'a')).toBeUndefined();
    expect(m.recall('call-1', 'd')).toEqual([reg('d', 'd-phone')]);
  });

  it('an entry lives lifetimeMs: recalled until then, not after; expired ones leave as others are added', () => {
    const { m, advance } = memory(10, 1000);
    m.remember('call-1', 'a', []);
    advance(999);
    expect(m.recall('call-1', 'a')).toEqual([]);
    m.remember('call-2', 'b', []);
    advance(1);
    expect(m.recall('call-1', 'a')).toBeUndefined();
    expect(m.size).toBe(1);
    advance(999);
    m.remember('call-3', 'c', []);
    // call-2's entry expired at 1999: dropped from the front by the add, never recalled.
    expect(m.size).toBe(1);
    expect(m.recall('call-3', 'c')).toEqual([]);
  });

  it("a re-invitation replaces the entry and restarts its lifetime (it moves to the back)", () => {
    const { m, advance } = memory(2, 1000);
    m.remember('call-1', 'a', [reg('a', 'old')]);
    m.remember('call-1', 'b', []);
    advance(600);
    m.remember('call-1', 'a', [reg('a', 'new')]);
    m.remember('call-2', 'c', []);
    // b was the oldest: evicted; a stays with what the latest invitation rang.
    expect(m.recall('call-1', 'b')).toBeUndefined();
    advance(600);
    expect(m.recall('call-1', 'a')).toEqual([reg('a', 'new')]);
  });

  it("the call's end removes all of its entries, and only its", () => {
    const { m } = memory(10);
    m.remember('call-1', 'a', []);
    m.remember('call-1', 'b', []);
    m.remember('call-2', 'a', []);
    m.forgetCall('call-1');
    expect(m.size).toBe(1);
    expect(m.recall('call-1', 'a')).toBeUndefined();
    expect(m.recall('call-2', 'a')).toEqual([]);
    m.forgetCall('call-1');
    expect(m.size).toBe(1);
  });
});

describe('push handler: what the relay reads', () => {
  const call = ringingCall({ callId: 'c1', calleeUserId: 'bob', callerUserId: 'alice', createdAtMs: Date.now(), expiresAtMs: Date.now() + 45_000 });
  const change = (kind: CallChange['kind'], patch: Partial<Omit<PairCall, 'kind'>> = {}): CallChange => ({
    entryId: `${kind}-0`,
    shard: 0,
    kind,
    atMs: Date.now(),
    call: { ...call, ...patch },
  });
  const stored = (regs: PushRegistration[]) =>
    regs.flatMap((r) => [`${r.installationId}\n${r.kind}`, JSON.stringify({ token: r.token, appId: r.appId, updatedAtMs: r.updatedAtMs })]);
  const reads = (users: Record<string, PushRegistration[]>): BatchReads => ({
    pushRegistrations: new Map(Object.entries(users).map(([u, regs]) => [u, stored(regs)])),
    calls: new Map(),
  });
  function handler() {
    const sent: PushMessage[] = [];
    const dispatcher = { sendFirst: async (messages: readonly PushMessage[]) => void sent.push(...messages) } as unknown as PushDispatcher;
    const m = new RungRegistrations({ maxEntries: 10, lifetimeMs: 60_000 });
    return { h: pushHandler(dispatcher, { iosVoip: true, androidPush: true }, { ringTimeoutMs: 45_000, rung: m }), sent, m };
  }
  const answered = () => change('answered', { state: 'accepted', revision: '2', answeredByInstallationId: 'bob-pixel', acceptedAtMs: Date.now() });
  const cancelled = () => change('ended', { state: 'ended', revision: '2', endReason: 'localHangup', endedBy: 'caller', endedByInstallationId: 'alice-phone' });
  const bobAtInvitation = [reg('bob', 'bob-iphone', 'iosVoip'), reg('bob', 'bob-pixel'), reg('bob', 'bob-tab')];

  it('answered: the callee is not read again, its signal goes to the Android devices the invitation rang; the caller is read', async () => {
    const { h, sent, m } = handler();
    const created = [change('created')];
    expect([...h.pushRegistrationsOf!(created)]).toEqual(['bob']);
    await h.handle(created, reads({ bob: bobAtInvitation }));
    expect(m.recall('c1', 'bob')?.map((r) => r.installationId)).toEqual(['bob-pixel', 'bob-tab']);

    const answer = [answered()];
    expect([...h.pushRegistrationsOf!(answer)]).toEqual(['alice']);
    sent.length = 0;
    // bob-new registered mid-ring: it never rang, so nothing stops on it.
    await h.handle(answer, reads({ alice: [reg('alice', 'alice-phone')] }));
    expect(sent.map((s) => `${s.t}:${s.installationId}`).sort()).toEqual(['signal:alice-phone', 'signal:bob-tab']);
  });

  it("the call's end forgets it; a change of a call the memory does not hold reads its users as before", async () => {
    const { h, sent, m } = handler();
    await h.handle([change('created')], reads({ bob: bobAtInvitation }));
    const cancel = [cancelled()];
    expect([...h.pushRegistrationsOf!(cancel)]).toEqual([]);
    await h.handle(cancel, reads({}));
    expect(sent.filter((s) => s.t === 'signal').map((s) => s.installationId).sort()).toEqual(['bob-pixel', 'bob-tab']);
    expect(m.size).toBe(0);
    // Another worker relayed this call's invitation (or this one restarted): the callee is read.
    expect([...h.pushRegistrationsOf!([cancelled()])]).toEqual(['bob']);
    expect([...h.pushRegistrationsOf!([answered()])]).toEqual(['bob', 'alice']);
  });

  it('an invitation and its end in one batch: the callee is read once, for both', async () => {
    const { h, sent, m } = handler();
    const batch = [change('created'), cancelled()];
    expect([...new Set(h.pushRegistrationsOf!(batch))]).toEqual(['bob']);
    await h.handle(batch, reads({ bob: bobAtInvitation }));
    expect(sent.filter((s) => s.t === 'signal').map((s) => s.installationId).sort()).toEqual(['bob-pixel', 'bob-tab']);
    expect(m.size).toBe(0);
  });
});
