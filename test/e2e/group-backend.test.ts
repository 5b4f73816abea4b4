import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { answer, end, expectProblem, uid, type Device } from '../support/fixtures.js';
import { forFile, startStack, type Stack } from '../support/stack.js';
import type { TestServer } from '../support/server.js';
import { newSecret, startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver.js';
import { newServerKey } from '../../src/auth/serverKeys.js';
import { api } from '../support/http.js';
import { online, settleByBarrier, user, waitUntil, type OnlineDevice } from './helpers.js';
import { relayDone } from '../support/fixtures.js';
import { parseExposition, type Exposition } from '../support/exposition.js';

/**
 * What a group call (docs/group-calls.md) gives the app's backend and the members' records: the
 * webhooks (docs/webhooks.md "Events", `call.participant` named by the endpoint), the server API
 * (list, end for all, remove a participant: docs/server-api.md), each member's own history record
 * (docs/call-history.md "Group calls"), and members ringing out at their own windows.
 */

const serverKey = newServerKey();
const secret = newSecret();
let stack: Stack;
let url: string;
let receiver: WebhookReceiver;
/** An api-only process on the same Redis whose calls ring for 1 s. */
let short: TestServer;

forFile(
  async () => {
    receiver = await startWebhookReceiver([secret]);
    const s = await startStack({
      WEBHOOKS: JSON.stringify([{ id: 'main', url: receiver.url, secret, events: ['call.created', 'call.accepted', 'call.ended', 'call.participant'] }]),
      SERVER_API_KEYS: serverKey.hash,
    });
    return {
      stack: s,
      async stop() {
        await s.stop();
        await receiver.close();
      },
    };
  },
  async (s) => {
    stack = s.stack;
    url = stack.url;
    short = await stack.addServer({ ROLES: 'api', RING_TIMEOUT_MS: '1000' });
  },
);

const server = () => api(url, serverKey.key);
const hooks = (callId: string) => [...receiver.unique().values()].filter((w) => w.json?.data?.callId === callId).map((w) => w.json);

async function group(caller: Device, invitees: string[], baseUrl = url): Promise<Record<string, any>> {
  const res = await api(baseUrl, caller.token).post('/v1/calls', { callId: randomUUID(), operationId: uid('op'), calleeUserIds: invitees });
  expect(res.status, res.text).toBe(201);
  return res.json as Record<string, any>;
}

describe('group calls for the app’s backend', () => {
  it('webhooks: call.created and call.ended with the members, call.accepted at the first join, a call.participant per member change', async () => {
    const [a] = user(url, 1);
    const [b] = user(url, 1);
    const [c] = user(url, 1);
    const call = await group(a!, [b!.userId, c!.userId]);
    expect((await answer(b!, call.callId)).status).toBe(200);
    expect((await end(c!, call.callId, 'declined')).status).toBe(200);
    expect((await end(b!, call.callId, 'localHangup')).status).toBe(200);
    await waitUntil('the webhooks', () => hooks(call.callId).some((h) => h.type === 'call.ended'));
    await relayDone(stack.redis, { prefix: 'cb', shards: 8 }, [call.callId]);
    const got = hooks(call.callId);
    expect(got.map((h) => [h.type, h.data.userId ?? null, h.data.state ?? null]).sort()).toEqual(
      [
        ['call.created', null, null],
        ['call.accepted', null, null],
        ['call.participant', b!.userId, 'joined'],
        ['call.participant', c!.userId, 'declined'],
        ['call.participant', b!.userId, 'left'],
        ['call.ended', null, null],
      ].sort(),
    );
    const created = got.find((h) => h.type === 'call.created')!;
    expect(created.data).toMatchObject({ calleeUserId: '', group: { title: '', members: [{ userId: a!.userId, state: 'joined' }, { userId: b!.userId, state: 'invited' }, { userId: c!.userId, state: 'invited' }] } });
    const ended = got.find((h) => h.type === 'call.ended')!;
    expect(ended.data).toMatchObject({ endedBy: 'system', reasons: { caller: 'remoteEnded', callee: 'remoteEnded' } });
    expect(ended.data.group.members.map((m: any) => m.state)).toEqual(['left', 'left', 'declined']);
    expect(got.find((h) => h.type === 'call.participant' && h.data.state === 'joined')!.data.installationId).toBe(b!.installationId);
  });

  it('history: each member has its own record, with its outcome and its own times', async () => {
    const [a] = user(url, 1);
    const [b] = user(url, 1);
    const [c] = user(url, 1);
    const [d] = user(url, 1);
    const [e] = user(url, 1);
    const call = await group(a!, [b!.userId, c!.userId, d!.userId, e!.userId]);
    const joined = (await answer(b!, call.callId)).json;
    expect((await end(c!, call.callId, 'localHangup')).status).toBe(200);
    expect((await answer(e!, call.callId)).status).toBe(200);
    expect((await end(e!, call.callId, 'localHangup')).status).toBe(200);
    const ended = (await a!.api.post(`/v1/calls/${call.callId}/end`, { operationId: uid('op'), reason: 'localHangup', forAll: true })).json;
    const recordOf = async (who: Device) => {
      let rec: Record<string, any> | undefined;
      await waitUntil('the record', async () => (rec = ((await who.api.get('/v1/calls')).json.calls as any[]).find((r) => r.callId === call.callId)) !== undefined);
      return rec!;
    };
    const [ra, rb, rc, rd, re] = [await recordOf(a!), await recordOf(b!), await recordOf(c!), await recordOf(d!), await recordOf(e!)];
    expect(ra).toMatchObject({ direction: 'outgoing', peerUserId: '', calleeUserId: '', missed: false, endReason: 'localHangup', group: { outcome: 'joined', userIds: [a!.userId, b!.userId, c!.userId, d!.userId, e!.userId] } });
    expect(rb).toMatchObject({ direction: 'incoming', peerUserId: a!.userId, acceptedAtMs: joined.participants[1].joinedAtMs, answeredByInstallationId: b!.installationId, endedAtMs: ended.endedAtMs, endReason: 'remoteEnded', missed: false, group: { outcome: 'joined' } });
    expect(rb.talkMs).toBe(ended.endedAtMs - rb.acceptedAtMs);
    // Each member's record carries the reason its own devices were told: its decline, its own leave.
    expect(rc).toMatchObject({ acceptedAtMs: null, talkMs: 0, missed: false, endReason: 'declined', group: { outcome: 'declined' } });
    expect(re).toMatchObject({ missed: false, endReason: 'localHangup', group: { outcome: 'joined' } });
    expect(re.endedAtMs).toBeLessThan(ended.endedAtMs);
    expect(rc.endedAtMs).toBeLessThan(ended.endedAtMs);
    expect(rd).toMatchObject({ acceptedAtMs: null, missed: true, endReason: 'remoteEnded', endedAtMs: ended.endedAtMs, group: { outcome: 'missed' } });
    const missed = await d!.api.get('/v1/calls?missed=true');
    expect((missed.json.calls as any[]).map((r) => r.callId)).toContain(call.callId);
  });

  it('server API: lists the group call for each member, removes one (told remoteEnded, the others told who left), and ends it for everyone', async () => {
    const [a1] = (await online(user(url, 1), url)) as OnlineDevice[];
    const [b1] = (await online(user(url, 1), url)) as OnlineDevice[];
    const [c1] = (await online(user(url, 1), url)) as OnlineDevice[];
    const [d1, d2] = (await online(user(url, 2), url)) as OnlineDevice[];
    try {
      const call = await group(a1!, [b1!.userId, c1!.userId, d1!.userId]);
      expect((await answer(b1!, call.callId)).status).toBe(200);
      expect((await answer(c1!, call.callId)).status).toBe(200);
      await waitUntil('listed', async () => ((await server().get(`/v1/server/users/${d1!.userId}/calls/active`)).json.calls as any[]).some((x) => x.callId === call.callId));

      const removed = await server().del(`/v1/server/calls/${call.callId}/participants/${encodeURIComponent(c1!.userId)}`);
      expect(removed.status, removed.text).toBe(200);
      expect(removed.json.removed).toBe(true);
      expect(removed.json.call.group.members[2]).toMatchObject({ userId: c1!.userId, state: 'left' });
      const ringingOut = await server().del(`/v1/server/calls/${call.callId}/participants/${encodeURIComponent(d1!.userId)}`);
      expect(ringingOut.json.removed).toBe(true);
      expect((await server().del(`/v1/server/calls/${call.callId}/participants/${encodeURIComponent(d1!.userId)}`)).json.removed).toBe(false);
      expect((await server().del(`/v1/server/calls/${call.callId}/participants/nobody`)).status).toBe(404);
      // A one-to-one call is ended, not left by a removal: refused for its parties and strangers alike.
      const [e1] = (await online(user(url, 1), url)) as OnlineDevice[];
      const callee = `user-${randomUUID()}`;
      const pair = await api(url, e1!.token).post('/v1/calls', { callId: randomUUID(), operationId: uid('op'), calleeUserId: callee });
      expect(pair.status, pair.text).toBe(201);
      await e1!.ws.close();
      for (const who of [callee, 'nobody']) {
        expectProblem(await server().del(`/v1/server/calls/${pair.json.callId}/participants/${encodeURIComponent(who)}`), 'invalid_request', /end it instead/);
      }
      expect((await server().get(`/v1/server/calls/${pair.json.callId}`)).json).toMatchObject({ state: 'ringing', revision: pair.json.revision });
      expect(removed.json.call.state).toBe('accepted');

      const ended = await server().post(`/v1/server/calls/${call.callId}/end`, { reason: 'remoteEnded' });
      expect(ended.json).toMatchObject({ ended: true, call: { state: 'ended', endedBy: 'system' } });
      const got = await settleByBarrier(url, call.callId, [[a1!, 5], [b1!, 5], [c1!, 2], [d1!, 2], [d2!, 2]]);
      // a1: b joined, c joined, c left, d left, the end; c1 (removed from the call) is told remoteEnded.
      expect(got[0]!.map((e) => [e.type, e.userId ?? e.reason])).toEqual([
        ['call.participant', b1!.userId],
        ['call.participant', c1!.userId],
        ['call.participant', c1!.userId],
        ['call.participant', d1!.userId],
        ['call.ended', 'remoteEnded'],
      ]);
      expect(got[2]!.at(-1)).toMatchObject({ type: 'call.ended', reason: 'remoteEnded', revision: removed.json.call.revision });
      for (const i of [3, 4]) expect(got[i]![1]).toMatchObject({ type: 'call.ended', reason: 'remoteEnded', revision: ringingOut.json.call.revision });
    } finally {
      await Promise.all([a1, b1, c1, d1, d2].map((d) => d!.ws.close()));
    }
  });

  it('metrics: group calls created, members per call, member outcomes, invitation-to-receipt times and invitees that never sent a receipt', async () => {
    const scrape = async (): Promise<Exposition> => parseExposition(await (await fetch(`${stack.servers[0]!.metricsUrl}/metrics`)).text());
    const value = (e: Exposition, name: string, labels: Record<string, string> = {}) =>
      e.samples.filter((x) => x.name === `calling_${name}` && Object.entries(labels).every(([k, v]) => x.labels[k] === v)).reduce((a, x) => a + x.value, 0);
    const before = await scrape();
    const [a] = user(url, 1);
    const [b] = user(url, 1);
    const [c] = user(url, 1);
    const [d] = user(url, 1);
    const call = await group(a!, [b!.userId, c!.userId, d!.userId]);
    expect((await b!.api.post(`/v1/calls/${call.callId}/ringing`, { operationId: uid('op'), via: 'fcm' })).status).toBe(200);
    expect((await answer(b!, call.callId)).status).toBe(200);
    expect((await end(c!, call.callId, 'localHangup')).status).toBe(200);
    expect((await a!.api.post(`/v1/calls/${call.callId}/end`, { operationId: uid('op'), reason: 'localHangup', forAll: true })).status).toBe(200);
    await relayDone(stack.redis, { prefix: 'cb', shards: 8 }, [call.callId]);
    const after = await scrape();
    const delta = (name: string, labels: Record<string, string> = {}) => value(after, name, labels) - value(before, name, labels);
    expect(delta('group_calls_created_total')).toBe(1);
    expect(delta('group_call_members_count')).toBe(1);
    expect(delta('group_call_members_sum')).toBe(3);
    expect([delta('group_call_member_outcomes_total', { outcome: 'joined' }), delta('group_call_member_outcomes_total', { outcome: 'declined' }), delta('group_call_member_outcomes_total', { outcome: 'missed' })]).toEqual([1, 1, 1]);
    expect(delta('invitation_receipt_seconds_count', { via: 'fcm' })).toBe(1);
    // c and d never sent a receipt.
    expect(delta('invitations_unacknowledged_total')).toBe(2);
  });

  it('ring-out: each member rings out at its own window (missed, told unanswered); with nobody joined the call ends unanswered', async () => {
    const [a1] = (await online(user(url, 1), url)) as OnlineDevice[];
    const [b1] = (await online(user(url, 1), url)) as OnlineDevice[];
    const [c1, c2] = (await online(user(url, 2), url)) as OnlineDevice[];
    try {
      const call = await group(a1!, [b1!.userId, c1!.userId], short.url);
      await waitUntil('rung out', async () => (await a1!.api.get(`/v1/calls/${call.callId}`)).json.state === 'ended', 5000);
      const snap = (await a1!.api.get(`/v1/calls/${call.callId}`)).json;
      expect(snap).toMatchObject({ state: 'ended', endReason: 'unanswered' });
      expect(snap.participants.map((p: any) => p.state)).toEqual(['left', 'missed', 'missed']);
      const got = await settleByBarrier(url, call.callId, [[a1!, 3], [b1!, 2], [c1!, 2], [c2!, 2]]);
      for (const i of [1, 2, 3]) expect(got[i]![1]).toMatchObject({ type: 'call.ended', reason: 'unanswered' });
      expect(got[0]!.at(-1)).toMatchObject({ type: 'call.ended', reason: 'unanswered', revision: snap.revision });

      // A call with a join goes on while a late member rings out at its own window.
      const live = await group(a1!, [b1!.userId], short.url);
      expect((await answer(b1!, live.callId)).status).toBe(200);
      const inv = await api(short.url, b1!.token).post(`/v1/calls/${live.callId}/invite`, { operationId: uid('op'), userIds: [c1!.userId] });
      expect(inv.status, inv.text).toBe(200);
      await waitUntil('c missed', async () => (await a1!.api.get(`/v1/calls/${live.callId}`)).json.participants[2].state === 'missed', 5000);
      expect((await a1!.api.get(`/v1/calls/${live.callId}`)).json.state).toBe('accepted');
    } finally {
      await Promise.all([a1, b1, c1, c2].map((d) => d!.ws.close()));
    }
  });
});
