import { parseCallFields, CorruptRecordError, type CallRecord } from './model.js';
import type { CreateLimit } from './scriptArgs.js';

/**
 * What a call's request scripts answer (lua/*.lua), read into typed outcomes: `parseOutcome` for
 * every request, `parseLimited` for those whose script also hits rate limits (a create, an invite).
 */

/** 'ringing': a ringing receipt that was the invitee's first (lua/noteRinging.lua). */
export type OutcomeCode = 'ok' | 'ringing' | 'answer_conflict' | 'revision_conflict' | 'not_in_call';
export type FailureCode = 'not_found' | 'forbidden' | 'idempotency_conflict' | 'call_exists' | 'rename_limit' | 'not_group' | 'call_not_active' | 'too_many_members';

export type Outcome =
  | { kind: 'outcome'; code: OutcomeCode; status: number; call: CallRecord; replayed: boolean }
  | { kind: 'failure'; code: FailureCode };

const FAILURES = new Set<string>(['not_found', 'forbidden', 'idempotency_conflict', 'call_exists', 'rename_limit', 'not_group', 'call_not_active', 'too_many_members']);
const OUTCOMES = new Set<string>(['ok', 'ringing', 'answer_conflict', 'revision_conflict', 'not_in_call']);

/** Maps every reply of the create/answer/end/read scripts to a typed outcome. */
export function parseOutcome(reply: unknown): Outcome {
  if (!Array.isArray(reply)) throw new CorruptRecordError('script reply is not a list');
  const [kind, code, status, fields] = reply as unknown[];
  if (kind === 'error' && typeof code === 'string' && FAILURES.has(code)) {
    return { kind: 'failure', code: code as FailureCode };
  }
  if ((kind === 'fresh' || kind === 'replay') && typeof code === 'string' && OUTCOMES.has(code)) {
    return { kind: 'outcome', code: code as OutcomeCode, status: Number(status), call: parseCallFields(fields), replayed: kind === 'replay' };
  }
  if (kind === 'ok') return { kind: 'outcome', code: 'ok', status: 200, call: parseCallFields(code), replayed: false };
  throw new CorruptRecordError(`unexpected script reply ${String(kind)}/${String(code)}`);
}

/**
 * The reading of a reply that may be a refusal by one of `limits` (lua/includes/createLimits.lua:
 * a create's or an invite's script, on a single Redis), made before the script bound or wrote
 * anything; any other reply is read by parseOutcome.
 */
export function parseLimited(limits: readonly CreateLimit[]): (reply: unknown) => Outcome | NotAdmitted {
  return (reply) => {
    if (!Array.isArray(reply) || reply[0] !== 'limited') return parseOutcome(reply);
    const refused = limits[Number(reply[1]) - 1];
    if (!refused) throw new CorruptRecordError(`unexpected script reply limited/${String(reply[1])}`);
    return { kind: 'not_admitted', refused, retryAfterMs: Number(reply[2]) };
  };
}

/**
 * A create or an invite refused by one of its rate limits (the command answers 429): `refused`,
 * the first of its limits that said no, and that window's rest. Nothing was created or bound.
 */
export interface NotAdmitted {
  kind: 'not_admitted';
  refused: CreateLimit;
  retryAfterMs: number;
}
