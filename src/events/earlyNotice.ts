import { deliveriesFor } from './audience.js';
import { parseChange } from '../calls/change.js';

/**
 * Early notices (docs/signaling.md "Early events"). On a single Redis, the script that makes a
 * change a device asked for (create, answer, end, rename) also publishes the change's outbox
 * entry on both parties' live channels, as a live message with this epoch and the entry's fields
 * as a JSON array (lua/includes/appendOutbox.lua). A gateway derives each user's events from it
 * with the relay's own audience rules (audience.ts) and sends them at once, without a cursor; the
 * relay's copies follow with their cursors.
 */
export const EARLY_EPOCH = '!early';

/** One user's events of one change, derived from an early notice. */
export interface EarlyEvents {
  callId: string;
  revision: number;
  /** The call ended with this change: no later change follows. */
  ended: boolean;
  /** The user's events: payload JSON, narrowed to or away from one installation. */
  events: { json: string; only: string | undefined; except: string | undefined }[];
}

/** The user's events of the change in an early notice's body; undefined if it is not one. */
export function earlyEventsFor(body: string, userId: string): EarlyEvents | undefined {
  let flat: unknown;
  try {
    flat = JSON.parse(body);
  } catch {
    return undefined;
  }
  if (!Array.isArray(flat) || !flat.every((f) => typeof f === 'string')) return undefined;
  let change;
  try {
    change = parseChange('', -1, flat as string[]);
  } catch {
    return undefined;
  }
  const revision = Number(change.call.revision);
  if (!Number.isSafeInteger(revision)) return undefined;
  return {
    callId: change.call.callId,
    revision,
    ended: change.kind === 'ended',
    events: deliveriesFor(change)
      .filter((d) => d.userId === userId)
      .map((d) => ({ json: JSON.stringify(d.payload), only: d.only, except: d.except })),
  };
}
