import { errors, problemReply, type ApiError } from './errors.js';
import type { Reply } from './command.js';
import type { Outcome } from '../calls/store.js';
import { sideOf } from '../calls/participants.js';
import { toSnapshot } from '../calls/snapshot.js';

/**
 * Turns a call-store outcome into the HTTP reply for `userId`. Deterministic: a replayed outcome
 * renders to the same bytes as the original.
 */
export function callReply(outcome: Outcome, userId: string, forbidden = 'only the callee can answer a call'): Reply {
  if (outcome.kind === 'failure') throw failureError(outcome.code, forbidden);
  const side = sideOf(outcome.call, userId);
  if (!side) throw errors.callNotFound();
  const snapshot = toSnapshot(outcome.call, side);
  switch (outcome.code) {
    case 'ok':
    case 'ringing':
      return { status: outcome.status, body: JSON.stringify(snapshot) };
    case 'answer_conflict':
      return problemReply(errors.answerConflict(snapshot));
    case 'revision_conflict':
      return problemReply(errors.revisionConflict(snapshot));
    case 'not_in_call':
      return problemReply(errors.notInCall(snapshot));
  }
}

export function failureError(code: Extract<Outcome, { kind: 'failure' }>['code'], forbidden = 'only the callee can answer a call'): ApiError {
  switch (code) {
    case 'not_found':
      return errors.callNotFound();
    case 'forbidden':
      return errors.forbidden(forbidden);
    case 'rename_limit':
      return errors.rateLimited('this call was renamed as often as it may be (RENAMES_PER_CALL)', 60_000);
    case 'idempotency_conflict':
      return errors.idempotencyConflict();
    case 'call_exists':
      return errors.callExists();
    case 'not_group':
      return errors.notGroupCall();
    case 'call_not_active':
      return errors.callNotActive('members can only be invited');
    case 'too_many_members':
      return errors.groupCallFull();
  }
}
