import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStack, type Stack } from '../support/stack.js';
import { startJanus, type Janus } from '../support/janus.js';
import { janusRooms, joinRoom } from '../support/janusClient.js';
import { acceptedCall, end, expectJson, relayDone } from '../support/fixtures.js';
import { janusRoomId } from '../../src/media/janus.js';
import { placeRoom } from '../../src/media/placement.js';

/**
 * Several Janus instances (JANUS_URLS, docs/operations.md "SFU media"): each call's room lives on
 * the instance the rendezvous rule names, and only there, from accept to end; media-session
 * sends each device to that instance's client URL, where its credential opens the room.
 */

const janus: Janus[] = [];
let stack: Stack;
const ks = { prefix: 'cb', shards: 8 };

beforeAll(async () => {
  const a = await startJanus();
  // Both instances share the secrets, as a deployment's instances do.
  janus.push(a, await startJanus({ apiSecret: a.apiSecret, tokenSecret: a.tokenSecret, adminKey: a.adminKey }));
  stack = await startStack({
    MEDIA_MODE: 'sfu',
    JANUS_URLS: janus.map((j) => j.apiUrl).join(','),
    JANUS_CLIENT_URLS: janus.map((j) => j.wsUrl).join(','),
    JANUS_API_SECRET: a.apiSecret,
    JANUS_TOKEN_SECRET: a.tokenSecret,
    JANUS_ADMIN_KEY: a.adminKey,
  });
});

afterAll(async () => {
  await stack?.stop();
  await Promise.all(janus.map((j) => j.stop()));
});

const roomsOf = (j: Janus) => janusRooms(j.apiUrl, j.apiSecret, j.adminKey);

describe('rooms over two Janus instances', () => {
  it('each call’s room is on the instance the rule names, and only there, until the call ends', async () => {
    // Calls until both instances hold at least two (callIds are random UUIDs).
    const calls: Awaited<ReturnType<typeof acceptedCall>>[] = [];
    const homeOf = (callId: string) => placeRoom(callId, janus.map((j) => ({ url: j.apiUrl, j }))).j;
    while (janus.some((j) => calls.filter((c) => homeOf(c.callId) === j).length < 2)) calls.push(await acceptedCall(stack.url));
    await relayDone(stack.redis, ks, calls.map((c) => c.callId));
    for (const { callId, caller } of calls) {
      const home = homeOf(callId);
      const away = janus.find((j) => j !== home)!;
      expect(await roomsOf(home)).toContain(janusRoomId(callId));
      expect(await roomsOf(away)).not.toContain(janusRoomId(callId));
      const res = await caller.api.post(`/v1/calls/${callId}/media-session`, {});
      expectJson(res, 200);
      expect(res.json.sfu.url).toBe(home.wsUrl);
      expect(await joinRoom(home.apiUrl, res.json.sfu.room, res.json.sfu.token)).toEqual({ joined: true });
      expect(await roomsOf(away)).not.toContain(janusRoomId(callId));
    }
    await Promise.all(calls.map((c) => end(c.caller, c.callId, 'localHangup')));
    await relayDone(stack.redis, ks, calls.map((c) => c.callId));
    const left = [...(await roomsOf(janus[0]!)), ...(await roomsOf(janus[1]!))];
    for (const { callId } of calls) expect(left).not.toContain(janusRoomId(callId));
  });
});
