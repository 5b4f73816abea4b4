import { sleep } from '../support/wait.js';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { crashAndRestartRedis, startRedis, type RedisServer } from '../support/redis-server.js';
import { startServer, type TestServer } from '../support/server.js';
import { api, type ApiResponse } from '../support/http.js';
import { device, headCursor, uid, type Device } from '../support/fixtures.js';
import { closeAll, connect, type EventPayload, type SignalingClient } from '../support/ws-client.js';
import { dedupe, expectRepeatsIdentical, readAllEvents, waitUntil } from './helpers.js';

/**
 * Faults under a steady load (docs/operations.md "Operations"): calls are created, answered and hung up
 * without pause by pairs of users against split processes (api+gateway, worker) on a Redis with
 * append-only persistence, while the worker, then the api+gateway process, then Redis itself are
 * killed with SIGKILL and restarted (Redis from its AOF, on the same port). Requests that fail
 * meanwhile are simply not acknowledged. Afterwards:
 *  - every acknowledged create, answer and end is in the call's state;
 *  - no call is left ringing (the ring sweeps end whatever was left unanswered);
 *  - each device's event log tells its side of every acknowledged change, each event once, and a
 *    socket that reconnects with the cursor it had before the load gets exactly that log.
 * Teams of four ring group calls through the same faults: every acknowledged group change reaches
 * each member's log it is for, once (groupGaps).
 */

const RING_TIMEOUT_MS = 3_000;
const PAIRS = 6;
/** Group call teams: a caller and three members each. */
const TEAMS = 2;

let redis: RedisServer;
let apiServer: TestServer;
let worker: TestServer;
let url: string;

const env = () => ({ REDIS_URL: redis.url, RING_TIMEOUT_MS: String(RING_TIMEOUT_MS), REDIS_COMMAND_TIMEOUT_MS: '1000', RELAY_CLAIM_IDLE_MS: '2000' });

beforeAll(async () => {
  redis = await startRedis({ appendOnly: true });
  [apiServer, worker] = await Promise.all([startServer({ ...env(), ROLES: 'api,gateway' }), startServer({ ...env(), ROLES: 'worker' })]);
  url = apiServer.url;
});

afterAll(async () => {
  await Promise.all([apiServer?.stop(), worker?.stop()]);
  await redis?.stop();
});

type Op = 'create' | 'answer' | 'end';
interface Acked {
  callId: string;
  op: Op;
}

describe('chaos', () => {
  it('kill -9 of the worker, the api/gateway and Redis (restarted from its AOF) under load: nothing acknowledged is lost, nothing rings forever, every log and resumed socket is complete', async () => {
    const pairs = Array.from({ length: PAIRS }, () => ({ caller: device(url, uid('caller'), uid('cphone'), 'Caller'), callee: device(url) }));
    const cursors = new Map<string, string>();
    for (const { caller, callee } of pairs) {
      cursors.set(caller.userId, await headCursor(caller));
      cursors.set(callee.userId, await headCursor(callee));
    }
    const teams = Array.from({ length: TEAMS }, () => Array.from({ length: 4 }, (_, k) => device(url, uid(k === 0 ? 'gcaller' : 'member'))) as Team);
    for (const d of teams.flat()) cursors.set(d.userId, await headCursor(d));
    const acked: Acked[] = [];
    let failures = 0;
    /** The device, pointed at whichever api process is up now. */
    const live = (d: Device): Device => ({ ...d, api: api(url, d.token) });
    /**
     * Sends one request as a client does while the backend has faults: the same request (same
     * operationId) again after a failure, until it is answered. Returns the final status.
     */
    const answerOf = async (d: Device, path: string, body: object): Promise<ApiResponse> => {
      for (let attempt = 0; ; attempt++) {
        try {
          const res = await live(d).api.post(path, body);
          if (res.status !== 503) return res;
        } catch {
          /* the process or Redis is down: retry */
        }
        failures++;
        if (attempt > 400) throw new Error(`${path} never answered`);
        await sleep(50);
      }
    };
    const send = async (d: Device, path: string, body: object): Promise<number> => (await answerOf(d, path, body)).status;

    const pairIndex = new Map<string, number>();
    let running = true;
    const load = pairs.map(async ({ caller, callee }, i) => {
      for (let n = 0; running; n++) {
        const callId = randomUUID();
        pairIndex.set(callId, i);
        const created = await send(caller, '/v1/calls', { callId, calleeUserId: callee.userId, operationId: uid('op') });
        expect(created, callId).toBe(201);
        acked.push({ callId, op: 'create' });
        // Every fourth call rings out: nobody answers or ends it; only the ring sweeps (or the
        // lazy expiry) can end it, whatever process died meanwhile.
        if (n % 4 === 3) continue;
        // The answer may lose to the ring timeout while a fault delays it (409 answer_conflict).
        const answered = await send(callee, `/v1/calls/${callId}/answer`, { operationId: uid('op'), installationId: callee.installationId });
        expect([200, 409], callId).toContain(answered);
        if (answered === 200) acked.push({ callId, op: 'answer' });
        const ender = (i + n) % 2 === 0 ? caller : callee;
        expect(await send(ender, `/v1/calls/${callId}/end`, { operationId: uid('op'), reason: 'localHangup' }), callId).toBe(200);
        acked.push({ callId, op: 'end' });
      }
    });

    // Group calls (docs/group-calls.md) under the same faults: each team's caller rings two
    // members, one sends a receipt and joins, the caller rings a third in late, the second
    // declines; then the joined member leaves (every other call) and the caller ends it for all.
    const groupAcked: GroupAcked[] = [];
    const groupLoad = teams.map(async (team, i) => {
      const [caller, m1, m2, m3] = team;
      for (let n = 0; running; n++) {
        const callId = randomUUID();
        const ack = async (who: Device, op: GroupOp, path: string, body: object, ok: number[]) => {
          const res = await answerOf(who, path, { operationId: uid('op'), ...body });
          expect(ok, `${op} ${callId}: ${res.text}`).toContain(res.status);
          if (res.status < 300) groupAcked.push({ callId, team: i, op, by: who.userId, snapshot: res.json as Record<string, any> });
        };
        await ack(caller, 'create', '/v1/calls', { callId, calleeUserIds: [m1.userId, m2.userId] }, [201]);
        await ack(m1, 'ringing', `/v1/calls/${callId}/ringing`, { via: 'fcm' }, [200]);
        // The join may lose to the ring timeout while a fault delays it (409 once the call ended).
        await ack(m1, 'join', `/v1/calls/${callId}/answer`, { installationId: m1.installationId }, [200, 409]);
        await ack(caller, 'invite', `/v1/calls/${callId}/invite`, { userIds: [m3.userId] }, [200, 409]);
        await ack(m2, 'decline', `/v1/calls/${callId}/end`, { reason: 'declined' }, [200]);
        if (n % 2 === 1) await ack(m1, 'leave', `/v1/calls/${callId}/end`, { reason: 'localHangup' }, [200]);
        await ack(caller, 'endForAll', `/v1/calls/${callId}/end`, { reason: 'localHangup', forAll: true }, [200]);
      }
    });

    const progress = async (what: string) => {
      const before = acked.length;
      await waitUntil(`load progressing ${what}`, () => acked.length >= before + 3 * PAIRS, 30_000);
    };
    await progress('before the faults');
    // 1. The worker dies: nothing relays or sweeps until its replacement takes the shards over.
    worker.child.kill('SIGKILL');
    await progress('without a worker');
    worker = await startServer({ ...env(), ROLES: 'worker' });
    await progress('after the worker restart');
    // 2. The api+gateway process dies mid-request; a new one comes up on another port.
    const failuresBefore = failures;
    // Until the new one is up, requests fail (connection refused) and are retried; they must not
    // go to the dead process's port, which another test's server may take meanwhile.
    url = 'http://127.0.0.1:1';
    apiServer.child.kill('SIGKILL');
    apiServer = await startServer({ ...env(), ROLES: 'api,gateway' });
    url = apiServer.url;
    await progress('after the api restart');
    // 3. Redis dies and comes back from its AOF on the same port; the processes reconnect.
    redis = await crashAndRestartRedis(redis, { appendOnly: true });
    await progress('after the Redis restart');
    running = false;
    await Promise.all([...load, ...groupLoad]);
    // The faults did bite: requests failed while a process or Redis was down.
    expect(failures).toBeGreaterThan(failuresBefore);

    const calls = new Map<string, Set<Op>>();
    for (const a of acked) calls.set(a.callId, new Set([...(calls.get(a.callId) ?? []), a.op]));
    const pairOf = (callId: string) => pairs[pairIndex.get(callId)!]!;

    // Every acknowledged operation is in the call's state; none is left ringing once its ring
    // timeout has passed (the calls that rang out were ended by the sweeps, as unanswered).
    const snapshots = new Map<string, Record<string, any>>();
    const read = async (callId: string) => {
      const res = await live(pairOf(callId).caller).api.get(`/v1/calls/${callId}`);
      expect(res.status, res.text).toBe(200);
      snapshots.set(callId, res.json as Record<string, any>);
    };
    await waitUntil(
      'no call ringing',
      async () => {
        for (const callId of calls.keys()) await read(callId);
        return [...snapshots.values()].every((snap) => snap.state !== 'ringing');
      },
      RING_TIMEOUT_MS + 15_000,
    ).catch(() => {});
    for (const [callId, ops] of calls) {
      const snap = snapshots.get(callId)!;
      expect(snap.state, callId).toBe('ended');
      if (ops.has('answer')) expect(snap.acceptedAtMs, `${callId}: its acknowledged answer`).toEqual(expect.any(Number));
      if (!ops.has('end')) expect(snap.endReason, `${callId}: rang out`).toBe('unanswered');
    }
    expect([...calls.values()].filter((ops) => !ops.has('end')).length).toBeGreaterThan(0);

    // Each device's log, read from its cursor of before the load, tells its side of every call
    // (the relay may still be catching up after the faults: wait for it, then assert).
    // (While the worker is down nothing relays: give the relay time to catch up before asserting.)
    const missing = async (): Promise<string[]> => {
      const out: string[] = [];
      for (const { caller, callee } of pairs) {
        const calleeEvents = (await readAllEvents(live(callee), cursors.get(callee.userId)!)).events;
        const callerEvents = (await readAllEvents(live(caller), cursors.get(caller.userId)!)).events;
        // Exactly once in each log, whatever the relay replayed (docs/architecture.md "Relays").
        for (const events of [calleeEvents, callerEvents]) {
          const repeated = events.length - dedupe(events).length;
          if (repeated > 0) out.push(`${repeated} repeated events in a log`);
        }
        for (const [callId, snap] of snapshots) {
          if (pairOf(callId).caller !== caller) continue;
          const toCallee = calleeEvents.filter((e) => e.callId === callId).map((e) => e.type);
          const toCaller = callerEvents.filter((e) => e.callId === callId).map((e) => e.type);
          // From the caller's side: localHangup = the caller ended it; remoteEnded / declined =
          // the callee did; unanswered = the ring timeout.
          const endedByCaller = snap.endReason === 'localHangup';
          const endedByCallee = snap.endReason === 'remoteEnded' || snap.endReason === 'declined';
          if (toCallee[0] !== 'call.invited') out.push(`${callId}: callee not invited (${toCallee.join(',')})`);
          if (snap.acceptedAtMs !== undefined && !toCaller.includes('call.accepted')) out.push(`${callId}: caller did not hear the answer`);
          if (!endedByCaller && !toCaller.includes('call.ended')) out.push(`${callId}: caller did not hear the end (${snap.endReason})`);
          if (!endedByCallee && !toCallee.includes('call.ended')) out.push(`${callId}: callee did not hear the end (${snap.endReason})`);
        }
        for (const events of [calleeEvents, callerEvents]) {
          const last = new Map<string, number>();
          for (const e of events) {
            if (Number(e.revision) <= (last.get(e.callId) ?? 0)) out.push(`${e.callId}: revision ${e.revision} after ${last.get(e.callId)}`);
            last.set(e.callId, Number(e.revision));
          }
        }
      }
      for (const team of teams) out.push(...(await groupGaps(team, groupAcked, (d) => readAllEvents(live(d), cursors.get(d.userId)!))));
      return out;
    };
    let gaps: string[] = [];
    await waitUntil(`every log complete; missing: ${JSON.stringify(gaps)}`, async () => (gaps = await missing()).length === 0, 20_000).catch(() => {});
    expect(gaps).toEqual([]);

    // A socket resuming from the cursor of before the load gets exactly the log, once each.
    const sockets: SignalingClient[] = [];
    try {
      for (const callee of [...pairs.map((p) => p.callee), ...teams.flat()]) {
        const ws = await connect(url, callee.token, { cursor: cursors.get(callee.userId)!, timeoutMs: 15_000 });
        sockets.push(ws);
        const fromLog = (await readAllEvents(live(callee), cursors.get(callee.userId)!)).events;
        const got: EventPayload[] = ws.events();
        expectRepeatsIdentical(got);
        expect(dedupe(got).map((e) => e.eventId)).toEqual(fromLog.map((e) => e.eventId));
      }
    } finally {
      await closeAll(sockets);
    }
    expect(calls.size).toBeGreaterThan(4 * PAIRS);
    console.log(`chaos: ${calls.size} one-to-one calls, ${new Set(groupAcked.map((a) => a.callId)).size} group calls (${groupAcked.length} acknowledged group requests), ${failures} failed attempts retried`);
    // Group calls went through the faults too, and were joined.
    expect(new Set(groupAcked.map((a) => a.callId)).size).toBeGreaterThan(2 * TEAMS);
    expect(groupAcked.filter((a) => a.op === 'join').length).toBeGreaterThan(TEAMS);
  }, 240_000);
});

type Team = [Device, Device, Device, Device];
type GroupOp = 'create' | 'ringing' | 'join' | 'invite' | 'decline' | 'leave' | 'endForAll';
/** An acknowledged group call request: its answer's snapshot says the revision it made and the states after it. */
interface GroupAcked {
  callId: string;
  team: number;
  op: GroupOp;
  by: string;
  snapshot: Record<string, any>;
}

const stateOf = (snapshot: Record<string, any>, userId: string): string | undefined =>
  (snapshot.participants as { userId: string; state: string }[]).find((p) => p.userId === userId)?.state;

/**
 * What a team's logs lack of its acknowledged group call changes (docs/group-calls.md "Who
 * receives what"), and any event a log holds twice. Each acknowledged change is found by the
 * revision its answer carries (a replayed request answers with the recorded snapshot):
 *  - the create: every invitee is invited (revision 1);
 *  - a join: the caller (in the call all along) is told, at the join's revision;
 *  - a late invite that rang the third member: it is invited, and the caller told;
 *  - a decline that found the member ringing: the caller is told (the revision before the
 *    end's when the decline ended the call);
 *  - the end: every member in the call then is told `remoteEnded` (the caller when the
 *    member's leave ended it), at the end's revision; after the caller's end for all, it is over.
 * Ring-outs a fault caused (the ring window is short) are told too, but nothing here expects them.
 */
async function groupGaps(team: Team, acked: readonly GroupAcked[], readLog: (d: Device) => Promise<{ events: EventPayload[] }>): Promise<string[]> {
  const out: string[] = [];
  const logs = new Map<string, EventPayload[]>();
  for (const d of team) {
    const events = (await readLog(d)).events;
    const repeated = events.length - dedupe(events).length;
    if (repeated > 0) out.push(`${repeated} repeated events in ${d.userId}'s log`);
    logs.set(d.userId, events);
  }
  const [caller] = team;
  const has = (userId: string, callId: string, revision: number, match: Record<string, unknown>, what: string) => {
    const found = logs.get(userId)!.some((e) => e.callId === callId && Number(e.revision) === revision && Object.entries(match).every(([k, v]) => e[k] === v));
    if (!found) out.push(`${callId}: ${userId} not told ${what} (revision ${revision})`);
  };
  const teamIds = new Set(team.map((d) => d.userId));
  for (const a of acked.filter((x) => teamIds.has(x.by))) {
    const s = a.snapshot;
    const revision = Number(s.revision);
    const ended = s.state === 'ended';
    switch (a.op) {
      case 'create':
        // (A member the relay still marks busy from the team's previous call is not rung.)
        for (const p of s.participants.slice(1).filter((p: { state: string }) => p.state === 'invited')) has(p.userId, a.callId, 1, { type: 'call.invited' }, 'the invitation');
        break;
      case 'join':
        has(caller.userId, a.callId, revision, { type: 'call.participant', userId: a.by, state: 'joined' }, 'the join');
        break;
      case 'invite':
        for (const p of s.participants.slice(3).filter((p: { state: string }) => p.state === 'invited')) {
          has(p.userId, a.callId, revision, { type: 'call.invited' }, 'the late invitation');
          has(caller.userId, a.callId, revision, { type: 'call.participant', userId: p.userId, state: 'invited' }, 'the late invite');
        }
        break;
      case 'decline':
        if (stateOf(s, a.by) === 'declined') has(caller.userId, a.callId, ended ? revision - 1 : revision, { type: 'call.participant', userId: a.by, state: 'declined' }, 'the decline');
        break;
      case 'leave':
      case 'endForAll': {
        if (!ended) {
          out.push(`${a.callId}: not ended by ${a.op}`);
          break;
        }
        const before = acked.filter((x) => x.callId === a.callId && x !== a).map((x) => Number(x.snapshot.revision));
        // Only the request that ended it (the later end for all of a call already over changes nothing).
        if (before.includes(revision)) break;
        if (a.op === 'leave') has(caller.userId, a.callId, revision, { type: 'call.ended', reason: 'remoteEnded' }, 'the end');
        else for (const p of s.participants.slice(1).filter((p: { state: string; installationId?: string }) => p.state === 'left' && p.installationId)) has(p.userId, a.callId, revision, { type: 'call.ended', reason: 'remoteEnded' }, 'the end for all');
        break;
      }
      case 'ringing':
        break;
    }
  }
  return out;
}
