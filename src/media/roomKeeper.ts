import type { CallChange, ChangeHandler } from '../calls/change.js';
import { memberOf, type CallRecord } from '../calls/model.js';
import { inCallInstallation, movedFrom } from '../calls/participants.js';
import type { Config } from '../config/config.js';
import type { Logger } from '../util/logger.js';
import { SfuUnavailableError } from './janusApi.js';
import type { RoomKeepingSfu, SfuParticipant } from './sfu.js';

/**
 * The life of a call's SFU room, as a side effect of the relayed changes (docs/operations.md
 * "SFU media"): made when the call is accepted (a one-to-one call's answer with MEDIA_MODE=sfu, a
 * group call's first join), emptied of each group member who leaves or is removed, removed when
 * an accepted call ends; a member who moves the call to another installation leaves the room from
 * the one it left (docs/protocol.md "Moving a call"). Run by the relay, so at least once and after a crash too; every step is
 * idempotent, so a retried batch makes no second room and kicks no one twice. A call's changes
 * run in outbox order; different calls at once.
 *
 * An SFU that cannot be reached is logged and counted, not retried: a Janus that is down has lost
 * its rooms with it (they are not permanent), and media-session makes the room when it is needed.
 * A refusal is retried with the batch.
 */
export function roomKeeper(sfu: Pick<RoomKeepingSfu, 'openRoom' | 'closeRoom' | 'evict'>, mode: Config['MEDIA_MODE'], logger: Logger): ChangeHandler {
  const usesSfu = (call: CallRecord) => call.kind === 'group' || mode === 'sfu';
  const apply = async (c: CallChange, now: CallRecord | undefined) => {
    if (!usesSfu(c.call)) return;
    if (c.kind === 'answered' || (c.kind === 'joined' && c.call.acceptedAtMs === c.atMs)) await sfu.openRoom(c.call.callId);
    else if (c.kind === 'member') await sfu.evict(c.call.callId, leavers(c, now));
    else if (c.kind === 'moved') await sfu.evict(c.call.callId, movedAway(c, now));
    else if (c.kind === 'ended' && c.call.acceptedAtMs !== undefined) await sfu.closeRoom(c.call.callId);
  };
  return {
    name: 'sfu-rooms',
    callsOf: (changes) => changes.filter((c) => c.kind === 'member' || c.kind === 'moved').map((c) => c.call.callId),
    async handle(changes, reads) {
      const byCall = new Map<string, CallChange[]>();
      for (const c of changes) byCall.set(c.call.callId, [...(byCall.get(c.call.callId) ?? []), c]);
      await Promise.all(
        [...byCall.values()].map(async (ofCall) => {
          for (const c of ofCall) {
            await apply(c, reads.calls.get(c.call.callId)).catch((err: unknown) => {
              if (!(err instanceof SfuUnavailableError)) throw err;
              logger.warn({ callId: c.call.callId, change: c.kind, err: err.message }, 'SFU unreachable: room step skipped');
            });
          }
        }),
      );
    },
  };
}

/**
 * The installations a `member` change took out of the call: its subjects that left (or were
 * removed) from a joined installation, but not one that is back in the call on that installation
 * by the time the relay read the call (`now`): its new credential must keep working.
 */
function leavers(c: CallChange, now: CallRecord | undefined): SfuParticipant[] {
  const gone: SfuParticipant[] = [];
  for (const userId of c.subjects ?? []) {
    const m = memberOf(c.call, userId);
    if (m?.state !== 'left' || m.installationId === undefined) continue;
    const current = now && memberOf(now, userId);
    if (current?.state === 'joined' && current.installationId === m.installationId) continue;
    gone.push({ callId: c.call.callId, userId, installationId: m.installationId });
  }
  return gone;
}

/**
 * The installations a `moved` change took out of the call: the one each subject moved from, but
 * not one the subject is in the call from again by the time the relay read the call (`now`).
 */
function movedAway(c: CallChange, now: CallRecord | undefined): SfuParticipant[] {
  return (c.subjects ?? []).flatMap((userId) => {
    const from = movedFrom(c.call, userId);
    if (from === undefined || (now && inCallInstallation(now, userId) === from)) return [];
    return [{ callId: c.call.callId, userId, installationId: from }];
  });
}
