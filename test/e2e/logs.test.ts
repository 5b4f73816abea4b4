import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStack, type Stack } from '../support/stack.js';
import { answer, device, end, uid } from '../support/fixtures.js';
import { closeAll, connect, type SignalingClient } from '../support/ws-client.js';
import { logRecords } from './push-helpers.js';
import { waitUntil } from './helpers.js';

/**
 * The server's log lines as an operator reads them (docs/operations.md "Observability"): level names, one
 * `info` line per call change with its parties and reason, `debug` lines for sockets with their
 * close codes, and never a token, a display name or a push token, at the most verbose level.
 */

let stack: Stack;
const sockets: SignalingClient[] = [];

beforeAll(async () => {
  stack = await startStack({ LOG_LEVEL: 'debug' });
});

afterAll(async () => {
  await closeAll(sockets);
  await stack?.stop();
});

describe('logs', () => {
  it('one info line per call change, debug lines per socket, level names, nothing secret', async () => {
    const callerName = `Secret Name ${randomUUID()}`;
    const caller = device(stack.url, uid('caller'), uid('caller-phone'), callerName);
    const callee = device(stack.url, uid('callee'), uid('callee-phone'));
    const pushToken = `fcm-${randomUUID()}`;
    const reg = await callee.api.put(`/v1/installations/${callee.installationId}/push-tokens/androidPush`, { token: pushToken, appId: 'com.example.calls' });
    expect(reg.status, reg.text).toBe(200);
    const calleeWs = await connect(stack.url, callee.token, { name: 'callee' });
    sockets.push(calleeWs);

    const callId = randomUUID();
    const created = await caller.api.post('/v1/calls', { callId, calleeUserId: callee.userId, operationId: uid('op') });
    expect(created.status, created.text).toBe(201);
    expect((await answer(callee, callId)).status).toBe(200);
    expect((await end(callee, callId, 'localHangup')).status).toBe(200);
    await calleeWs.waitForEvents(1, 5000);
    await calleeWs.close();

    const server = stack.servers[0]!;
    const changes = () => logRecords(server.logs()).filter((r) => r.msg === 'call change' && r.callId === callId);
    await waitUntil('three call change lines', () => changes().length === 3);
    expect(changes().map(({ level, change, state, revision, callerUserId, calleeUserId, reason, endedBy, answeredBy }) => ({
      level, change, state, revision, callerUserId, calleeUserId, reason, endedBy, answeredBy,
    }))).toEqual([
      { level: 'info', change: 'created', state: 'ringing', revision: 1, callerUserId: caller.userId, calleeUserId: callee.userId, reason: undefined, endedBy: undefined, answeredBy: undefined },
      { level: 'info', change: 'answered', state: 'accepted', revision: 2, callerUserId: caller.userId, calleeUserId: callee.userId, reason: undefined, endedBy: undefined, answeredBy: callee.installationId },
      { level: 'info', change: 'ended', state: 'ended', revision: 3, callerUserId: caller.userId, calleeUserId: callee.userId, reason: 'localHangup', endedBy: 'callee', answeredBy: undefined },
    ]);

    const socketLines = () => logRecords(server.logs()).filter((r) => r.installationId === callee.installationId && /^socket /.test(String(r.msg)));
    await waitUntil('socket open and close lines', () => socketLines().length === 2);
    expect(socketLines().map((r) => [r.level, r.msg, r.userId, r.code ?? r.encoding])).toEqual([
      ['debug', 'socket open', callee.userId, 'json'],
      ['debug', 'socket closed', callee.userId, 1000],
    ]);

    // Every line has a level name; none carries a JWT, the caller's display name or a push token.
    const all = logRecords(server.logs());
    expect(all.filter((r) => !['trace', 'debug', 'info', 'warn', 'error', 'fatal'].includes(r.level))).toEqual([]);
    const text = server.logs();
    for (const secret of [caller.token, callee.token, callerName, pushToken]) expect(text).not.toContain(secret);
  });
});
