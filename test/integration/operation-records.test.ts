import { describe, expect, it } from 'vitest';
import { randomUUID } from 'node:crypto';
import { relayBed } from '../support/relayBed.js';
import { fingerprint, type EndInput, type RingingInput } from '../../src/calls/store.js';
import { keys } from '../../src/redis/keys.js';
import { aliceCallsBob } from '../support/fixtures.js';
import { sleep } from '../support/wait.js';
import { storedCallFields } from '../support/callRecords.js';

/**
 * Where a request's idempotency record lives on a single Redis (docs/api.md "Idempotency",
 * docs/keyspace.md): in the user's operationId binding, taken with the record by one SET … NX GET
 * at the end of the request's script, its writes held until then (lua/includes/operationRecord.lua).
 * A replay finds the record there and changes nothing, even where its own run would change the
 * call; bindings of earlier versions (the bare fingerprint, the record under the call's tag) still
 * answer their replays.
 */
// Long enough for the first receipt to land inside the ring window on a loaded machine.
const RING_MS = 1_500;
const settings = { prefix: 'cb', shards: 8 };
// A call store on a Redis of the file's own (the relay's test bed; no relay runs here).
const bed = relayBed(settings, { ringTimeoutMs: RING_MS, operationTtlMs: 86_400_000 });

const setCalls = async () => Number(/cmdstat_set:calls=(\d+)/.exec(await bed.redis.info('commandstats'))?.[1] ?? 0);
const binding = (userId: string, operationId: string) => keys.operationBinding(settings, userId, operationId);
const record = (callId: string, userId: string, operationId: string) => keys.operation(settings, callId, userId, operationId);
const outboxLength = (callId: string) => bed.redis.xlen(keys.outboxForCall(settings, callId));
const hangUp = (callId: string): EndInput => ({ callId, userId: 'alice', installationId: 'alice-phone', reason: 'localHangup', operationId: randomUUID(), fingerprint: fingerprint('end', [callId, 'localHangup']) });
const receipt = (callId: string): RingingInput => ({ callId, userId: 'bob', via: 'socket', operationId: randomUUID(), fingerprint: fingerprint('ringing', [callId, 'socket']) });

describe('operation records on a single Redis', () => {
  it('a request binds its operationId and stores its record with one SET, in the binding; its replay changes nothing', async () => {
    // A create's SETs: the call's (its key is one string) and the binding's, with the record.
    const callId = randomUUID();
    const create = aliceCallsBob(callId, randomUUID());
    const before = await setCalls();
    const created = await bed.calls.create(create);
    expect(created).toMatchObject({ kind: 'outcome', status: 201, replayed: false });
    expect(await setCalls()).toBe(before + 2);
    expect(JSON.parse((await bed.redis.get(binding('alice', create.operationId)))!)).toMatchObject({ fp: create.fingerprint, code: 'ok', status: 201 });
    expect(await bed.redis.exists(record(callId, 'alice', create.operationId))).toBe(0);

    const end = hangUp(callId);
    const ended = await bed.calls.end(end);
    expect(ended).toMatchObject({ kind: 'outcome', code: 'ok', call: { state: 'ended' } });
    const outbox = await outboxLength(callId);
    expect(await bed.calls.create(create)).toEqual({ ...created, replayed: true });
    expect(await bed.calls.end(end)).toEqual({ ...ended, replayed: true });
    expect(await outboxLength(callId)).toBe(outbox);
    // The same operationId with another request.
    expect(await bed.calls.end({ ...end, reason: 'declined', fingerprint: fingerprint('end', [callId, 'declined']) })).toEqual({ kind: 'failure', code: 'idempotency_conflict' });
  });

  it('a replay whose own run would change the call (a lazy expiry) writes nothing: the call rings on until its sweep', async () => {
    const callId = randomUUID();
    await bed.calls.create(aliceCallsBob(callId, randomUUID()));
    const rang = receipt(callId);
    const first = await bed.calls.ringing(rang);
    expect(first).toMatchObject({ kind: 'outcome', code: 'ringing', replayed: false });
    await sleep(RING_MS + 50);
    const outbox = await outboxLength(callId);
    expect(await bed.calls.ringing(rang)).toEqual({ ...first, replayed: true });
    expect((await storedCallFields(bed.redis, keys.call(settings, callId))).state).toBe('ringing');
    expect(await outboxLength(callId)).toBe(outbox);
    // A new request ends it lazily, as due.
    expect(await bed.calls.ringing(receipt(callId))).toMatchObject({ kind: 'outcome', call: { state: 'ended', endReason: 'unanswered' } });
    expect(await outboxLength(callId)).toBe(outbox + 1);
  });

  it('a refused request writes nothing, and a replay of a request whose call is gone still gets its record', async () => {
    const callId = randomUUID();
    const end = hangUp(callId);
    expect(await bed.calls.end(end)).toEqual({ kind: 'failure', code: 'not_found' });
    expect(await bed.redis.exists(binding('alice', end.operationId))).toBe(0);

    await bed.calls.create(aliceCallsBob(callId, randomUUID()));
    const ended = await bed.calls.end(end);
    expect(ended).toMatchObject({ kind: 'outcome', code: 'ok' });
    await bed.redis.del(keys.call(settings, callId));
    expect(await bed.calls.end(end)).toEqual({ ...ended, replayed: true });
  });

  it('bindings of earlier versions: the bare fingerprint with the record under the call tag replays it; one without a record lets its request go on', async () => {
    // What an earlier version left: the binding holds the fingerprint, the record is apart.
    const callId = randomUUID();
    const create = aliceCallsBob(callId, randomUUID());
    const created = await bed.calls.create(create);
    const stored = (await bed.redis.get(binding('alice', create.operationId)))!;
    await bed.redis.set(binding('alice', create.operationId), create.fingerprint, 'PX', 60_000);
    await bed.redis.set(record(callId, 'alice', create.operationId), stored, 'PX', 60_000);
    expect(await bed.calls.create(create)).toEqual({ ...created, replayed: true });
    expect(await bed.calls.create({ ...create, fingerprint: fingerprint('create', [callId, 'carol', false]) })).toEqual({ kind: 'failure', code: 'idempotency_conflict' });

    // A binding an earlier version left without a record (its create found the callId taken).
    const end = hangUp(callId);
    await bed.redis.set(binding('alice', end.operationId), end.fingerprint, 'PX', 60_000);
    const ended = await bed.calls.end(end);
    expect(ended).toMatchObject({ kind: 'outcome', code: 'ok', replayed: false, call: { state: 'ended' } });
    expect(JSON.parse((await bed.redis.get(binding('alice', end.operationId)))!)).toMatchObject({ fp: end.fingerprint, code: 'ok' });
    expect(await bed.calls.end(end)).toEqual({ ...ended, replayed: true });
  });
});

/**
 * A call's key is one string (lua/includes/callRecord.lua, docs/keyspace.md "Per call"): each write
 * is one SET with the key's lifetime in it, and on a single Redis a create's SET … NX is also the
 * check that its callId is unused, guarding the request's other writes.
 */
describe('the call record', () => {
  const commands = async () => {
    const stats = await bed.redis.info('commandstats');
    return Object.fromEntries([...stats.matchAll(/cmdstat_(\w+):calls=(\d+)/g)].map((m) => [m[1]!, Number(m[2])]));
  };
  const callKey = (callId: string) => keys.call(settings, callId);
  const answerBy = (callId: string) => ({ callId, userId: 'bob', installationId: 'bob-phone', expectedRevision: undefined, operationId: randomUUID(), fingerprint: fingerprint('answer', [callId, 'bob-phone']) });

  it('is one string written with its lifetime: no EXISTS, PEXPIRE or HSET in a lifecycle', async () => {
    const callId = randomUUID();
    const before = await commands();
    await bed.calls.create(aliceCallsBob(callId, randomUUID()));
    expect(await bed.redis.type(callKey(callId))).toBe('string');
    const ringingTtl = await bed.redis.pttl(callKey(callId));
    expect(ringingTtl).toBeGreaterThan(RING_MS);
    expect(await bed.calls.answer(answerBy(callId))).toMatchObject({ kind: 'outcome', code: 'ok', call: { state: 'accepted' } });
    // The answer keeps the lifetime the create gave.
    expect(await bed.redis.pttl(callKey(callId))).toBeGreaterThan(ringingTtl - 5_000);
    expect(await bed.calls.end(hangUp(callId))).toMatchObject({ kind: 'outcome', call: { state: 'ended' } });
    const after = await commands();
    for (const name of ['exists', 'pexpire', 'hset', 'hgetall']) expect(after[name] ?? 0, name).toBe(before[name] ?? 0);
    expect(await storedCallFields(bed.redis, callKey(callId))).toMatchObject({ callId, state: 'ended', revision: '3', endReason: 'localHangup' });
    // The end gives it the retention from now (CALL_RETENTION_MS; the bed's default).
    expect(await bed.redis.pttl(callKey(callId))).toBeLessThanOrEqual(ringingTtl);
  });

  it('a create whose callId is in use is refused call_exists and writes nothing: no binding, no outbox entry, the call untouched', async () => {
    const callId = randomUUID();
    await bed.calls.create(aliceCallsBob(callId, randomUUID()));
    const stored = await bed.redis.get(callKey(callId));
    const outbox = await outboxLength(callId);
    const again = { ...aliceCallsBob(callId, randomUUID()), callerUserId: 'carol', callerInstallationId: 'carol-phone' };
    expect(await bed.calls.create(again)).toEqual({ kind: 'failure', code: 'call_exists' });
    expect(await bed.redis.exists(binding('carol', again.operationId))).toBe(0);
    expect(await bed.redis.get(callKey(callId))).toBe(stored);
    expect(await outboxLength(callId)).toBe(outbox);
    // The refusal is not recorded: once the callId is free, the same request creates the call.
    await bed.redis.del(callKey(callId));
    expect(await bed.calls.create(again)).toMatchObject({ kind: 'outcome', status: 201, replayed: false, call: { callerUserId: 'carol' } });
  });

  it('a create replayed after its call is gone gets its record and does not make the call again', async () => {
    const callId = randomUUID();
    const create = aliceCallsBob(callId, randomUUID());
    const created = await bed.calls.create(create);
    await bed.redis.del(callKey(callId));
    const outbox = await outboxLength(callId);
    expect(await bed.calls.create(create)).toEqual({ ...created, replayed: true });
    expect(await bed.redis.exists(callKey(callId))).toBe(0);
    expect(await outboxLength(callId)).toBe(outbox);
  });

  it('a call an earlier version stored as a hash is read, answered and ended, and stays a hash (an earlier process may still read it), its lifetime kept', async () => {
    const callId = randomUUID();
    await bed.calls.create(aliceCallsBob(callId, randomUUID()));
    // What an earlier version wrote: the same fields in a hash.
    const fields = await storedCallFields(bed.redis, callKey(callId));
    await bed.redis.del(callKey(callId));
    await bed.redis.hset(callKey(callId), fields);
    await bed.redis.pexpire(callKey(callId), 600_000);
    expect(await bed.calls.peek(callId)).toMatchObject({ callId, state: 'ringing', callerUserId: 'alice' });
    expect(await bed.calls.answer(answerBy(callId))).toMatchObject({ kind: 'outcome', code: 'ok', call: { state: 'accepted', revision: '2' } });
    expect(await bed.redis.type(callKey(callId))).toBe('hash');
    expect(await bed.redis.hgetall(callKey(callId))).toMatchObject({ state: 'accepted', revision: '2', answeredByInstallationId: 'bob-phone' });
    expect(await bed.redis.pttl(callKey(callId))).toBeGreaterThan(590_000);
    expect(await bed.calls.end(hangUp(callId))).toMatchObject({ kind: 'outcome', call: { state: 'ended', revision: '3' } });
    expect(await bed.redis.hgetall(callKey(callId))).toMatchObject({ state: 'ended', revision: '3', endReason: 'localHangup' });
    // The end gives it the retention from now, as a string's end does.
    expect(await bed.redis.pttl(callKey(callId))).toBeLessThanOrEqual(60_000);
  });
});
