import { describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { stackForFile } from '../support/stack.js';
import { acceptedCall, answer, device, end, expectProblem, relayDone, ringingCall, type Device } from '../support/fixtures.js';
import { waitUntil, sleep } from '../support/wait.js';
import { keys } from '../../src/redis/keys.js';
import { storedCallFields } from '../support/callRecords.js';

/**
 * Call history (docs/call-history.md): the record every ended call leaves under its own hash tag,
 * each party's copy from its point of view, GET /v1/calls with its cursor and `missed` filter,
 * and retention.
 */

const ks = { prefix: 'cb', shards: 8 };
// 4 s of retention, so the last test can wait it out.
const RETENTION_DAYS = 4 / 86_400;
let url: string;
/** An api-only process on the same Redis whose calls ring for 1 s (the others ring the default 30 s, so a loaded machine's slow answer is not a ring-out). */
let shortUrl: string;
let redis: Redis;
stackForFile({ CALL_RECORD_RETENTION_DAYS: String(RETENTION_DAYS) }, async (s) => {
  url = s.url;
  redis = s.redis;
  shortUrl = (await s.addServer({ ROLES: 'api', RING_TIMEOUT_MS: '1000' })).url;
});

async function history(d: Device, query = ''): Promise<any> {
  const res = await d.api.get(`/v1/calls${query}`);
  expect(res.status, res.text).toBe(200);
  return res.json;
}

/** Waits until the relay filed `callIds`' ends (the device read then sees them). */
async function relayed(callIds: string[]): Promise<void> {
  await relayDone(redis, ks, callIds);
}

describe('every ended call leaves a record', () => {
  it('an answered call that the callee hangs up: both parties see it, each from their side, with ringing and talk time', async () => {
    const { callId, caller, callee } = await acceptedCall(url);
    await sleep(20);
    const ended = await end(callee, callId, 'localHangup');
    expect(ended.status).toBe(200);
    await relayed([callId]);

    const mine = (await history(callee)).calls;
    const theirs = (await history(caller)).calls;
    expect(mine).toHaveLength(1);
    expect(theirs).toHaveLength(1);
    const common = {
      callId,
      callerUserId: caller.userId,
      calleeUserId: callee.userId,
      video: false,
      createdAtMs: ended.json.createdAtMs,
      acceptedAtMs: ended.json.acceptedAtMs,
      answeredByInstallationId: callee.installationId,
      endedAtMs: ended.json.endedAtMs,
      endedBy: 'callee',
      missed: false,
      ringingMs: ended.json.acceptedAtMs - ended.json.createdAtMs,
      talkMs: ended.json.endedAtMs - ended.json.acceptedAtMs,
    };
    expect(mine[0]).toEqual({ ...common, direction: 'incoming', peerUserId: caller.userId, endReason: 'localHangup' });
    expect(theirs[0]).toEqual({ ...common, direction: 'outgoing', peerUserId: callee.userId, endReason: 'remoteEnded' });
    expect(common.talkMs).toBeGreaterThanOrEqual(20);
  });

  it('a call the caller cancels and one that rings out are missed for the callee; a decline and a busy call are not', async () => {
    const callee = device(url);
    const cancelled = await ringingCall(url, device(url), callee);
    await end(cancelled.caller, cancelled.callId, 'localHangup');
    const declined = await ringingCall(url, device(url), callee);
    await end(callee, declined.callId, 'declined');
    const rungOut = await ringingCall(shortUrl, device(shortUrl), callee);
    const ids = [cancelled.callId, declined.callId, rungOut.callId];
    await waitUntil('the unanswered call ended', async () => (await storedCallFields(redis, keys.call(ks, rungOut.callId))).state === 'ended');
    await relayed(ids);

    const all = (await history(callee)).calls;
    expect(all.map((c: any) => [c.callId, c.endReason, c.missed])).toEqual(
      expect.arrayContaining([
        [cancelled.callId, 'callerCancelled', true],
        [declined.callId, 'declined', false],
        [rungOut.callId, 'unanswered', true],
      ]),
    );
    expect(all).toHaveLength(3);
    // Newest first.
    expect(all.map((c: any) => c.endedAtMs)).toEqual([...all.map((c: any) => c.endedAtMs)].sort((a, b) => b - a));
    const missed = (await history(callee, '?missed=true')).calls;
    expect(missed.map((c: any) => c.callId).sort()).toEqual([cancelled.callId, rungOut.callId].sort());
    // The callers never missed anything.
    expect((await history(cancelled.caller)).calls[0]).toMatchObject({ direction: 'outgoing', missed: false, endReason: 'localHangup', acceptedAtMs: null });
    expect((await history(cancelled.caller, '?missed=true')).calls).toEqual([]);
  });

  it('pages newest first by cursor, none twice and none skipped, even within one millisecond', async () => {
    const caller = device(url);
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) {
      const { callId } = await ringingCall(url, caller, device(url));
      ids.push(callId);
    }
    // Ended together: several may share a millisecond.
    await Promise.all(ids.map((id) => end(caller, id, 'localHangup')));
    await relayed(ids);

    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page: any = await history(caller, `?limit=2${cursor ? `&cursor=${cursor}` : ''}`);
      expect(page.calls.length).toBeLessThanOrEqual(2);
      seen.push(...page.calls.map((c: any) => c.callId));
      cursor = page.nextCursor;
      pages++;
    } while (cursor);
    expect(pages).toBe(4);
    expect(seen.sort()).toEqual([...ids].sort());
    const whole = (await history(caller, '?limit=200')).calls.map((c: any) => c.callId);
    expect(whole).toHaveLength(7);
  });

  it('a user sees only their own history', async () => {
    const { callId, caller, callee } = await ringingCall(url);
    await answer(callee, callId);
    await end(caller, callId, 'localHangup');
    await relayed([callId]);
    const stranger = device(url);
    expect((await history(stranger)).calls).toEqual([]);
  });

  it('bad queries get a 400 problem', async () => {
    const d = device(url);
    expectProblem(await d.api.get('/v1/calls?limit=0'), 'invalid_request', /limit/);
    expectProblem(await d.api.get('/v1/calls?limit=201'), 'invalid_request', /limit/);
    expectProblem(await d.api.get('/v1/calls?cursor=nonsense'), 'invalid_request', /cursor/);
    expectProblem(await d.api.get('/v1/calls?missed=maybe'), 'invalid_request', /missed/);
    expect((await device(url).api.get('/v1/calls', { headers: { authorization: '' } })).status).toBe(401);
  });

  it('records and history leave after CALL_RECORD_RETENTION_DAYS', async () => {
    const { callId, caller, callee } = await ringingCall(url);
    await end(caller, callId, 'localHangup');
    await relayed([callId]);
    expect((await history(callee)).calls).toHaveLength(1);
    const userKeys = [keys.userHistoryIndex(ks, callee.userId), keys.userMissedIndex(ks, callee.userId)];
    for (const k of userKeys) expect(await redis.pttl(k)).toBeGreaterThan(0);
    await waitUntil('the history to pass its retention', async () => (await history(callee)).calls.length === 0, 8000);
    // One key per EXISTS: on a cluster they live in different slots.
    const left = async () => (await Promise.all(userKeys.map((k) => redis.exists(k)))).reduce((a, b) => a + b, 0);
    await waitUntil('the keys to expire', async () => (await left()) === 0, 8000);
  });
});
