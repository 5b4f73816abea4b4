import { describe, expect, it } from 'vitest';
import {
  answerCallKeysArgs,
  createCallKeysArgs,
  createGroupCallKeysArgs,
  endCallKeysArgs,
  fingerprint,
  parseOutcome,
  readCallKeysArgs,
  readMessagesKeysArgs,
  renameCallKeysArgs,
  sendMessageKeysArgs,
  MESSAGES_KEPT_PER_CALL,
  MESSAGES_TTL_MS,
  MESSAGE_LIMIT_WINDOW_MS,
  type StoreSettings,
} from '../../src/calls/store.js';
import { CorruptRecordError } from '../../src/calls/model.js';
import { parseExpireDueReply } from '../../src/timers/ringSweep.js';
import type { Topology } from '../../src/redis/connection.js';
import { keys } from '../../src/redis/keys.js';
import { ringingCall } from '../support/callRecords.js';

/**
 * src/calls/store.ts: the pure halves of every script call, `*KeysArgs(input) → { keys, args }`
 * (the arguments by the names the lua/*.lua headers document), and `parseOutcome` for every script reply.
 */

const s: StoreSettings = { prefix: 'cb', shards: 8, ringTimeoutMs: 45_000, retentionMs: 86_400_000,
  callWaiting: false, maxRenamesPerCall: 10, operationTtlMs: 172_800_000 };
const tagOf = (key: string) => /\{[^}]*\}/.exec(key)?.[0];

function expectOneHashTag(keyList: string[]): void {
  const tags = new Set(keyList.map(tagOf));
  expect(tags.size).toBe(1);
  expect([...tags][0]).toMatch(/^\{c\d+\}$/);
}

describe('*KeysArgs', () => {
  it('sendMessageKeysArgs: KEYS call, op, outbox, ring index, message stream, seq counters, rate counter under one call tag (and the binding on a single Redis); arguments by name', () => {
    const c = sendMessageKeysArgs(s, {
      callId: 'call-1',
      userId: 'alice',
      installationId: 'alice-phone',
      eventId: 'ev-1',
      payloadJson: '{"kind":"offer"}',
      operationId: 'op-1',
      fingerprint: 'fp',
    }, 'single');
    expect(c.keys).toEqual([
      keys.call(s, 'call-1'),
      keys.operation(s, 'call-1', 'alice', 'op-1'),
      keys.outboxForCall(s, 'call-1'),
      keys.ringingForCall(s, 'call-1'),
      keys.callMessages(s, 'call-1'),
      keys.callMessageSeqs(s, 'call-1'),
      keys.callMessageLimit(s, 'call-1', 'alice'),
      // On a single Redis the script binds the operationId too: the one key outside the call's slot.
      keys.operationBinding(s, 'alice', 'op-1'),
    ]);
    expectOneHashTag(c.keys.slice(0, -1));
    expect(c.args).toEqual({
      userId: 'alice',
      installationId: 'alice-phone',
      eventId: 'ev-1',
      payloadJson: '{"kind":"offer"}',
      retention: '86400000',
      operationTtlMs: '172800000',
      fingerprint: 'fp',
      maxKept: String(MESSAGES_KEPT_PER_CALL),
      messagesTtlMs: String(MESSAGES_TTL_MS),
      liveChannel: keys.liveChannel(s, '\0'),
      limit: '0',
      windowMs: String(MESSAGE_LIMIT_WINDOW_MS),
    });
    // The script puts the recipient's userId where the NUL is.
    expect(c.args.liveChannel.replace('\0', 'bob')).toBe(keys.liveChannel(s, 'bob'));
    // On a cluster the relay publishes it, and every key is in the call's slot (the store binds first).
    const onCluster = sendMessageKeysArgs({ ...s, messagesPerWindow: 100 }, { callId: 'call-1', userId: 'alice', installationId: 'alice-phone', eventId: 'ev-1', payloadJson: '{}', operationId: 'op-1', fingerprint: 'fp' }, 'cluster');
    expect([onCluster.args.liveChannel, onCluster.args.limit, onCluster.args.windowMs]).toEqual(['', '100', String(MESSAGE_LIMIT_WINDOW_MS)]);
    expect(onCluster.keys).toHaveLength(7);
    expectOneHashTag(onCluster.keys);
  });

  it('readMessagesKeysArgs: KEYS call and message stream under one call tag', () => {
    const c = readMessagesKeysArgs(s, 'call-1', 'bob', 'bob-phone', 7);
    expect(c.keys).toEqual([keys.call(s, 'call-1'), keys.callMessages(s, 'call-1')]);
    expectOneHashTag(c.keys);
    expect(c.args).toEqual({ userId: 'bob', installationId: 'bob-phone', afterSeq: '7' });
    // The per-call-and-sender rate limit counter lives under the same tag (one slot per call).
    expect(tagOf(keys.callMessageLimit(s, 'call-1', 'bob'))).toBe(tagOf(c.keys[0]!));
  });

  it('createCallKeysArgs: KEYS callKey, opKey, outboxKey; arguments by name', () => {
    const c = createCallKeysArgs(s, {
      callId: 'call-1',
      callerUserId: 'alice',
      callerInstallationId: 'alice-phone',
      callerDisplayName: 'Alice',
      callerHandle: 'app:alice',
      calleeUserId: 'bob',
      video: true,
      operationId: 'op-1',
      fingerprint: 'fp',
    });
    expect(c.keys).toEqual([keys.call(s, 'call-1'), keys.operation(s, 'call-1', 'alice', 'op-1'), keys.outboxForCall(s, 'call-1'), keys.ringingForCall(s, 'call-1')]);
    expectOneHashTag(c.keys);
    expect(c.args).toEqual({
      callId: 'call-1',
      callerUserId: 'alice',
      callerInstallationId: 'alice-phone',
      callerDisplayName: 'Alice',
      callerHandle: 'app:alice',
      calleeUserId: 'bob',
      video: '1',
      ringTimeoutMs: '45000',
      retention: '86400000',
      operationTtlMs: '172800000',
      fingerprint: 'fp',
      busy: '0',
      firstUse: '0',
      earlyNotice: '',
      limits: '',
      recordFormat: '',
      policyAt: '',
      screened: '',
      screenedReply: 'unanswered',
    });
    // On a cluster the callee's verdict, read before the script, is an argument (docs/call-policy.md).
    const screened = createCallKeysArgs({ ...s, screenedReply: 'busy' }, { callId: 'c', callerUserId: 'a', callerInstallationId: 'i', callerDisplayName: 'A', callerHandle: 'app:a', calleeUserId: 'b', video: false, operationId: 'o', fingerprint: 'f' }, false, false, 'cluster', [], 'blocked');
    expect(screened.args).toMatchObject({ policyAt: '', screened: 'blocked', screenedReply: 'busy' });
    expectOneHashTag(screened.keys);
    // On a single Redis the script publishes the change's early notice (on its shard's early channel).
    // appendOutbox.lua names that channel after the outbox key (`outbox` → `early`).
    for (const shard of [0, 7]) expect(keys.outboxForShard(s, shard).replace(/outbox$/, 'early')).toBe(keys.earlyChannel(s, shard));
    expect(createCallKeysArgs(s, { callId: 'c', callerUserId: 'a', callerInstallationId: 'i', callerDisplayName: 'A', callerHandle: 'app:a', calleeUserId: 'b', video: false, operationId: 'o', fingerprint: 'f' }, false, false, 'single').args.earlyNotice).toBe('1');
    const busy = createCallKeysArgs(s, { callId: 'c', callerUserId: 'a', callerInstallationId: 'i', callerDisplayName: 'A', callerHandle: 'app:a', calleeUserId: 'b', video: false, operationId: 'o', fingerprint: 'f' }, true);
    expect(busy.args.busy).toBe('1');
    const firstUse = createCallKeysArgs(s, { callId: 'c', callerUserId: 'a', callerInstallationId: 'i', callerDisplayName: 'A', callerHandle: 'app:a', calleeUserId: 'b', video: false, operationId: 'o', fingerprint: 'f' }, false, true);
    expect(firstUse.args.firstUse).toBe('1');
    const noVideo = createCallKeysArgs(s, { callId: 'c', callerUserId: 'a', callerInstallationId: 'i', callerDisplayName: 'A', callerHandle: 'app:a', calleeUserId: 'b', video: false, operationId: 'o', fingerprint: 'f' });
    expect(noVideo.args.video).toBe('0');
    // CALL_RECORD_FORMAT=hash (lua/includes/callRecord.lua).
    expect(createCallKeysArgs({ ...s, callRecordFormat: 'hash' }, { callId: 'c', callerUserId: 'a', callerInstallationId: 'i', callerDisplayName: 'A', callerHandle: 'app:a', calleeUserId: 'b', video: false, operationId: 'o', fingerprint: 'f' }).args.recordFormat).toBe('hash');
  });

  it('create limits: on a single Redis their counters follow the binding and their rules are the `limits` argument (lua/includes/createLimits.lua); on a cluster the script gets neither', () => {
    const caller = { callId: 'call-1', callerUserId: 'alice', callerInstallationId: 'alice-phone', callerDisplayName: 'A', callerHandle: 'app:a', video: false, operationId: 'op-1', fingerprint: 'fp' };
    const limits = [
      { key: keys.callCreateLimit(s, 'alice'), rule: { limit: 60, windowMs: 60_000 } },
      { key: keys.inviteLimit(s, 'bob'), rule: { limit: 10, windowMs: 60_000 } },
    ];
    const single = createCallKeysArgs(s, { ...caller, calleeUserId: 'bob' }, false, false, 'single', limits);
    // Then the callee's policy keys, which the script reads itself (lua/includes/callPolicy.lua).
    expect(single.keys.slice(4)).toEqual([keys.operationBinding(s, 'alice', 'op-1'), keys.callCreateLimit(s, 'alice'), keys.inviteLimit(s, 'bob'), keys.callPolicy(s, 'bob'), keys.allowList(s, 'bob')]);
    expect(single.args).toMatchObject({ policyAt: '8', screened: '' });
    expect(JSON.parse(single.args.limits)).toEqual([[60, 60_000], [10, 60_000]]);
    const cluster = createCallKeysArgs(s, { ...caller, calleeUserId: 'bob' }, false, false, 'cluster', limits);
    expect(cluster.keys).toHaveLength(4);
    expectOneHashTag(cluster.keys);
    expect(cluster.args.limits).toBe('');
    // Limits off: none on a single Redis either.
    expect(createCallKeysArgs(s, { ...caller, calleeUserId: 'bob' }, false, false, 'single').keys).toHaveLength(7);
    expect(createCallKeysArgs(s, { ...caller, calleeUserId: 'bob' }, false, false, 'single').args.limits).toBe('');
    // The group create: the same arguments, with its invitees, busy ones and title.
    const group = createGroupCallKeysArgs(s, { ...caller, inviteeUserIds: ['bob', 'carol'], title: 'T' }, [], false, 'single', [limits[0]!]);
    // Then each invitee's policy keys, two per invitee in their order (docs/call-policy.md "Group calls").
    expect(group.keys.slice(4)).toEqual([
      keys.operationBinding(s, 'alice', 'op-1'),
      keys.callCreateLimit(s, 'alice'),
      keys.callPolicy(s, 'bob'),
      keys.allowList(s, 'bob'),
      keys.callPolicy(s, 'carol'),
      keys.allowList(s, 'carol'),
    ]);
    expect(group.args).toMatchObject({ limits: JSON.stringify([[60, 60_000]]), recordFormat: '', invitees: '["bob","carol"]', busy: '[]', title: 'T', policyAt: '7', screened: '' });
    expect(createGroupCallKeysArgs({ ...s, callRecordFormat: 'hash' }, { ...caller, inviteeUserIds: ['bob'], title: 'T' }, ['bob'], false, 'cluster', [limits[0]!], { bob: 'blocked' }).args).toMatchObject({
      limits: '',
      recordFormat: 'hash',
      busy: '["bob"]',
      title: 'T',
      policyAt: '',
      screened: '{"bob":"blocked"}',
    });
  });

  it('answerCallKeysArgs: the operation key is the answering user’s; expectedRevision absent → empty string', () => {
    const base = { callId: 'call-1', userId: 'bob', installationId: 'bob-phone', operationId: 'op-2', fingerprint: 'fp2' };
    const c = answerCallKeysArgs(s, { ...base, expectedRevision: undefined });
    expect(c.keys).toEqual([keys.call(s, 'call-1'), keys.operation(s, 'call-1', 'bob', 'op-2'), keys.outboxForCall(s, 'call-1'), keys.ringingForCall(s, 'call-1')]);
    expectOneHashTag(c.keys);
    expect(c.args).toEqual({ userId: 'bob', installationId: 'bob-phone', expectedRevision: '', firstUse: '0', retention: '86400000', operationTtlMs: '172800000', fingerprint: 'fp2', earlyNotice: '' });
    expect(answerCallKeysArgs(s, { ...base, expectedRevision: undefined }, false, 'single').args.earlyNotice).toBe('1');
    expect(answerCallKeysArgs(s, { ...base, expectedRevision: '7' }).args.expectedRevision).toBe('7');
    expect(answerCallKeysArgs(s, { ...base, expectedRevision: undefined }, true).args.firstUse).toBe('1');
  });

  it('endCallKeysArgs: KEYS as answer; the reason and forAll by name', () => {
    const c = endCallKeysArgs(s, { callId: 'call-9', userId: 'alice', installationId: 'alice-phone', reason: 'localHangup', operationId: 'op-3', fingerprint: 'fp3' });
    expect(c.keys).toEqual([keys.call(s, 'call-9'), keys.operation(s, 'call-9', 'alice', 'op-3'), keys.outboxForCall(s, 'call-9'), keys.ringingForCall(s, 'call-9')]);
    expectOneHashTag(c.keys);
    expect(c.args).toEqual({ userId: 'alice', installationId: 'alice-phone', reason: 'localHangup', forAll: '0', firstUse: '0', retention: '86400000', operationTtlMs: '172800000', fingerprint: 'fp3', earlyNotice: '' });
    expect(endCallKeysArgs(s, { callId: 'call-9', userId: 'alice', installationId: 'alice-phone', reason: 'localHangup', operationId: 'op-3', fingerprint: 'fp3' }, true).args.firstUse).toBe('1');
    expect(endCallKeysArgs(s, { callId: 'call-9', userId: 'alice', installationId: 'alice-phone', reason: 'localHangup', forAll: true, operationId: 'op-3', fingerprint: 'fp3' }).args.forAll).toBe('1');
  });

  it('on a single Redis every request script gets the user’s operationId binding after the call’s keys (the script binds; a create’s callee policy keys follow it); on a cluster it does not', () => {
    const binding = keys.operationBinding(s, 'alice', 'op-1');
    const request = { callId: 'call-1', userId: 'alice', installationId: 'alice-phone', operationId: 'op-1', fingerprint: 'fp' };
    const builders = [
      (topology: Topology) => {
        const c = createCallKeysArgs(s, { callId: 'call-1', callerUserId: 'alice', callerInstallationId: 'alice-phone', callerDisplayName: 'A', callerHandle: 'app:a', calleeUserId: 'bob', video: false, operationId: 'op-1', fingerprint: 'fp' }, false, false, topology);
        if (topology === 'single') expect(c.keys.slice(5)).toEqual([keys.callPolicy(s, 'bob'), keys.allowList(s, 'bob')]);
        return { keys: topology === 'single' ? c.keys.slice(0, 5) : c.keys };
      },
      (topology: Topology) => answerCallKeysArgs(s, { ...request, expectedRevision: undefined }, false, topology),
      (topology: Topology) => endCallKeysArgs(s, { ...request, reason: 'localHangup' }, false, topology),
      (topology: Topology) => renameCallKeysArgs(s, { ...request, displayName: 'A' }, topology),
    ];
    for (const build of builders) {
      const single = build('single').keys;
      expect(single).toHaveLength(5);
      expect(single[4]).toBe(binding);
      expect(build('cluster').keys).toEqual(single.slice(0, 4));
      expectOneHashTag(build('cluster').keys);
    }
  });

  it('readCallKeysArgs: the call, its outbox and ring index', () => {
    const r = readCallKeysArgs(s, 'call-5', 'bob');
    expect(r).toEqual({ keys: [keys.call(s, 'call-5'), keys.outboxForCall(s, 'call-5'), keys.ringingForCall(s, 'call-5')], args: { userId: 'bob', retention: '86400000', earlyNotice: '' } });
    expect(readCallKeysArgs(s, 'call-5', 'bob', 'single').args.earlyNotice).toBe('1');
    expectOneHashTag(r.keys);
  });

  it('different calls on different shards never share a hash tag across their own keys', () => {
    for (let i = 0; i < 50; i++) {
      const callId = `call-${i}`;
      const c = endCallKeysArgs(s, { callId, userId: 'u', installationId: 'i', reason: 'failed', operationId: 'o', fingerprint: 'f' });
      expectOneHashTag(c.keys);
    }
  });
});

describe('fingerprint', () => {
  it('is a stable base64url SHA-256 of the action and its parts', () => {
    const fp = fingerprint('create', ['call-1', 'bob', false]);
    expect(fp).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(fingerprint('create', ['call-1', 'bob', false])).toBe(fp);
  });

  it('differs when the action or any part differs, without ambiguity between parts', () => {
    const fps = new Set([
      fingerprint('create', ['call-1', 'bob', false]),
      fingerprint('create', ['call-1', 'bob', true]),
      fingerprint('create', ['call-2', 'bob', false]),
      fingerprint('end', ['call-1', 'bob', false]),
      fingerprint('answer', ['call-1', 'i', null]),
      fingerprint('answer', ['call-1', 'i', '1']),
      fingerprint('answer', ['call-1', 'i', 'null']),
      fingerprint('a', ['b:c']),
      fingerprint('a', ['b', 'c']),
      fingerprint('a', ['1']),
      fingerprint('a', [1]),
    ]);
    expect(fps.size).toBe(11);
  });
});

const ringingFields = [
  'callId', 'call-1', 'state', 'ringing', 'revision', '1', 'callerUserId', 'alice', 'callerInstallationId', 'alice-phone',
  'callerDisplayName', 'Alice', 'callerHandle', 'app:alice', 'calleeUserId', 'bob', 'video', '0',
  'createdAtMs', '1700000000000', 'expiresAtMs', '1700000045000',
];
const ringingRecord = ringingCall();

describe('parseOutcome', () => {
  it('fresh outcome → its code, status and call; not replayed', () => {
    expect(parseOutcome(['fresh', 'ok', 201, ringingFields])).toEqual({ kind: 'outcome', code: 'ok', status: 201, call: ringingRecord, replayed: false });
  });

  it('replayed outcome (status may come back from cjson as a number) → replayed', () => {
    const ended = [...ringingFields, 'state', 'ended', 'endedAtMs', '1700000001000', 'endReason', 'localHangup', 'endedBy', 'caller', 'endedByInstallationId', 'alice-phone'];
    const out = parseOutcome(['replay', 'ok', 200, ended]);
    expect(out).toEqual({
      kind: 'outcome',
      code: 'ok',
      status: 200,
      replayed: true,
      call: { ...ringingRecord, state: 'ended', endedAtMs: 1_700_000_001_000, endReason: 'localHangup', endedBy: 'caller', endedByInstallationId: 'alice-phone' },
    });
  });

  it('answer_conflict and revision_conflict outcomes carry the call', () => {
    const accepted = [...ringingFields, 'state', 'accepted', 'revision', '2', 'answeredByInstallationId', 'bob-tablet', 'acceptedAtMs', '1700000002000', 'video', '1'];
    const out = parseOutcome(['fresh', 'answer_conflict', 409, accepted]);
    expect(out).toMatchObject({ kind: 'outcome', code: 'answer_conflict', status: 409, replayed: false });
    expect(out.kind === 'outcome' && out.call).toEqual({ ...ringingRecord, state: 'accepted', revision: '2', video: true, answeredByInstallationId: 'bob-tablet', acceptedAtMs: 1_700_000_002_000 });
    expect(parseOutcome(['replay', 'revision_conflict', '409', ringingFields])).toMatchObject({ code: 'revision_conflict', status: 409, replayed: true });
  });

  it('readCall’s { ok, fields } → a 200 ok outcome', () => {
    expect(parseOutcome(['ok', ringingFields])).toEqual({ kind: 'outcome', code: 'ok', status: 200, call: ringingRecord, replayed: false });
  });

  it.each(['not_found', 'forbidden', 'idempotency_conflict', 'call_exists'])('error %s → failure', (code) => {
    expect(parseOutcome(['error', code])).toEqual({ kind: 'failure', code });
  });

  it.each([
    ['not a list', 'ok'],
    ['unknown error code', ['error', 'boom']],
    ['unknown outcome code', ['fresh', 'maybe', 200, ringingFields]],
    ['unknown kind', ['weird', 'ok', 200, ringingFields]],
    ['fields that are not a flat list', ['fresh', 'ok', 200, ['state']]],
    ['a record without a state', ['fresh', 'ok', 200, ringingFields.slice(2)]],
    ['an unknown state', ['fresh', 'ok', 200, [...ringingFields, 'state', 'paused']]],
    ['an unknown end reason', ['fresh', 'ok', 200, [...ringingFields, 'endReason', 'gone']]],
    ['a non-integer timestamp', ['fresh', 'ok', 200, [...ringingFields, 'createdAtMs', 'soon']]],
  ])('rejects %s with CorruptRecordError', (_label, reply) => {
    expect(() => parseOutcome(reply)).toThrow(CorruptRecordError);
  });
});

describe('parseExpireDueReply', () => {
  it('maps expireDue.lua replies: the count, then each ended call\'s lateness', () => {
    expect(parseExpireDueReply([2, 15, 40])).toEqual([2, 15, 40]);
    expect(parseExpireDueReply([0])).toEqual([0]);
    expect(() => parseExpireDueReply([])).toThrow(CorruptRecordError);
    expect(() => parseExpireDueReply(['expired'])).toThrow(CorruptRecordError);
    expect(() => parseExpireDueReply('expired')).toThrow(CorruptRecordError);
  });
});
