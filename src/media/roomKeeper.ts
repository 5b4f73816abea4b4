import type { CallChange, ChangeHandler } from '../calls/change.js';
import type { Logger } from '../util/logger.js';
import { SfuUnavailableError } from './janusApi.js';
import type { RoomKeepingSfu } from './sfu.js';

/**
 * The life of a call's SFU room, as a side effect of the relayed changes (docs/operations.md
 * "SFU media"): made when the call is accepted, removed when an accepted call ends. Run by the
 * relay, so at least once and after a crash too; both steps are idempotent, so a retried batch
 * makes no second room. A call's changes run in outbox order; different calls at once.
 *
 * An SFU that cannot be reached is logged and counted, not retried: a Janus that is down has lost
 * its rooms with it (they are not permanent), and media-session makes the room when it is needed.
 * A refusal is retried with the batch.
 */
export function roomKeeper(sfu: Pick<RoomKeepingSfu, 'openRoom' | 'closeRoom'>, logger: Logger): ChangeHandler {
  const apply = async (c: CallChange) => {
    if (c.kind === 'answered') await sfu.openRoom(c.call.callId);
    else if (c.kind === 'ended' && c.call.acceptedAtMs !== undefined) await sfu.closeRoom(c.call.callId);
  };
  return {
    name: 'sfu-rooms',
    async handle(changes) {
      const byCall = new Map<string, CallChange[]>();
      for (const c of changes) byCall.set(c.call.callId, [...(byCall.get(c.call.callId) ?? []), c]);
      await Promise.all(
        [...byCall.values()].map(async (ofCall) => {
          for (const c of ofCall) {
            await apply(c).catch((err: unknown) => {
              if (!(err instanceof SfuUnavailableError)) throw err;
              logger.warn({ callId: c.call.callId, change: c.kind, err: err.message }, 'SFU unreachable: room step skipped');
            });
          }
        }),
      );
    },
  };
}
