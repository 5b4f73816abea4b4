/**
 * How long an ended call's keys live, as the call scripts take it (lua/includes/retention.lua):
 * the call record for `retentionMs` (CALL_RETENTION_MS). Call history is kept per party, by the
 * relay, for CALL_RECORD_RETENTION_DAYS (docs/call-history.md).
 */
export interface Retention {
  retentionMs: number;
}

export const DAY_MS = 86_400_000;
export const DEFAULT_HISTORY_RETENTION_MS = 30 * DAY_MS;

/** The scripts' retention argument: the call record's, in ms. */
export function retentionArg(r: Retention): string {
  return String(Math.round(r.retentionMs));
}
