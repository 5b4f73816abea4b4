import { randomUUID } from 'node:crypto';
import { afterEach, expect } from 'vitest';
import { device as makeDevice, shardBarriers, uid, type Device } from '../support/fixtures.js';
import { api, type ApiResponse } from '../support/http.js';
import { closeAll, connect, type ConnectOptions, type EventFrame, type EventPayload, type SignalingClient } from '../support/ws-client.js';
import { ON_CLUSTER } from '../support/stack.js';

/**
 * Helpers shared by the signaling end-to-end tests: users with several installations online,
 * exact payload checks (docs/protocol.md "Events"), and "exactly these events, and nothing more"
 * assertions proven with barriers, not quiet periods.
 */

/** An installation with its session and, once online, its signaling socket. */
export interface OnlineDevice extends Device {
  ws: SignalingClient;
}

/** A user with `n` installations (same userId, different `iid`), not yet connected. */
export function user(url: string, n: number, name?: string): Device[] {
  const userId = uid('user');
  return Array.from({ length: n }, (_, i) => makeDevice(url, userId, `${userId}-inst${i + 1}`, name));
}

/** The same installation talking to another server process. */
export function via(d: Device, url: string): Device {
  return { ...d, api: api(url, d.token) };
}

/** Connects every device to `wsUrl` (default: its own server) and waits for `synced`. */
export async function online(devices: Device[], wsUrl: string, opts: ConnectOptions = {}): Promise<OnlineDevice[]> {
  return Promise.all(
    devices.map(async (d) => ({ ...d, ws: await connect(wsUrl, d.token, { name: d.installationId, ...opts }) })),
  );
}

/** Keeps track of every socket a test opened, to close them all afterwards. */
export class Sockets {
  private readonly all = new Set<SignalingClient>();
  /** Sockets that are closed after each test of the file. */
  static closedAfterEachTest(): Sockets {
    const sockets = new Sockets();
    afterEach(() => sockets.closeAll());
    return sockets;
  }
  add<T extends { ws: SignalingClient }>(items: T[]): T[] {
    for (const i of items) this.all.add(i.ws);
    return items;
  }
  track(ws: SignalingClient): SignalingClient {
    this.all.add(ws);
    return ws;
  }
  async closeAll(): Promise<void> {
    await closeAll(this.all);
    this.all.clear();
  }
}

/** The barrier calls settleByBarrier made: markers of the tests, not part of what they check. */
const barrierCalls = new Set<string>();

/** The device's events, without those of barrier calls. */
export function callEvents(d: OnlineDevice): EventPayload[] {
  return d.ws.events().filter((e) => !barrierCalls.has(e.callId));
}

/**
 * Waits until each device has received its expected number of events in total (barrier calls
 * left out), then proves that nothing more came of the changes made so far to the calls `after`:
 * barrier calls for each user of `expected` (shardBarriers in test/support/fixtures.ts) reach
 * every one of their installations after anything those changes sent them, and once every device
 * has its barriers, nobody may have received more than expected. Returns each device's events
 * (barrier calls left out).
 */
export async function settleByBarrier(
  url: string,
  after: string | readonly string[],
  expected: [OnlineDevice, number][],
  timeoutMs = 5000,
): Promise<EventPayload[][]> {
  await Promise.all(expected.map(([d, n]) => d.ws.until(() => callEvents(d).length >= n, timeoutMs, `${n} events`)));
  const calls = typeof after === 'string' ? [after] : after;
  const users = [...new Set(expected.map(([d]) => d.userId))];
  const barriers = new Map(await Promise.all(users.map(async (u) => [u, await shardBarriers(url, u, calls)] as const)));
  for (const ids of barriers.values()) for (const id of ids) barrierCalls.add(id);
  await Promise.all(
    expected.map(([d]) => {
      const ids = barriers.get(d.userId)!;
      return d.ws.until(() => ids.every((id) => d.ws.events().some((e) => e.callId === id)), Math.max(timeoutMs, 5000), 'the barrier calls');
    }),
  );
  for (const [d, n] of expected) {
    expect(callEvents(d).length, `${d.installationId} received ${d.ws.describe()}`).toBe(n);
    expect(d.ws.undecodable()).toEqual([]);
    expect(d.ws.closeInfo, `${d.installationId} is still open`).toBeUndefined();
    earlyEvents(d);
  }
  return expected.map(([d]) => callEvents(d));
}

/**
 * The device's early events (docs/signaling.md "Early events"), barrier calls left out, after
 * checking that they are never extra: each is, byte for byte, an event the device also got from
 * the log, and it came before that copy. Only on a single Redis.
 */
export function earlyEvents(d: OnlineDevice): EventPayload[] {
  const events = d.ws.frames.filter((f) => f.type === 'event') as EventFrame[];
  const early = events.filter((f) => f.cursor === undefined);
  if (ON_CLUSTER) expect(early, `${d.installationId}: no early events on a cluster`).toEqual([]);
  for (const e of early) {
    const logged = events.filter((f) => f.cursor !== undefined && f.event.eventId === e.event.eventId);
    expect(logged.length, `${d.installationId}: the log's copy of early ${e.event.eventId}`).toBeGreaterThan(0);
    expect(logged[0]!.event).toEqual(e.event);
    expect(events.indexOf(e), `${d.installationId}: early ${e.event.eventId} before the log's copy`).toBeLessThan(events.indexOf(logged[0]!));
  }
  return early.map((f) => f.event).filter((e) => !barrierCalls.has(e.callId));
}

const REVISION = /^[1-9][0-9]*$/;

/** The common part of every event (docs/protocol.md "Events"). */
function expectCommon(e: EventPayload): void {
  expect(e.schemaVersion).toBe(1);
  expect(typeof e.eventId).toBe('string');
  expect(e.eventId.length).toBeGreaterThan(0);
  expect(e.revision).toMatch(REVISION);
}

/** A `call.invited` payload exactly as docs/protocol.md "Events": all its fields, nothing else. */
export function expectInvited(e: EventPayload, call: { snapshot: Record<string, any> }): void {
  const s = call.snapshot;
  expect(Object.keys(e).sort()).toEqual(
    ['callId', 'displayName', 'eventId', 'expiresAtMs', 'handle', 'issuedAtMs', 'revision', 'schemaVersion', 'type', 'video'].sort(),
  );
  expectCommon(e);
  expect(e).toMatchObject({
    type: 'call.invited',
    callId: s.callId,
    displayName: s.caller.displayName,
    handle: s.caller.handle,
    revision: s.revision,
    expiresAtMs: s.expiresAtMs,
    video: s.video,
  });
  expect(Number.isSafeInteger(e.issuedAtMs)).toBe(true);
  expect(e.issuedAtMs as number).toBeGreaterThanOrEqual(s.createdAtMs as number);
  expect(e.issuedAtMs as number).toBeLessThan(s.expiresAtMs as number);
}

/** A `call.accepted` payload exactly as docs/protocol.md "Events", matching the answer's snapshot. */
export function expectAccepted(e: EventPayload, answered: Record<string, any>): void {
  expect(Object.keys(e).sort()).toEqual(
    ['answeredByInstallationId', 'callId', 'eventId', 'occurredAtMs', 'revision', 'schemaVersion', 'type'].sort(),
  );
  expectCommon(e);
  expect(e).toMatchObject({
    type: 'call.accepted',
    callId: answered.callId,
    revision: answered.revision,
    occurredAtMs: answered.acceptedAtMs,
    answeredByInstallationId: answered.answeredByInstallationId,
  });
  expect(Number.isSafeInteger(e.occurredAtMs)).toBe(true);
}

/**
 * A `call.ended` payload exactly as docs/protocol.md "Events", with `reason`. `at` is the snapshot of the change
 * (its revision and time); for `answeredElsewhere` that is the answer's snapshot.
 */
export function expectEnded(e: EventPayload, reason: string, at: { callId: string; revision: string; atMs: number }): void {
  expect(Object.keys(e).sort()).toEqual(['callId', 'eventId', 'occurredAtMs', 'reason', 'revision', 'schemaVersion', 'type'].sort());
  expectCommon(e);
  expect(e).toMatchObject({ type: 'call.ended', callId: at.callId, reason, revision: at.revision, occurredAtMs: at.atMs });
  expect(Number.isSafeInteger(e.occurredAtMs)).toBe(true);
}

/** The change a terminal snapshot describes (for expectEnded). */
export function endedAt(snapshot: Record<string, any>): { callId: string; revision: string; atMs: number } {
  return { callId: snapshot.callId as string, revision: snapshot.revision as string, atMs: snapshot.endedAtMs as number };
}

export function acceptedAt(snapshot: Record<string, any>): { callId: string; revision: string; atMs: number } {
  return { callId: snapshot.callId as string, revision: snapshot.revision as string, atMs: snapshot.acceptedAtMs as number };
}

/** POST /v1/calls from `caller` to `calleeUserId`; asserts 201 and returns the snapshot. */
export async function createCall(caller: Device, calleeUserId: string, extra: Record<string, unknown> = {}): Promise<{ callId: string; snapshot: Record<string, any>; res: ApiResponse }> {
  const callId = randomUUID();
  const res = await caller.api.post('/v1/calls', { callId, calleeUserId, operationId: uid('op'), ...extra });
  expect(res.status, res.text).toBe(201);
  return { callId, snapshot: res.json as Record<string, any>, res };
}

/** Every event payload of a GET /v1/call-events walk from `cursor`, page by page. */
export async function readAllEvents(d: Device, cursor: string, limit?: number): Promise<{ events: EventPayload[]; pages: ApiResponse[]; cursor: string }> {
  const events: EventPayload[] = [];
  const pages: ApiResponse[] = [];
  let c = cursor;
  for (let i = 0; i < 10_000; i++) {
    const q = `cursor=${encodeURIComponent(c)}${limit ? `&limit=${limit}` : ''}`;
    const res = await d.api.get(`/v1/call-events?${q}`);
    expect(res.status, res.text).toBe(200);
    expect(res.json.gap, res.text).toBeUndefined();
    pages.push(res);
    events.push(...(res.json.events as EventPayload[]));
    const next = res.json.nextCursor as string;
    // Read to the end when the server says no more follows (a page may be empty while the
    // entries it passed were for other installations, and still have more after it).
    expect(typeof res.json.hasMore, res.text).toBe('boolean');
    if (res.json.hasMore === false) return { events, pages, cursor: next };
    c = next;
  }
  throw new Error('call-events paging did not end');
}

/** Re-exported: the one polling wait lives in test/support/wait.ts. */
export { waitUntil } from '../support/wait.js';

/** Every repeated eventId carries exactly the same event (a redelivery, not a different event). */
export function expectRepeatsIdentical(events: EventPayload[]): void {
  const first = new Map<string, EventPayload>();
  for (const e of events) {
    const seen = first.get(e.eventId);
    if (seen) expect(e, `event ${e.eventId} delivered again`).toEqual(seen);
    else first.set(e.eventId, e);
  }
}

/** Removes repeated eventIds (delivery is at least once), keeping the first occurrence. */
export function dedupe(events: EventPayload[]): EventPayload[] {
  const seen = new Set<string>();
  return events.filter((e) => (seen.has(e.eventId) ? false : (seen.add(e.eventId), true)));
}

/** A compact description of events for order comparisons: `type/callId/reason`. */
export function shape(events: EventPayload[]): string[] {
  return events.map((e) => `${e.type}/${e.callId}${e.reason ? `/${String(e.reason)}` : ''}`);
}
