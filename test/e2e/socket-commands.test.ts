import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStack, type Stack } from '../support/stack.js';
import { expectProblem, uid } from '../support/fixtures.js';
import type { ApiResponse } from '../support/http.js';
import { Sockets, createCall, online, user, waitUntil, type OnlineDevice } from './helpers.js';

/**
 * Commands over the signaling socket (docs/signaling.md "Commands"): `answer`, `end`, `rename`
 * and `message` frames run the HTTP routes' own handlers, so each scenario below runs once per
 * transport and must give the same outcomes: first answer wins, a 409 carries the winner's
 * snapshot, replays return the original outcome (also when the retry switches transport), the
 * same operationId with another payload conflicts, and the rate limits apply.
 */

let stack: Stack;
let url: string;
const sockets = Sockets.closedAfterEachTest();

beforeAll(async () => {
  // Low limits, so the rate-limit scenarios reach them within a test.
  stack = await startStack({ RATE_RENAMES_PER_MIN: '3', RATE_CALL_MESSAGES_PER_10S: '4' });
  url = stack.url;
});
afterAll(async () => {
  await stack?.stop();
});

type Transport = 'http' | 'socket';
/** A command's outcome as either transport gives it: the HTTP status and body, and retry-after. */
interface Outcome {
  status: number;
  body: any;
  retryAfterS?: number | undefined;
}

const PATHS: Record<string, string> = { answer: 'answer', end: 'end', rename: 'rename', message: 'messages' };

function fromHttp(res: ApiResponse): Outcome {
  const retry = res.headers.get('retry-after');
  return { status: res.status, body: res.json, retryAfterS: retry === null ? undefined : Number(retry) };
}

/** Runs one command over `transport` as device `d`. */
async function run(transport: Transport, d: OnlineDevice, command: string, callId: string, body: Record<string, unknown>): Promise<Outcome> {
  if (transport === 'http') return fromHttp(await d.api.post(`/v1/calls/${callId}/${PATHS[command]}`, body));
  const reply = await d.ws.command({ type: command, callId, ...body });
  expect(Object.keys(reply).filter((k) => !['type', 'operationId', 'status', 'body', 'retryAfterS'].includes(k))).toEqual([]);
  return { status: reply.status as number, body: reply.body, retryAfterS: reply.retryAfterS as number | undefined };
}

/** What must match across transports: status, error code, and the call's state as the reply shows it. */
function gist(o: Outcome): string {
  const snapshot = o.body?.snapshot ?? (o.body?.state ? o.body : undefined);
  return [o.status, o.body?.code ?? 'ok', snapshot ? `${snapshot.state}/${snapshot.endReason ?? '-'}` : '', o.retryAfterS === undefined ? '' : 'retry-after'].join(' ');
}

async function parties(): Promise<{ caller: OnlineDevice; callees: OnlineDevice[] }> {
  const [caller] = sockets.add(await online(user(url, 1, 'Alice'), url));
  const callees = sockets.add(await online(user(url, 3, 'Bob'), url));
  return { caller: caller!, callees };
}

/** Each scenario returns its outcomes' gists, compared across transports below. */
const scenarios: Record<string, (t: Transport) => Promise<string[]>> = {
  async 'first answer wins; the others get 409 with the winner’s snapshot'(t) {
    const { caller, callees } = await parties();
    const { callId } = await createCall(caller, callees[0]!.userId);
    const outcomes = await Promise.all(callees.map((d) => run(t, d, 'answer', callId, { operationId: uid('op'), installationId: d.installationId })));
    const won = outcomes.filter((o) => o.status === 200);
    expect(won).toHaveLength(1);
    const winner = won[0]!.body.answeredByInstallationId as string;
    expect(callees.map((d) => d.installationId)).toContain(winner);
    for (const lost of outcomes.filter((o) => o.status !== 200)) {
      expect(lost.status).toBe(409);
      expect(lost.body).toMatchObject({ code: 'answer_conflict', snapshot: { state: 'accepted', answeredByInstallationId: winner } });
    }
    // The caller's devices learn of it as for an answer over HTTP.
    await caller.ws.until(() => caller.ws.events().some((e) => e.type === 'call.accepted' && e.callId === callId), 5000, 'call.accepted');
    return outcomes.map(gist).sort();
  },

  async 'a replay returns the original outcome, also over the other transport'(t) {
    const { caller, callees } = await parties();
    const callee = callees[0]!;
    const { callId } = await createCall(caller, callee.userId);
    const other: Transport = t === 'http' ? 'socket' : 'http';
    const answerBody = { operationId: uid('op'), installationId: callee.installationId };
    const first = await run(t, callee, 'answer', callId, answerBody);
    expect(first.status).toBe(200);
    const endBody = { operationId: uid('op'), reason: 'localHangup' };
    const ended = await run(t, caller, 'end', callId, endBody);
    expect(ended.body).toMatchObject({ state: 'ended', endReason: 'localHangup' });
    // Retried after the call moved on: the original outcome, not the current state.
    for (const transport of [t, other]) {
      expect(await run(transport, callee, 'answer', callId, answerBody)).toEqual(first);
      expect(await run(transport, caller, 'end', callId, endBody)).toEqual(ended);
    }
    return [gist(first), gist(ended)];
  },

  async 'the same operationId with another payload conflicts'(t) {
    const { caller, callees } = await parties();
    const { callId } = await createCall(caller, callees[0]!.userId);
    const operationId = uid('op');
    const first = await run(t, caller, 'rename', callId, { operationId, displayName: 'Alice at work' });
    expect(first.status).toBe(200);
    const conflict = await run(t, caller, 'rename', callId, { operationId, displayName: 'Alice at home' });
    expect(conflict.status).toBe(409);
    expect(conflict.body).toMatchObject({ code: 'idempotency_conflict' });
    const endOp = uid('op');
    const ended = await run(t, caller, 'end', callId, { operationId: endOp, reason: 'localHangup' });
    const endConflict = await run(t, caller, 'end', callId, { operationId: endOp, reason: 'declined' });
    expect(endConflict.body).toMatchObject({ code: 'idempotency_conflict' });
    return [first, conflict, ended, endConflict].map(gist);
  },

  async 'the rate limits apply, with retry-after'(t) {
    const { caller, callees } = await parties();
    const callee = callees[0]!;
    const { callId } = await createCall(caller, callee.userId);
    expect((await run(t, callee, 'answer', callId, { operationId: uid('op'), installationId: callee.installationId })).status).toBe(200);
    const renames: Outcome[] = [];
    for (let i = 0; i < 4; i++) renames.push(await run(t, caller, 'rename', callId, { operationId: uid('op'), displayName: `Alice ${i}` }));
    expect(renames.map((o) => o.status)).toEqual([200, 200, 200, 429]);
    expect(renames[3]!.body).toMatchObject({ code: 'rate_limited' });
    expect(renames[3]!.retryAfterS).toBeGreaterThanOrEqual(1);
    const messages: Outcome[] = [];
    for (let i = 0; i < 5; i++) messages.push(await run(t, caller, 'message', callId, { operationId: uid('op'), payload: { n: i } }));
    expect(messages.map((o) => o.status)).toEqual([200, 200, 200, 200, 429]);
    return [...renames, ...messages].map(gist);
  },

  async 'bad input is refused with the same problem, and changes nothing'(t) {
    const { caller, callees } = await parties();
    const callee = callees[0]!;
    const { callId, snapshot } = await createCall(caller, callee.userId);
    const outcomes = [
      await run(t, callee, 'answer', callId, { operationId: uid('op') }),
      await run(t, callee, 'answer', callId, { operationId: uid('op'), installationId: 'someone-else' }),
      await run(t, caller, 'end', callId, { operationId: uid('op'), reason: 'hungUp' }),
      await run(t, caller, 'answer', callId, { operationId: uid('op'), installationId: caller.installationId }),
      await run(t, caller, 'message', callId, { operationId: uid('op'), payload: 'not an object' }),
      await run(t, callee, 'end', 'no-such-call', { operationId: uid('op'), reason: 'declined' }),
    ];
    expect(outcomes.map((o) => [o.status, o.body.code])).toEqual([
      [400, 'invalid_request'],
      [403, 'forbidden'],
      [400, 'invalid_request'],
      [403, 'forbidden'],
      [400, 'invalid_request'],
      [404, 'not_found'],
    ]);
    const now = await caller.api.get(`/v1/calls/${callId}`);
    expect(now.json).toMatchObject({ state: 'ringing', revision: snapshot.revision });
    return outcomes.map(gist);
  },
};

describe('commands over the socket and over HTTP', () => {
  for (const [name, scenario] of Object.entries(scenarios)) {
    it(name, async () => {
      const overHttp = await scenario('http');
      const overSocket = await scenario('socket');
      expect(overSocket).toEqual(overHttp);
    });
  }

  it('a reply to an invalid frame is the route’s problem, word for word; an unknown frame type gets an error frame', async () => {
    const { caller, callees } = await parties();
    const { callId } = await createCall(caller, callees[0]!.userId);
    const body = { operationId: uid('op'), reason: 'nope' };
    const http = await caller.api.post(`/v1/calls/${callId}/end`, body);
    expectProblem(http, 'invalid_request', /^reason: /);
    const reply = await caller.ws.command({ type: 'end', callId, ...body });
    expect(reply.body).toEqual(http.json);
    const badCallId = await caller.ws.command({ type: 'end', callId: 'a b', operationId: uid('op'), reason: 'localHangup' });
    expect(badCallId).toMatchObject({ status: 400, body: { code: 'invalid_request', detail: expect.stringMatching(/^callId: /) } });
    caller.ws.send({ type: 'create', calleeUserId: 'x' });
    expect(await caller.ws.next('error', 5000)).toMatchObject({ code: 'bad_message', detail: expect.stringMatching(/answer, end, move, rename, message/) });
  });

  it('answer and end as frames reach every device as they do over HTTP', async () => {
    const { caller, callees } = await parties();
    const [b1, b2] = callees;
    const { callId } = await createCall(caller, b1!.userId);
    const answered = await run('socket', b1!, 'answer', callId, { operationId: uid('op'), installationId: b1!.installationId });
    expect(answered.status).toBe(200);
    await waitUntil('answeredElsewhere at the sibling', () => b2!.ws.events().some((e) => e.type === 'call.ended' && e.callId === callId));
    expect(b2!.ws.events().find((e) => e.type === 'call.ended' && e.callId === callId)).toMatchObject({ reason: 'answeredElsewhere' });
    const ended = await run('socket', caller, 'end', callId, { operationId: uid('op'), reason: 'localHangup' });
    expect(ended.body).toMatchObject({ state: 'ended', endReason: 'localHangup' });
    await waitUntil('remoteEnded at the callee', () => b1!.ws.events().some((e) => e.type === 'call.ended' && e.callId === callId));
    expect(b1!.ws.events().find((e) => e.type === 'call.ended' && e.callId === callId)).toMatchObject({ reason: 'remoteEnded' });
  });
});
