import { describe, expect, it } from 'vitest';
import { answer, device, end, sleep, uid, type Device } from '../support/fixtures.js';
import { createCall, waitUntil } from './helpers.js';
import { androidToken, isRegistered, registerAndroid, startPushStack, type PushStack } from './push-helpers.js';
import { createWebhookQueues } from '../../src/webhooks/queue.js';
import { tokenRemovedEvent, webhookBody, webhookId } from '../../src/webhooks/events.js';
import { tokenHash } from '../../src/push/registry.js';
import { forFile } from '../support/stack.js';
import { hmacMatches, newSecret, startWebhookReceiver, svixVerify, type ReceivedWebhook, type WebhookReceiver } from '../support/webhook-receiver.js';
import { keys } from '../../src/redis/keys.js';
import { newServerKey } from '../../src/auth/serverKeys.js';
import { api } from '../support/http.js';

/**
 * Webhooks (docs/webhooks.md) to real receivers that verify every request with svix's own
 * verifier: every event type with its fields, a rotating secret, retries on the schedule and
 * after retry-after, 410, and dead letters. (The worker killed mid-delivery: webhooks-crash.test.ts.)
 */

const SCHEDULE_MS = [300, 600, 1200];
const serverKey = newServerKey();
const secrets = { main: newSecret(), rotNew: newSecret(), rotOld: newSecret(), gone: newSecret(), dead: newSecret(), missed: newSecret() };
let ps: PushStack;
let url: string;
let main: WebhookReceiver;
let rotating: WebhookReceiver;
let gone: WebhookReceiver;
let dead: WebhookReceiver;
let missed: WebhookReceiver;

forFile(
  async () => {
    main = await startWebhookReceiver([secrets.main]);
    rotating = await startWebhookReceiver([secrets.rotOld, secrets.rotNew]);
    gone = await startWebhookReceiver([secrets.gone]);
    dead = await startWebhookReceiver([secrets.dead]);
    missed = await startWebhookReceiver([secrets.missed]);
    gone.answer = () => ({ status: 410 });
    dead.answer = () => ({ status: 500 });
    const endpoints = [
      { id: 'main', url: main.url, secret: secrets.main },
      { id: 'rotating', url: rotating.url, secret: [secrets.rotNew, secrets.rotOld], events: ['call.ended'] },
      { id: 'gone', url: gone.url, secret: secrets.gone, events: ['call.created'] },
      { id: 'dead', url: dead.url, secret: secrets.dead, events: ['call.created'] },
      { id: 'missed', url: missed.url, secret: secrets.missed, events: ['call.missed'] },
    ];
    const stack = await startPushStack({ WEBHOOKS: JSON.stringify(endpoints), WEBHOOK_RETRY_SCHEDULE: SCHEDULE_MS.map((ms) => `${ms}ms`).join(','), WEBHOOK_TIMEOUT_MS: '2000', SERVER_API_KEYS: serverKey.hash });
    return {
      stack,
      async stop() {
        await stack.stop();
        await Promise.all([main, rotating, gone, dead, missed].map((r) => r.close()));
      },
    };
  },
  (s) => {
    ps = s.stack;
    url = ps.url;
  },
);

const of = (r: WebhookReceiver, type: string, callId: string): ReceivedWebhook[] =>
  [...r.unique().values()].filter((w) => w.json?.type === type && w.json?.data?.callId === callId);

async function arrived(r: WebhookReceiver, type: string, callId: string): Promise<ReceivedWebhook> {
  await waitUntil(`${type} of ${callId}`, () => of(r, type, callId).length > 0, 8000);
  return of(r, type, callId)[0]!;
}

describe('events', () => {
  it('call.created, call.accepted and call.ended arrive signed, verified by svix and by a plain HMAC, with their documented fields', async () => {
    const caller = device(url);
    const callee = device(url);
    const { callId } = await createCall(caller, callee.userId, { video: true });
    expect((await answer(callee, callId)).status).toBe(200);
    const ended = await end(caller, callId, 'localHangup');

    const created = await arrived(main, 'call.created', callId);
    const accepted = await arrived(main, 'call.accepted', callId);
    const endedHook = await arrived(main, 'call.ended', callId);
    const e = ended.json;
    const parties = { callId, callerUserId: caller.userId, callerInstallationId: caller.installationId, calleeUserId: callee.userId, video: true };
    expect(created.json).toEqual({ type: 'call.created', timestamp: new Date(e.createdAtMs).toISOString(), data: { ...parties, createdAtMs: e.createdAtMs, expiresAtMs: e.expiresAtMs } });
    expect(accepted.json).toEqual({
      type: 'call.accepted',
      timestamp: new Date(e.acceptedAtMs).toISOString(),
      data: { ...parties, createdAtMs: e.createdAtMs, acceptedAtMs: e.acceptedAtMs, answeredByInstallationId: callee.installationId },
    });
    expect(endedHook.json).toEqual({
      type: 'call.ended',
      timestamp: new Date(e.endedAtMs).toISOString(),
      data: {
        ...parties,
        createdAtMs: e.createdAtMs,
        acceptedAtMs: e.acceptedAtMs,
        answeredByInstallationId: callee.installationId,
        endedAtMs: e.endedAtMs,
        endedBy: 'caller',
        endedByInstallationId: caller.installationId,
        reasons: { caller: 'localHangup', callee: 'remoteEnded' },
        ringingMs: e.acceptedAtMs - e.createdAtMs,
        talkMs: e.endedAtMs - e.acceptedAtMs,
        missed: false,
      },
    });
    for (const w of [created, accepted, endedHook]) {
      expect(w.id).toMatch(/^msg_[A-Za-z0-9_-]{27}$/);
      expect(Math.abs(Number(w.timestamp) * 1000 - w.atMs)).toBeLessThan(5000);
      expect(hmacMatches(secrets.main, w)).toBe(true);
      // A tampered body, or another secret, does not verify.
      expect(() => svixVerify(secrets.main, { ...w, body: w.body.replace('"video":true', '"video":false') })).toThrow();
      expect(hmacMatches(secrets.dead, w)).toBe(false);
    }
    // Three different events, three different webhook-ids.
    expect(new Set([created.id, accepted.id, endedHook.id]).size).toBe(3);
  });

  it('a missed call: call.ended says so, with the reason each side saw', async () => {
    const caller = device(url);
    const { callId } = await createCall(caller, uid('callee'));
    await end(caller, callId, 'localHangup');
    const w = await arrived(main, 'call.ended', callId);
    expect(w.json.data).toMatchObject({ endedBy: 'caller', reasons: { caller: 'localHangup', callee: 'callerCancelled' }, missed: true, acceptedAtMs: null, talkMs: 0 });
  });

  it('call.missed: one per invitee who missed the call (a cancel, its phone ringing out, a group call ended while it rang), none for a decline or an answer; only to an endpoint that names it', async () => {
    const caller = device(url, uid('caller'), uid('phone'), 'Carol');
    const ok = (res: { status: number; text: string }) => expect(res.status, res.text).toBe(200);
    // Cancelled by the caller.
    const cancelled = await createCall(caller, uid('callee'));
    ok(await end(caller, cancelled.callId, 'localHangup'));
    // The callee's phone rang out.
    const callee = device(url);
    const rangOut = await createCall(caller, callee.userId, { video: true });
    ok(await end(callee, rangOut.callId, 'unanswered'));
    // Declined, and answered then hung up: not missed.
    const decliner = device(url);
    const declined = await createCall(caller, decliner.userId);
    ok(await end(decliner, declined.callId, 'declined'));
    const answerer = device(url);
    const answered = await createCall(caller, answerer.userId);
    ok(await answer(answerer, answered.callId));
    ok(await end(answerer, answered.callId, 'localHangup'));
    // A group call: one joins, one declines, one still rings when the caller ends it for everyone.
    const [joins, declines, rings] = [device(url), device(url), device(url)];
    const group = await createCall(caller, '', { calleeUserId: undefined, calleeUserIds: [joins.userId, declines.userId, rings.userId], title: 'Standup' });
    ok(await answer(joins, group.callId));
    ok(await end(declines, group.callId, 'declined'));
    ok(await caller.api.post(`/v1/calls/${group.callId}/end`, { operationId: uid('op'), reason: 'localHangup', forAll: true }));
    // Do not disturb silenced one (a missed call: docs/call-policy.md), and blocked another (not missed).
    const [quiet, blocker] = [device(url), device(url)];
    ok(await quiet.api.put('/v1/call-policy', { doNotDisturb: { on: true } }));
    ok(await blocker.api.put('/v1/call-policy', { block: [caller.userId] }));
    const silenced = await createCall(caller, quiet.userId);
    const blocked = await createCall(caller, blocker.userId);
    ok(await end(caller, silenced.callId, 'localHangup'));
    ok(await end(caller, blocked.callId, 'localHangup'));

    const w = await arrived(missed, 'call.missed', cancelled.callId);
    expect(w.verifiedBy).toEqual([0]);
    expect(w.json.data).toEqual({ callId: cancelled.callId, callerUserId: caller.userId, callerDisplayName: 'Carol', callerHandle: `app:${caller.userId}`, userId: w.json.data.userId, video: false, invitedAtMs: cancelled.snapshot.createdAtMs, occurredAtMs: expect.any(Number) });
    expect((await arrived(missed, 'call.missed', rangOut.callId)).json.data).toMatchObject({ userId: callee.userId, video: true });
    expect((await arrived(missed, 'call.missed', group.callId)).json.data).toMatchObject({ userId: rings.userId, callerDisplayName: 'Standup' });
    // Each once; the others none (their call.ended reached the main endpoint first).
    expect((await arrived(missed, 'call.missed', silenced.callId)).json.data).toMatchObject({ userId: quiet.userId });
    for (const c of [declined, answered, group, blocked]) await arrived(main, 'call.ended', c.callId);
    await sleep(500);
    expect(of(missed, 'call.missed', group.callId)).toHaveLength(1);
    expect([...of(missed, 'call.missed', declined.callId), ...of(missed, 'call.missed', answered.callId), ...of(missed, 'call.missed', blocked.callId)]).toEqual([]);
    expect([...main.unique().values()].filter((x) => x.json?.type === 'call.missed')).toEqual([]);
    // The callee whose phone rang out has it as a missed call in its history too.
    expect((await callee.api.get('/v1/calls?missed=true')).json.calls.map((r: { callId: string }) => r.callId)).toContain(rangOut.callId);
  });

  it('an endpoint gets only the types it asked for; a rotating secret signs with both values, and either verifies', async () => {
    const caller = device(url);
    const { callId } = await createCall(caller, uid('callee'));
    await end(caller, callId, 'localHangup');
    const w = await arrived(rotating, 'call.ended', callId);
    expect(w.signature.split(' ')).toHaveLength(2);
    expect(w.verifiedBy).toEqual([0, 1]);
    expect(hmacMatches(secrets.rotOld, w) && hmacMatches(secrets.rotNew, w)).toBe(true);
    expect(of(rotating, 'call.created', callId)).toEqual([]);
    // The same event has another webhook-id at another endpoint.
    expect((await arrived(main, 'call.ended', callId)).id).not.toBe(w.id);
  });

  it('push.token_removed: the provider reported a token invalid', async () => {
    const calleeUserId = uid('callee');
    const phone = device(url, calleeUserId);
    const token = androidToken();
    await registerAndroid(phone, token);
    ps.fcm.setTokenState(token, 'unregistered');
    await createCall(device(url), calleeUserId);
    await waitUntil('push.token_removed', () => [...main.unique().values()].some((w) => w.json.type === 'push.token_removed' && w.json.data.userId === calleeUserId), 8000);
    const w = [...main.unique().values()].find((x) => x.json.type === 'push.token_removed' && x.json.data.userId === calleeUserId)!;
    expect(w.json.data).toEqual({
      userId: calleeUserId,
      installationId: phone.installationId,
      kind: 'androidPush',
      appId: expect.any(String),
      tokenSuffix: token.slice(-6),
      reason: expect.any(String),
      removedAtMs: expect.any(Number),
    });
    expect(w.body).not.toContain(token);
  });
});

describe('push.token_removed through a crash', () => {
  /**
   * The notice is queued before the removal (src/push/dispatcher.ts): a worker that died right
   * after queueing it left this job behind, with the registration still in place.
   */
  async function leftBehind(d: Device, token: string, notAfterMs: number): Promise<string> {
    // The test's own connection (a cluster's too): a queue's add needs no blocking command.
    const [queue] = createWebhookQueues(ps.stack.redis, { prefix: 'cb', shards: 8, partitions: 1 });
    const event = tokenRemovedEvent({ userId: d.userId, installationId: d.installationId, kind: 'androidPush', appId: 'x', token, reason: 'UNREGISTERED' }, Date.now());
    const id = webhookId('main', event);
    const tokenRemoval = { userId: d.userId, installationId: d.installationId, kind: 'androidPush' as const, tokenHash: tokenHash(token), notAfterMs };
    await queue!.add('deliver', { attempts: 0, deliveries: [{ endpointId: 'main', webhookId: id, type: 'push.token_removed', body: webhookBody(event), tokenRemoval }] });
    await queue!.close();
    return id;
  }

  it('a notice left behind makes the removal itself, then is delivered', async () => {
    const phone = device(url, uid('callee'));
    const token = androidToken();
    await registerAndroid(phone, token);
    const id = await leftBehind(phone, token, Date.now());
    await waitUntil('the notice', () => main.unique().has(id), 8000);
    expect(await isRegistered(ps.stack, phone, 'androidPush')).toBe(false);
  });

  it('one whose token was registered again after the report is dropped, and the registration stays', async () => {
    const phone = device(url, uid('callee'));
    const token = androidToken();
    const reportedAt = Date.now() - 1000;
    await registerAndroid(phone, token);
    const id = await leftBehind(phone, token, reportedAt);
    // The job ran: the main endpoint's only skipped delivery is this one.
    const skipped = async () => {
      const text = await (await fetch(`${ps.stack.servers[0]!.metricsUrl}/metrics`)).text();
      return Number(/calling_webhook_deliveries_total\{endpoint="main",outcome="skipped"\} (\d+)/.exec(text)?.[1] ?? 0);
    };
    await waitUntil('the notice dropped', async () => (await skipped()) === 1, 8000);
    expect(main.received.some((w) => w.id === id)).toBe(false);
    expect(await isRegistered(ps.stack, phone, 'androidPush')).toBe(true);
  });
});

describe('delivery', () => {
  it('a receiver that is down gets each event after it returns, on the retry schedule, with the same webhook-id', async () => {
    const callerDev: Device = device(url);
    const failing = new Set<string>();
    const before = main.answer;
    main.answer = (r) => (r.json.data?.callerUserId === callerDev.userId && (failing.add(r.id), main.received.filter((x) => x.id === r.id).length <= 2) ? { status: 503 } : { status: 204 });
    try {
      const { callId } = await createCall(callerDev, uid('callee'));
      await arrived(main, 'call.created', callId);
      await waitUntil('the third attempt', () => main.received.filter((x) => x.json?.data?.callId === callId && x.json.type === 'call.created').length >= 3, 8000);
      const attempts = main.received.filter((x) => x.json?.data?.callId === callId && x.json.type === 'call.created');
      expect(new Set(attempts.map((a) => a.id)).size).toBe(1);
      // 503, 503, then 204: the gaps follow the schedule (300 ms, then 600 ms).
      expect(attempts[1]!.atMs - attempts[0]!.atMs).toBeGreaterThanOrEqual(SCHEDULE_MS[0]! - 20);
      expect(attempts[2]!.atMs - attempts[1]!.atMs).toBeGreaterThanOrEqual(SCHEDULE_MS[1]! - 20);
      // Each attempt is signed anew, with its own time.
      for (const a of attempts) expect(Math.abs(Number(a.timestamp) * 1000 - a.atMs)).toBeLessThan(1500);
    } finally {
      main.answer = before;
    }
  });

  it("a receiver's retry-after is honoured when longer than the schedule's delay", async () => {
    const callerDev = device(url);
    let first = true;
    const before = main.answer;
    main.answer = (r) => {
      if (r.json.data?.callerUserId !== callerDev.userId || r.json.type !== 'call.created') return { status: 204 };
      if (!first) return { status: 204 };
      first = false;
      return { status: 429, headers: { 'retry-after': '2' } };
    };
    try {
      const { callId } = await createCall(callerDev, uid('callee'));
      await waitUntil('the second attempt', () => main.received.filter((x) => x.json?.data?.callId === callId && x.json.type === 'call.created').length >= 2, 8000);
      const attempts = main.received.filter((x) => x.json?.data?.callId === callId && x.json.type === 'call.created');
      expect(attempts[1]!.atMs - attempts[0]!.atMs).toBeGreaterThanOrEqual(1980);
    } finally {
      main.answer = before;
    }
  });

  it('410 Gone disables the endpoint: nothing more is sent to it, and it is logged and counted', async () => {
    // The first call.created of this file's first test met the 410.
    const caller = device(url);
    await waitUntil('the endpoint disabled', async () => (await ps.stack.redis.hexists(keys.webhookDisabled({ prefix: 'cb', shards: 8 }), 'gone')) === 1);
    const second = await createCall(caller, uid('callee'));
    await arrived(main, 'call.created', second.callId);
    const metrics = await (await fetch(`${ps.stack.servers[0]!.metricsUrl}/metrics`)).text();
    expect(metrics).toMatch(/calling_webhook_deliveries_total\{endpoint="gone",outcome="gone"\} [1-9]/);
    expect(metrics).toMatch(/calling_webhook_endpoints_disabled 1/);
    // The relay queued the event for every endpoint at once (the main endpoint got its copy);
    // the gone one was left out.
    await sleep(300);
    expect(gone.received.length).toBeGreaterThan(0);
    expect(gone.received.every((w) => w.json.type === 'call.created')).toBe(true);
    expect(gone.received.filter((w) => w.json?.data?.callId === second.callId)).toEqual([]);
    expect(ps.stack.servers[0]!.logs()).toContain('webhook endpoint answered 410 Gone');
  });

  it('a delivery that exhausts its schedule becomes a dead letter', async () => {
    const caller = device(url);
    const { callId } = await createCall(caller, uid('callee'));
    const ks = { prefix: 'cb', shards: 8 };
    await waitUntil('the dead letter', async () => {
      const all = await ps.stack.redis.hvals(keys.webhookDeadLetters(ks));
      return all.some((j) => JSON.parse(j).body.includes(callId));
    }, 10_000);
    const letter = (await ps.stack.redis.hvals(keys.webhookDeadLetters(ks))).map((j) => JSON.parse(j)).find((l) => l.body.includes(callId));
    expect(letter).toMatchObject({ endpointId: 'dead', type: 'call.created', attempts: SCHEDULE_MS.length + 1, lastStatus: 500 });
    expect(dead.received.filter((w) => w.id === letter.id)).toHaveLength(SCHEDULE_MS.length + 1);
  });

  it('the server API lists dead letters and replays one: the same webhook-id, once; and enables a disabled endpoint', async () => {
    const backend = api(url, serverKey.key);
    const caller = device(url);
    const { callId } = await createCall(caller, uid('callee'));
    let letter: any;
    await waitUntil('the dead letter listed', async () => {
      const page = await backend.get('/v1/server/webhooks/dead-letters?limit=200');
      expect(page.status, page.text).toBe(200);
      letter = page.json.deadLetters.find((l: any) => l.body.includes(callId));
      return letter !== undefined;
    }, 10_000);
    expect(letter).toMatchObject({ endpointId: 'dead', type: 'call.created', attempts: SCHEDULE_MS.length + 1, lastStatus: 500, lastError: null });

    dead.answer = () => ({ status: 204 });
    const replayed = await backend.post(`/v1/server/webhooks/dead-letters/${letter.id}/replay`);
    expect(replayed.status, replayed.text).toBe(202);
    await waitUntil('the replayed delivery', () => dead.received.filter((w) => w.id === letter.id).length === SCHEDULE_MS.length + 2);
    expect(dead.received.at(-1)!.body).toBe(letter.body);
    // Gone from the list; a second replay finds nothing.
    const after = await backend.get('/v1/server/webhooks/dead-letters?limit=200');
    expect(after.json.deadLetters.some((l: any) => l.id === letter.id)).toBe(false);
    expect((await backend.post(`/v1/server/webhooks/dead-letters/${letter.id}/replay`)).status).toBe(404);

    const endpoints = await backend.get('/v1/server/webhooks/endpoints');
    expect(endpoints.json.endpoints.find((e: any) => e.id === 'gone')).toMatchObject({ url: gone.url, events: ['call.created'], disabled: { status: 410 } });
    expect(endpoints.json.endpoints.find((e: any) => e.id === 'main').disabled).toBeNull();
    gone.answer = () => ({ status: 204 });
    expect((await backend.post('/v1/server/webhooks/endpoints/gone/enable')).json).toEqual({ id: 'gone', wasDisabled: true });
    // Every process reads the change within its cache's refresh (2 s).
    await sleep(2100);
    const next = await createCall(caller, uid('callee'));
    await arrived(gone, 'call.created', next.callId);
    expect((await backend.post('/v1/server/webhooks/endpoints/nope/enable')).status).toBe(404);
  });
});
