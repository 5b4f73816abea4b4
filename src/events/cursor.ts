/**
 * Event-log cursors: `<epoch>_<entry id>`. Opaque to clients. The epoch changes when a user's
 * log is reset (lost), so an old cursor reports a `reset` gap instead of silently skipping.
 */
export interface Cursor {
  epoch: string;
  id: string;
}

const CURSOR = /^([a-z0-9]{1,32})_(\d{1,20}-\d{1,20})$/;

export function encodeCursor(c: Cursor): string {
  return `${c.epoch}_${c.id}`;
}

export function decodeCursor(s: string): Cursor | undefined {
  const m = CURSOR.exec(s);
  return m ? { epoch: m[1]!, id: m[2]! } : undefined;
}

/** Stream IDs compare by (milliseconds, sequence). */
export function compareStreamIds(a: string, b: string): number {
  const [ams = 0, aseq = 0] = a.split('-').map(Number);
  const [bms = 0, bseq = 0] = b.split('-').map(Number);
  return ams !== bms ? ams - bms : aseq - bseq;
}

export function newEpoch(): string {
  return (Date.now().toString(36) + Math.random().toString(36).slice(2, 8)).slice(0, 32);
}
