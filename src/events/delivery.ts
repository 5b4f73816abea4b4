import type { EventPayload } from './payloads.js';

/**
 * One event for one user's event log (src/events/audience.ts decides who is told what); `only` /
 * `except` narrow it to or away from one installation of that user.
 */
export interface Delivery {
  userId: string;
  payload: EventPayload;
  only?: string;
  except?: string;
  /** A `call.ended` to an invitee that was ringing: the Android push signal follows it (src/push/planner.ts). */
  stopsRinging?: boolean;
}

/** Whether a delivery narrowed by `only` / `except` is for this installation. */
export function isForInstallation(only: string | undefined, except: string | undefined, installationId: string): boolean {
  if (only && only !== installationId) return false;
  if (except && except === installationId) return false;
  return true;
}
