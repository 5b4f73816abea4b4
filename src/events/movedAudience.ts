import type { CallChange } from '../calls/change.js';
import { movedFrom, participants } from '../calls/participants.js';
import { endedPayload, movedPayload } from './payloads.js';
import type { Delivery } from './delivery.js';

/**
 * Who is told of a move (docs/protocol.md "Moving a call"), the same for both kinds of call: the
 * installation the member left gets `call.ended` `movedElsewhere`, and everyone else in the call
 * `call.moved` with the installation the member is in the call from now (a new media session is
 * needed with it). The installation that moved has the HTTP reply.
 */
export function movedDeliveries(change: CallChange): Delivery[] {
  const { call, atMs } = change;
  return (change.subjects ?? []).flatMap((userId): Delivery[] => {
    const all = participants(call);
    const mover = all.find((p) => p.userId === userId);
    if (!mover?.installationId) return [];
    const left = movedFrom(call, userId);
    const moved = movedPayload(call, atMs, userId, mover.installationId);
    return [
      ...(left ? [{ userId, only: left, payload: endedPayload(call, atMs, 'movedElsewhere', `moved-from.${userId}`) }] : []),
      ...all.filter((p) => p.state === 'joined' && p.userId !== userId).map((p) => ({ userId: p.userId, only: p.installationId, payload: moved })),
    ];
  });
}
