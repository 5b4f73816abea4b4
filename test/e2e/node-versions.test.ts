import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedis, type RedisServer } from '../support/redis-server.js';
import { startServer, type TestServer } from '../support/server.js';
import { nodeOnTrixie } from '../support/otherNode.js';
import { answer, device, end, uid } from '../support/fixtures.js';
import { closeAll, connect, type SignalingClient } from '../support/ws-client.js';
import { logRecords } from './push-helpers.js';

/**
 * Supported Node versions (docs/operations.md "Supported Node versions"): the server starts on Node 22 and 24
 * with the real uWebSockets.js binary (@btc-vision/uwebsockets.js, which needs glibc ≥ 2.38: here
 * a Debian trixie root's glibc 2.41, test/support/otherNode.ts) and completes a call over HTTP
 * and WebSocket. This process's own Node 20 on glibc 2.36 runs the other build (every other test).
 */

for (const major of [22, 24]) {
  describe(`Node ${major} on glibc 2.41`, () => {
    let redis: RedisServer;
    let server: TestServer;
    const sockets: SignalingClient[] = [];

    beforeAll(async () => {
      redis = await startRedis();
      server = await startServer({ REDIS_URL: redis.url }, { node: nodeOnTrixie(major) });
    }, 600_000);

    afterAll(async () => {
      await closeAll(sockets);
      await server?.stop();
      await redis?.stop();
    });

    it('loads the real uWebSockets.js binary, not a fallback', () => {
      const listening = logRecords(server.logs()).find((r) => r.msg === 'listening')!;
      expect(listening.node).toMatch(new RegExp(`^v${major}\\.`));
      expect(listening.uws).toBe('@btc-vision/uwebsockets.js@20.57.0');
    });

    it('completes a call: create, ring over signaling, answer, accepted, hang up, ended', async () => {
      const caller = device(server.url, uid('caller'), uid('caller-phone'), 'Caller');
      const callee = device(server.url);
      const [callerWs, calleeWs] = await Promise.all([connect(server.url, caller.token), connect(server.url, callee.token, { protocol: 'calling.v1.msgpack' })]);
      sockets.push(callerWs, calleeWs);
      const callId = randomUUID();
      const created = await caller.api.post('/v1/calls', { callId, calleeUserId: callee.userId, operationId: uid('op') });
      expect(created.status, created.text).toBe(201);
      const [invited] = await calleeWs.waitForEvents(1, 5000);
      expect(invited).toMatchObject({ type: 'call.invited', callId });
      expect((await answer(callee, callId)).status).toBe(200);
      const [accepted] = await callerWs.waitForEvents(1, 5000);
      expect(accepted).toMatchObject({ type: 'call.accepted', callId });
      const ended = await end(caller, callId, 'localHangup');
      expect(ended.status, ended.text).toBe(200);
      expect(ended.json.state).toBe('ended');
      const events = await calleeWs.waitForEvents(2, 5000);
      expect(events[1]).toMatchObject({ type: 'call.ended', callId, reason: 'remoteEnded' });
    });
  });
}
