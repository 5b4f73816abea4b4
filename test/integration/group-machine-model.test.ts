import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { CallStore, type StoreSettings } from '../../src/calls/store.js';
import { parseChange } from '../../src/calls/change.js';
import { createCall } from '../../src/commands/create.js';
import { CALL_COMMANDS } from '../../src/commands/callCommands.js';
import { callReply } from '../../src/commands/callReply.js';
import type { CommandDeps } from '../../src/commands/command.js';
import { createCallBody } from '../../src/commands/schemas.js';
import { commandReply } from '../../src/gateway/commandFrames.js';
import { deliveriesFor } from '../../src/events/audience.js';
import { isForInstallation } from '../../src/events/delivery.js';
import { keys } from '../../src/redis/keys.js';
import { sweepShards } from '../../src/timers/ringSweep.js';
import { createLogger } from '../../src/util/logger.js';
import { DEFAULT_CALL_SHARDS, fileRedis, uid } from '../support/fixtures.js';
import { runGroupModel, Tally, type Answer, type Driver, type NewRun } from '../support/groupModelRun.js';
import { waitUntil } from '../support/wait.js';

/**
 * The group call's rules against the pure model (test/support/groupModel.ts), at the level they
 * live: the command layer (src/commands/, as both transports run it: src/gateway/commandFrames.ts)
 * and the call scripts in this test's own process against a redis-server, with no server process.
 * Each installation's events are projected from the call's outbox by the audience rules
 * (src/events/audience.ts deliveriesFor, narrowed per installation as the gateway narrows them),
 * which is what the relay appends to each user's log. The same random steps
 * (test/support/groupModelRun.ts) run end to end, fewer times, in test/e2e/group-model.test.ts.
 *
 * Ring-outs: calls and invitations marked `short` are made through a store whose ring window is
 * SHORT_RING_MS; the ring-out step that must follow runs the ring sweep (src/timers/ringSweep.ts)
 * until those members are missed.
 */

const USERS = 5;
const INSTALLATIONS = 2;
const MAX_MEMBERS = 3;
const SHORT_RING_MS = 30;
const RUNS = Number(process.env.GROUP_MODEL_RUNS ?? 400);

const db = fileRedis();
const logger = createLogger('silent');

function deps(ringTimeoutMs: number): CommandDeps & { config: { HANDLE_SCHEME: string; GROUP_CALL_MAX_MEMBERS: number } } {
  const settings: StoreSettings = {
    prefix: 'cb',
    shards: DEFAULT_CALL_SHARDS,
    ringTimeoutMs,
    retentionMs: 60_000,
    operationTtlMs: 86_400_000,
    callWaiting: true,
    maxRenamesPerCall: 10,
    maxGroupInvitees: MAX_MEMBERS,
  };
  return { calls: new CallStore(db.redis, settings), limits: { callCreates: undefined, invitesPerCallee: undefined, pushTokenWrites: undefined, renames: undefined }, config: { HANDLE_SCHEME: 'app', GROUP_CALL_MAX_MEMBERS: MAX_MEMBERS } };
}

const parseReply = (r: { status: number; body?: string }): Answer => ({ status: r.status, body: r.body ? (JSON.parse(r.body) as Record<string, any>) : {} });

const newRun: NewRun = async (invitees, short) => {
  const long = deps(45_000);
  const brief = deps(SHORT_RING_MS);
  const userIds = Array.from({ length: USERS }, () => uid('user'));
  const installationId = (u: number, i: number) => `${userIds[u]}-inst${i + 1}`;
  const me = (u: number, i: number) => ({ userId: userIds[u]!, installationId: installationId(u, i), name: u === 0 ? 'Caller' : `Member ${u}` });
  const callId = randomUUID();
  const body = createCallBody.parse({ callId, calleeUserIds: invitees.map((u) => userIds[u]), operationId: uid('op') });
  const created = await createCall(short ? brief : long, me(0, 0), body);
  expect(created.status, created.body).toBe(201);

  const driver: Driver = {
    userIds,
    installationId,
    // Both transports run the command as a frame does; a short invitation goes through the short ring window's store.
    send: async (u, i, path, body, _transport, viaShort) => parseReply(await commandReply(viaShort ? brief : long, me(u, i), CALL_COMMANDS.get(path)!, { type: path, callId, ...body }, logger)),
    snapshot: async () => parseReply(callReply(await long.calls.read(callId, userIds[0]!), userIds[0]!)).body,
    async ringOut(doomed) {
      const shards = Array.from({ length: DEFAULT_CALL_SHARDS }, (_, s) => s);
      await waitUntil(
        'the ring sweep to ring the short window out',
        async () => {
          await sweepShards(db.redis, { prefix: 'cb', shards: DEFAULT_CALL_SHARDS, retentionMs: 60_000, pageSize: 100 }, shards, Date.now());
          const s = await driver.snapshot();
          return (s.participants as { userId: string; state: string }[]).every((p) => !doomed.includes(p.userId) || p.state === 'missed');
        },
        5_000,
        { intervalMs: 5 },
      );
    },
    async events() {
      // The call's changes in outbox order, each told as the relay tells it.
      const got = userIds.map(() => Array.from({ length: INSTALLATIONS }, (): Record<string, unknown>[] => []));
      const entries = await db.redis.xrange(keys.outboxForCall({ prefix: 'cb', shards: DEFAULT_CALL_SHARDS }, callId), '-', '+');
      for (const [entryId, flat] of entries) {
        if (flat[0] !== 'change') continue;
        const change = parseChange(entryId, 0, flat);
        if (change.call.callId !== callId) continue;
        for (const d of deliveriesFor(change)) {
          const u = userIds.indexOf(d.userId);
          for (let i = 0; i < INSTALLATIONS; i++) if (isForInstallation(d.only, d.except, installationId(u, i))) got[u]![i]!.push(d.payload as unknown as Record<string, unknown>);
        }
      }
      return got;
    },
  };
  return { driver, close: async () => {} };
};

describe('group calls against the model, in process', () => {
  it(`${RUNS} random interleavings through the command layer and the scripts: every answer, snapshot and installation's events as the model says`, async () => {
    const tally = new Tally();
    const started = Date.now();
    const steps = await runGroupModel({ users: USERS, installations: INSTALLATIONS, maxMembers: MAX_MEMBERS }, RUNS, tally, newRun);
    console.log(`group model in process: ${RUNS} runs, ${steps} steps in ${((Date.now() - started) / 1000).toFixed(1)} s; ${tally}`);
    tally.expectVariety();
  }, 120_000);
});
