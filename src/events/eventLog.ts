import type { Redis, Cluster } from 'ioredis';
import { keys, type KeySpace } from '../redis/keys.js';
import { runScript, type ScriptCall } from '../redis/scripts.js';
import { compareStreamIds, encodeCursor, newEpoch, type Cursor } from './cursor.js';
import { isForInstallation, type Delivery } from './delivery.js';
import type { EventPayload } from './payloads.js';
import type { EarlyEvents } from './earlyNotice.js';
import type { MarkerOp } from '../calls/activeCalls.js';
import type { IndexOps, UserIndexOps } from '../history/callHistory.js';
import { DEFAULT_HISTORY_RETENTION_MS } from '../calls/retention.js';

/**
 * The per-user event log: a Redis Stream per user with bounded retention (length and age) and an
 * epoch, read by cursor. Each entry holds the payload JSON (`p`) and optionally the one
 * installation it is for (`o`) or the one it is not for (`x`).
 */
export interface EventLogSettings extends KeySpace {
  maxLen: number;
  maxAgeMs: number;
  metaTtlMs: number;
}

/** A delivery as the relay appends it: with the outbox entry it comes from. */
export interface RelayedDelivery {
  entryId: string;
  delivery: Delivery;
}

/** One user's part of an appendEvents.lua call. */
export interface UserAppend {
  userId: string;
  /** The outbox shard all `deliveries` come from. */
  shard: number;
  deliveries: readonly RelayedDelivery[];
  /** The batch's (last) busy marker change for the user. */
  marker?: MarkerOp | undefined;
  /** Also return the user's push registrations. */
  withPush?: boolean;
  /** The batch's calls to file in the user's call index (docs/call-history.md). */
  index?: IndexOps;
}

/** How often appends renew age trimming and the log's expiry (lua/appendEvents.lua). */
export function ageCheckMs(maxAgeMs: number): number {
  return Math.max(1, Math.floor(maxAgeMs / 100));
}

export interface LoggedEvent {
  cursor: string;
  /** The payload exactly as stored (JSON text), ready to send. */
  json: string;
  /** The installation it was for ('' for all of the user's): the gateway's missed-call end (src/push/missedCallSeen.ts). */
  only: string;
}

export type ReadResult =
  | { kind: 'events'; events: LoggedEvent[]; nextCursor: string; head: string; more: boolean }
  | { kind: 'gap'; reason: 'trimmed' | 'reset'; nextCursor: string };

export class EventLogError extends Error {
  override name = 'EventLogError';
}

export class EventLog {
  constructor(
    private readonly redis: Redis | Cluster,
    readonly settings: EventLogSettings,
  ) {}

  /**
   * The appendEvents.lua call for one or more users (on a cluster their keys must share a hash
   * slot: one user per call), each with their deliveries from one outbox shard, in outbox order.
   * `historyRetentionMs`: how long the call index keeps history (docs/call-history.md);
   * `noticeChannel`: on a single Redis, where the new entries go out together as one log notice
   * (logNotice.ts) instead of one publication each on their users' channels.
   */
  appendUsersCall(users: readonly UserAppend[], historyRetentionMs = DEFAULT_HISTORY_RETENTION_MS, noticeChannel = ''): ScriptCall<'appendEvents'> {
    const s = this.settings;
    const keyList: string[] = [];
    // The users' blocks (lua/appendEvents.lua), one after the other.
    const args: string[] = [];
    for (const u of users) {
      keyList.push(
        keys.eventLog(s, u.userId),
        keys.eventLogMeta(s, u.userId),
        keys.pushRegistrations(s, u.userId),
        keys.userActiveCalls(s, u.userId),
        keys.userHistoryIndex(s, u.userId),
        keys.userMissedIndex(s, u.userId),
      );
      const ops = u.index ?? [];
      args.push(
        keys.liveChannel(s, u.userId),
        `s${u.shard}`,
        u.marker?.op ?? '',
        u.marker?.callId ?? '',
        u.withPush ? '1' : '',
        String(ops.length),
        String(u.deliveries.length),
      );
      // One push per item, not a spread: a batch's arguments may be many.
      for (const op of ops) for (const a of op) args.push(a);
      for (const { entryId, delivery: d } of u.deliveries) args.push(entryId, JSON.stringify(d.payload), d.only ?? '', d.except ?? '');
    }
    return {
      keys: keyList,
      args: {
        maxLen: String(s.maxLen),
        maxAgeMs: String(s.maxAgeMs),
        metaTtlMs: String(s.metaTtlMs),
        newEpoch: newEpoch(),
        ageCheckMs: String(ageCheckMs(s.maxAgeMs)),
        historyRetentionMs: String(historyRetentionMs),
        noticeChannel,
        blocks: args,
      },
    };
  }

  /**
   * The appendEvents.lua call for one user's deliveries from one outbox shard, in outbox order.
   * `withPush`: the script also returns the user's push registrations; `index`: the calls of the
   * batch it files in the user's call index (docs/call-history.md).
   */
  appendCall(
    userId: string,
    shard: number,
    deliveries: readonly RelayedDelivery[],
    marker?: MarkerOp,
    withPush = false,
    index: UserIndexOps = { ops: [], retentionMs: DEFAULT_HISTORY_RETENTION_MS },
  ): ScriptCall<'appendEvents'> {
    return this.appendUsersCall([{ userId, shard, deliveries, marker, withPush, index: index.ops }], index.retentionMs);
  }

  /**
   * Appends one user's deliveries from one outbox shard, and changes the user's busy marker in the
   * same script; deliveries of outbox entries already appended are skipped.
   * Returns the user's push registrations as stored (a flat field/value list) when `withPush`.
   */
  async append(userId: string, shard: number, deliveries: readonly RelayedDelivery[], marker?: MarkerOp, withPush = false): Promise<string[]> {
    const c = this.appendCall(userId, shard, deliveries, marker, withPush);
    return registrationsIn(userReplies(await runScript(this.redis, 'appendEvents', c.keys, c.args))[0]);
  }

  /**
   * Appends several users' deliveries in one script call (on a cluster, the users must share a
   * hash slot). Returns each user's push registrations, in order (empty unless `withPush`).
   */
  async appendUsers(users: readonly UserAppend[], historyRetentionMs?: number): Promise<string[][]> {
    const c = this.appendUsersCall(users, historyRetentionMs);
    return userReplies(await runScript(this.redis, 'appendEvents', c.keys, c.args)).map(registrationsIn);
  }

  /**
   * Reads after `cursor` (undefined: start at the head with no history), keeping only entries
   * for `installationId`. The next cursor passes entries meant for other installations too.
   */
  async read(userId: string, installationId: string, cursor: Cursor | undefined, limit: number): Promise<ReadResult> {
    const s = this.settings;
    const reply = (await runScript(
      this.redis,
      'readEvents',
      [keys.eventLog(s, userId), keys.eventLogMeta(s, userId)],
      { cursorEpoch: cursor?.epoch ?? '', cursorId: cursor?.id ?? '0-0', limit: String(limit), newEpoch: newEpoch(), metaTtlMs: String(s.metaTtlMs) },
    )) as unknown[];
    const kind = reply[0];
    if (kind === 'head') {
      const head = encodeCursor({ epoch: String(reply[1]), id: String(reply[2]) });
      return { kind: 'events', events: [], nextCursor: head, head, more: false };
    }
    if (kind === 'gap') {
      const reason = reply[1] === 'reset' ? 'reset' : 'trimmed';
      return { kind: 'gap', reason, nextCursor: encodeCursor({ epoch: String(reply[2]), id: String(reply[3]) }) };
    }
    if (kind !== 'events' || !cursor) throw new EventLogError(`unexpected readEvents reply ${String(kind)}`);
    const epoch = String(reply[1]);
    const headId = String(reply[2]);
    const head = encodeCursor({ epoch, id: headId });
    const entries = (reply[3] ?? []) as [string, string[]][];
    const events: LoggedEvent[] = [];
    let lastId = cursor.id;
    for (const [id, fields] of entries) {
      lastId = id;
      const entry = entryFields(fields);
      if (entry.p !== undefined && isForInstallation(entry.o, entry.x, installationId)) {
        events.push({ cursor: encodeCursor({ epoch, id }), json: entry.p, only: entry.o ?? '' });
      }
    }
    // More follows exactly when this page stopped before the log's newest entry (docs/protocol.md
    // "Catching up over HTTP"): a page can hold no event for this installation and still have more.
    return { kind: 'events', events, nextCursor: encodeCursor({ epoch, id: lastId }), head, more: compareStreamIds(lastId, headId) < 0 };
  }
}

/** An appendEvents.lua reply: one reply per user of the call, in order. */
export function userReplies(appendReply: unknown): unknown[] {
  return appendReply as unknown[];
}

/** The push registrations one user's appendEvents.lua reply carries (a flat field/value list; empty unless asked for). */
export function registrationsIn(appendReply: unknown): string[] {
  return ((appendReply as unknown[])[3] as string[] | undefined) ?? [];
}

function entryFields(fields: string[]): { p?: string; o?: string; x?: string } {
  const out: { p?: string; o?: string; x?: string } = {};
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const k = fields[i];
    if (k === 'p' || k === 'o' || k === 'x') out[k] = fields[i + 1]!;
  }
  return out;
}

/** A live message as appendEvents.lua publishes it. */
export interface LiveMessage {
  epoch: string;
  previousId: string;
  id: string;
  only: string;
  except: string;
  json: string;
  /** An early notice (epoch EARLY_EPOCH): the events of it for the user of the socket it is dispatched to. */
  early?: EarlyEvents;
  /**
   * A live signal from a notice (src/gateway/signalNotice.ts): its frame per encoding, encoded by
   * the first of its recipients here and sent as is to the others.
   */
  frames?: Partial<Record<'json' | 'msgpack', Uint8Array>>;
}

/**
 * A control message on a user's live channel, outside the log: its epoch names the control, and
 * `only` the installation it is for ('' = all of the user's). `signout`: close those sockets
 * (docs/server-api.md "Sign an installation out").
 */
export const SIGN_OUT_EPOCH = '!signout';

export function signOutMessage(installationId: string): string {
  return `${SIGN_OUT_EPOCH}\n\n\n${installationId}\n\n`;
}

export function parseLiveMessage(msg: string): LiveMessage | undefined {
  const parts: string[] = [];
  let start = 0;
  for (let i = 0; i < 5; i++) {
    const nl = msg.indexOf('\n', start);
    if (nl < 0) return undefined;
    parts.push(msg.slice(start, nl));
    start = nl + 1;
  }
  const [epoch, previousId, id, only, except] = parts as [string, string, string, string, string];
  return { epoch, previousId, id, only, except, json: msg.slice(start) };
}

export type { EventPayload };
