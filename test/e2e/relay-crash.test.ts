import { keys } from '../../src/redis/keys.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStack, type Stack } from '../support/stack.js';
import type { TestServer } from '../support/server.js';
import { headCursor, shardBarriers } from '../support/fixtures.js';
import { connect } from '../support/ws-client.js';
import { Sockets, createCall, expectInvited, user, via, waitUntil } from './helpers.js';

/**
 * At-least-once relaying (docs/architecture.md "Relays"): a relay that read an outbox
 * entry and died before acknowledging it loses nothing. The dead relay is simulated by reading
 * the entry with XREADGROUP as consumer `dead` of group `relay` while only an `api` process runs;
 * then a `worker,gateway` process starts and must claim the entry once it is idle for
 * RELAY_CLAIM_IDLE_MS, deliver it, and acknowledge and delete it.
 */

const OUTBOX = keys.outboxForShard({ prefix: 'cb', shards: 1 }, 0);
const GROUP = 'relay';

let stack: Stack;
let api: TestServer;
let worker: TestServer | undefined;
const sockets = Sockets.closedAfterEachTest();

beforeAll(async () => {
  stack = await startStack({ ROLES: 'api', CALL_SHARDS: '1' });
  api = stack.servers[0]!;
});

afterAll(async () => {
  await stack?.stop();
});

describe('relay crash between read and acknowledge', () => {
  it('the entry a dead relay read is claimed after RELAY_CLAIM_IDLE_MS, delivered, acknowledged and deleted', async () => {
    const [caller] = user(api.url, 1);
    const [callee] = user(api.url, 1);
    const cursor = await headCursor(callee!);

    // The group exists as the relay creates it (from the start of the stream).
    await stack.redis.xgroup('CREATE', OUTBOX, GROUP, '0', 'MKSTREAM').catch((err: Error) => {
      if (!err.message.includes('BUSYGROUP')) throw err;
    });
    const call = await createCall(caller!, callee!.userId);

    // The "relay" that will die reads the entry and never acknowledges it.
    const read = (await stack.redis.xreadgroup('GROUP', GROUP, 'dead', 'COUNT', 10, 'STREAMS', OUTBOX, '>')) as [string, [string, string[]][]][] | null;
    expect(read).not.toBeNull();
    const entries = read![0]![1];
    expect(entries).toHaveLength(1);
    const [entryId, fields] = entries[0]!;
    expect(fields.slice(0, 2)).toEqual(['change', 'created']);
    expect(fields).toContain(call.callId);
    const pendingBefore = (await stack.redis.xpending(OUTBOX, GROUP)) as [number, string, string, [string, string][]];
    expect(pendingBefore[0]).toBe(1);
    expect(pendingBefore[3]).toEqual([['dead', '1']]);

    // A new worker + gateway process takes over.
    worker = await stack.addServer({ ROLES: 'worker,gateway', CALL_SHARDS: '1', RELAY_CLAIM_IDLE_MS: '500' });
    const ws = sockets.track(await connect(worker.url, callee!.token, { cursor, name: 'callee-on-worker', waitSynced: false }));

    // The invitation arrives although nobody but `dead` ever read the entry (claimed after idle).
    const [invited] = await ws.waitForEvents(1, 10_000);
    expectInvited(invited!, call);

    // …and the entry ends acknowledged and deleted.
    await waitUntil('the entry acknowledged and deleted', async () => {
      const pending = (await stack.redis.xpending(OUTBOX, GROUP)) as [number, ...unknown[]];
      const left = await stack.redis.xrange(OUTBOX, entryId, entryId);
      return pending[0] === 0 && left.length === 0;
    }, 10_000);
    expect(await stack.redis.xlen(OUTBOX)).toBe(0);
    expect(worker.logs()).toContain('relay took over unacknowledged outbox entries');

    // Exactly once on this socket (a claim must not double-deliver on top of a normal read), up to
    // a barrier call of the callee's on the (only) outbox shard.
    const barriers = await shardBarriers(api.url, callee!.userId, [call.callId], 1);
    await ws.until(() => barriers.every((id) => ws.events().some((e) => e.callId === id)), 10_000, 'the barrier call');
    expect(ws.events().filter((e) => !barriers.includes(e.callId))).toHaveLength(1);
  });

  it('with the roles split (api | worker,gateway), a request to the api process reaches a device on the other one within 2 s', async () => {
    worker ??= await stack.addServer({ ROLES: 'worker,gateway', CALL_SHARDS: '1', RELAY_CLAIM_IDLE_MS: '500' });
    const [caller] = user(api.url, 1);
    const [callee] = user(api.url, 1);
    const ws = sockets.track(await connect(worker!.url, callee!.token, { name: 'live-on-worker' }));
    // The api process has no gateway: no signaling there.
    await expect(connect(api.url, callee!.token, { timeoutMs: 2000 })).rejects.toThrow();

    const call = await createCall(caller!, callee!.userId);
    // Bounded: fails unless it arrives within 2 s.
    const [invited] = await ws.waitForEvents(1, 2000);
    expectInvited(invited!, call);
    // And the worker process has no API.
    const viaWorker = await via(caller!, worker!.url).api.post('/v1/calls', {});
    expect(viaWorker.status).toBe(404);
  });
});
