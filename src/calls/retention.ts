/**
 * How long an ended call's keys live, as the call scripts take it (lua/includes/retention.lua):
 * the call hash for `retentionMs` (CALL_RETENTION_MS), its history record for
 * `historyRetentionMs` (CALL_RECORD_RETENTION_DAYS; docs/call-history.md).
 */
export interface Retention {
  retentionMs: number;
  /** Unset: DEFAULT_HISTORY_RETENTION_MS. */
  historyRetentionMs?: number;
}

export const DAY_MS = 86_400_000;
export const DEFAULT_HISTORY_RETENTION_MS = 30 * DAY_MS;

/** The scripts' retention argument, `<callMs>:<historyMs>`. */
export function retentionArg(r: Retention): string {
  return `${Math.round(r.retentionMs)}:${Math.round(r.historyRetentionMs ?? DEFAULT_HISTORY_RETENTION_MS)}`;
}
