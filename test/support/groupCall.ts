import { randomUUID } from 'node:crypto';
import { expect } from 'vitest';
import { answer, device, uid, type Device } from './fixtures.js';

/** A group call (docs/group-calls.md) from a new caller to `n` new invitees, with every invitee joined when `joined`. */
export async function groupCall(url: string, n: number, opts: { joined?: number } = {}): Promise<{ callId: string; caller: Device; members: Device[] }> {
  const caller = device(url);
  const members = Array.from({ length: n }, () => device(url));
  const callId = randomUUID();
  const created = await caller.api.post('/v1/calls', { callId, calleeUserIds: members.map((m) => m.userId), operationId: uid('op') });
  expect(created.status, created.text).toBe(201);
  for (const m of members.slice(0, opts.joined ?? 0)) {
    const joined = await answer(m, callId);
    expect(joined.status, joined.text).toBe(200);
  }
  return { callId, caller, members };
}

/** Ends a group call for everyone, from the caller's installation in it. */
export function endForAll(caller: Device, callId: string) {
  return caller.api.post(`/v1/calls/${callId}/end`, { operationId: uid('op'), reason: 'localHangup', forAll: true });
}
