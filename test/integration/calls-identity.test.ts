import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { stackForFile } from '../support/stack.js';
import { device, expectJson, getCall, uid } from '../support/fixtures.js';

/**
 * The caller's identity in the snapshot (docs/protocol.md "Call snapshot", "Limits"; docs/api.md "Caller identity and call back"): taken
 * from the session token only; displayName is the token's `name` cut at a UTF-8 character
 * boundary to at most 256 bytes; the handle is `<HANDLE_SCHEME>:<userId>` (default `app`);
 * expiresAtMs − createdAtMs is RING_TIMEOUT_MS (default 45000).
 */

let url: string;
stackForFile({ ROLES: 'api' }, (s) => (url = s.url));

async function callAs(name: string | undefined, userId = uid('user'), body: Record<string, unknown> = {}) {
  const caller = device(url, userId, uid('inst'), name);
  const callee = device(url);
  const res = await caller.api.post('/v1/calls', { callId: randomUUID(), calleeUserId: callee.userId, operationId: uid('op'), ...body });
  expectJson(res, 201);
  return { caller, callee, res };
}

const bytes = (s: string) => Buffer.byteLength(s, 'utf8');

describe('displayName from the token’s name claim, at most 256 UTF-8 bytes', () => {
  const cases: { label: string; name: string; expected: string }[] = [
    { label: 'ASCII name kept', name: 'Alice Example', expected: 'Alice Example' },
    { label: 'surrounding whitespace trimmed', name: '  Alice  ', expected: 'Alice' },
    { label: 'exactly 256 bytes ending in a 3-byte char kept whole', name: 'a' + '€'.repeat(85), expected: 'a' + '€'.repeat(85) },
    { label: '3-byte char straddling byte 256 dropped whole', name: 'ab' + '€'.repeat(85), expected: 'ab' + '€'.repeat(84) },
    { label: '4-byte char straddling byte 256 dropped whole', name: 'abc' + '😀'.repeat(64), expected: 'abc' + '😀'.repeat(63) },
    { label: '2-byte chars cut at exactly 256 bytes', name: 'é'.repeat(129), expected: 'é'.repeat(128) },
    { label: '2-byte char starting at byte 256 dropped', name: 'x'.repeat(255) + 'é', expected: 'x'.repeat(255) },
    { label: 'long ASCII cut to 256 bytes', name: 'n'.repeat(1000), expected: 'n'.repeat(256) },
  ];

  it.each(cases)('$label', async ({ name, expected }) => {
    const { callee, res } = await callAs(name);
    const displayName = res.json.caller.displayName as string;
    expect(displayName).toBe(expected);
    expect(bytes(displayName)).toBeLessThanOrEqual(256);
    expect(displayName).not.toContain('\uFFFD');
    // The callee reads the same name.
    expect((await getCall(callee, res.json.callId)).json.caller.displayName).toBe(expected);
  });

  it('without a name claim (or a blank one) the displayName is the userId', async () => {
    const userId = uid('user');
    expect((await callAs(undefined, userId)).res.json.caller.displayName).toBe(userId);
    const other = uid('user');
    expect((await callAs('   ', other)).res.json.caller.displayName).toBe(other);
  });
});

describe('handle and expiry', () => {
  it('handle is app:<userId> and expiresAtMs − createdAtMs equals RING_TIMEOUT_MS (45000)', async () => {
    const userId = uid('user');
    const { res } = await callAs('Bob', userId);
    expect(res.json.caller).toEqual({ userId, displayName: 'Bob', handle: `app:${userId}` });
    expect(res.json.expiresAtMs - res.json.createdAtMs).toBe(45_000);
    expect(Buffer.byteLength(res.json.caller.handle)).toBeLessThanOrEqual(256);
  });

  it('a userId with reserved characters is percent-encoded in the handle (a URI, reversible)', async () => {
    const userId = `carol smith+${randomUUID()}@example.com`;
    const { res } = await callAs('Carol', userId);
    expect(res.json.caller.userId).toBe(userId);
    expect(res.json.caller.handle).toBe(`app:${encodeURIComponent(userId)}`);
    expect(decodeURIComponent(res.json.caller.handle.slice('app:'.length))).toBe(userId);
  });

  it('identity fields in the JSON body are never trusted', async () => {
    const userId = uid('user');
    const { res } = await callAs('Real Name', userId, {
      callerUserId: 'mallory',
      caller: { userId: 'mallory', displayName: 'Evil', handle: 'app:mallory' },
      displayName: 'Evil',
      handle: 'tel:+15550100',
      createdAtMs: 1,
      expiresAtMs: 2,
      state: 'accepted',
    });
    expect(res.json.caller).toEqual({ userId, displayName: 'Real Name', handle: `app:${userId}` });
    expect(res.json.state).toBe('ringing');
    expect(res.json.expiresAtMs - res.json.createdAtMs).toBe(45_000);
  });

  it('video: true is stored and reported', async () => {
    const { callee, res } = await callAs('V', uid('user'), { video: true });
    expect(res.json.video).toBe(true);
    expect((await getCall(callee, res.json.callId)).json.video).toBe(true);
  });
});
