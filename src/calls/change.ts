import { parseCallFields, CorruptRecordError, type CallRecord } from './model.js';

/**
 * One change of a call as the call scripts wrote it to the outbox (lua/includes/appendOutbox.lua).
 * `ringing`: an invitee's first ringing receipt. Group calls only (docs/group-calls.md): `joined`
 * (a member joined), `member` (members declined, missed, left), `invited` (members rung into the call).
 * `moved`: a member in the call moved it to another of its installations (docs/protocol.md "Moving a call").
 */
export const CHANGE_KINDS = ['created', 'answered', 'ended', 'renamed', 'ringing', 'joined', 'member', 'invited', 'moved'] as const;
export type ChangeKind = (typeof CHANGE_KINDS)[number];

export interface CallChange {
  /** The outbox entry ID (also tells the shard apart via `shard`). */
  entryId: string;
  shard: number;
  kind: ChangeKind;
  atMs: number;
  call: CallRecord;
  /** The members the change is about (`ringing` and the group changes). */
  subjects?: string[];
  /** The W3C trace context the change was made under, when traced (docs/operations.md "Tracing"). */
  traceparent?: string;
}

/**
 * An in-call message as lua/sendMessage.lua wrote it to the outbox: published to the recipient's
 * live channel, never appended to an event log (docs/api.md "In-call messages").
 */
export interface MessageEntry {
  entryId: string;
  callId: string;
  toUserId: string;
  /** The one installation it is for ('' = every installation of the recipient: a ringing callee). */
  only: string;
  /** The `call.message` event JSON, as stored. */
  event: string;
}

/** Parses a `message <callId> at <ms> to <userId> only <installationId> event <json>` outbox entry; undefined for other entries. */
export function parseMessageEntry(entryId: string, flat: string[]): MessageEntry | undefined {
  if (flat[0] !== 'message') return undefined;
  if (flat[2] !== 'at' || flat[4] !== 'to' || flat[6] !== 'only' || flat[8] !== 'event' || flat.length !== 10) {
    throw new CorruptRecordError(`outbox entry ${entryId} is a malformed message`);
  }
  return { entryId, callId: flat[1]!, toUserId: flat[5]!, only: flat[7]!, event: flat[9]! };
}

const KINDS = new Set<string>(CHANGE_KINDS);

/** Parses one outbox entry's flat field list: `change <kind> at <ms> <call fields…> [tp <traceparent>]`. */
export function parseChange(entryId: string, shard: number, flat: string[]): CallChange {
  if (flat[0] !== 'change' || flat[2] !== 'at') throw new CorruptRecordError(`outbox entry ${entryId} has no change header`);
  const kind = flat[1] ?? '';
  if (!KINDS.has(kind)) throw new CorruptRecordError(`outbox entry ${entryId} has unknown change ${kind}`);
  const atMs = Number(flat[3]);
  if (!Number.isSafeInteger(atMs)) throw new CorruptRecordError(`outbox entry ${entryId} has a bad time`);
  const change: CallChange = { entryId, shard, kind: kind as ChangeKind, atMs, call: parseCallFields(flat.slice(4)) };
  // `sub` and `tp` are the last pairs when present (lua/includes/appendOutbox.lua); the call
  // parser ignores them.
  let end = flat.length;
  if (end >= 6 && flat[end - 2] === 'tp') {
    change.traceparent = flat[end - 1]!;
    end -= 2;
  }
  if (end >= 6 && flat[end - 2] === 'sub') change.subjects = parseSubjects(entryId, flat[end - 1]!);
  return change;
}

/** What the relay read for a batch's handlers in the same write as its events' append. */
export interface BatchReads {
  /** Per user named by `pushRegistrationsOf`: the push registrations as stored (flat field/value list). */
  readonly pushRegistrations: ReadonlyMap<string, readonly string[]>;
  /** Per call named by `callsOf`: the call as stored as the events were appended (undefined: gone). */
  readonly calls: ReadonlyMap<string, CallRecord | undefined>;
}

/**
 * A side effect of the relayed changes (pushes), run after their events were stored. What it
 * needs to read, it names, and the relay reads it in the write that appends the batch's events
 * (docs/architecture.md "Relays"):
 *  - `pushRegistrationsOf`: users whose push registrations `handle` needs (read by the script
 *    that appends those users' events, lua/appendEvents.lua);
 *  - `callsOf`: calls whose current state `handle` needs (read beside the shard's outbox: same
 *    hash slot).
 * A handler is run at most once per change by one relay: when a batch is retried, only the
 * handlers that did not finish run again.
 */
export interface ChangeHandler {
  readonly name: string;
  /**
   * Batches handed to `handle` one at a time, in outbox order (the default), or, when true, as
   * soon as each is delivered, several at once (pushes: a slow provider then holds back neither
   * the next batches' pushes nor, through the relay's bound on batches in effects, their events).
   */
  readonly concurrent?: boolean;
  pushRegistrationsOf?(changes: readonly CallChange[]): Iterable<string>;
  callsOf?(changes: readonly CallChange[]): Iterable<string>;
  handle(changes: readonly CallChange[], reads: BatchReads): Promise<void>;
}

function parseSubjects(entryId: string, json: string): string[] {
  let list: unknown;
  try {
    list = JSON.parse(json);
  } catch {
    list = undefined;
  }
  if (!Array.isArray(list) || !list.every((u) => typeof u === 'string')) throw new CorruptRecordError(`outbox entry ${entryId} has malformed subjects`);
  return list as string[];
}
