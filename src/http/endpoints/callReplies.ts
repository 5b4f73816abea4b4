import { ApiError } from '../errors.js';
import { problemReply, type Reply } from '../router.js';
import type { Outcome } from '../../calls/store.js';
import { sideOf } from '../../calls/model.js';
import { toSnapshot } from '../../calls/snapshot.js';

/**
 * Turns a call-store outcome into the HTTP reply for `userId`. Deterministic: a replayed outcome
 * renders to the same bytes as the original.
 */
export function callReply(outcome: Outcome, userId: string, forbidden = 'only the callee can answer a call'): Reply {
  if (outcome.kind === 'failure') throw failureError(outcome.code, forbidden);
  const side = sideOf(outcome.call, userId);
  if (!side) throw new ApiError('not_found', 'call not found');
  const snapshot = toSnapshot(outcome.call, side);
  switch (outcome.code) {
    case 'ok':
      return { status: outcome.status, body: JSON.stringify(snapshot) };
    case 'answer_conflict':
      return problemReply(
        new ApiError(
          'answer_conflict',
          snapshot.state === 'accepted'
            ? 'the call was answered by another installation'
            : `the call is ${snapshot.state} and can no longer be answered`,
          { snapshot },
        ),
      );
    case 'revision_conflict':
      return problemReply(
        new ApiError('revision_conflict', `expectedRevision does not match the call's revision ${snapshot.revision}`, { snapshot }),
      );
  }
}

export function failureError(code: Extract<Outcome, { kind: 'failure' }>['code'], forbidden = 'only the callee can answer a call'): ApiError {
  switch (code) {
    case 'not_found':
      return new ApiError('not_found', 'call not found');
    case 'forbidden':
      return new ApiError('forbidden', forbidden);
    case 'rename_limit':
      return new ApiError('rate_limited', 'this call was renamed as often as it may be (RENAMES_PER_CALL)', {}, { 'retry-after': '60' });
    case 'idempotency_conflict':
      return new ApiError('idempotency_conflict', 'this operationId was already used with a different request');
    case 'call_exists':
      return new ApiError('call_exists', 'this callId is already used by another call');
  }
}
