/**
 * A call's presence: each member's current live signal state (docs/signaling.md "Live signals"),
 * kept in Redis with the call (lua/includes/presence.lua) and shown in its snapshot.
 */

/** The signal kinds whose current value is kept; the others (reaction, custom) only travel. */
export const STATE_KINDS = ['muted', 'speaking', 'handRaised', 'video'] as const;
/** Every live signal kind (docs/signaling.md "Live signals"). */
export const SIGNAL_KINDS = [...STATE_KINDS, 'reaction', 'custom'] as const;

/** A member's state as kept: only the kinds it has sent during its stay in the call. */
export type MemberPresence = Partial<Record<(typeof STATE_KINDS)[number], boolean>>;

/** The kept entry (lua/includes/presence.lua), without its bookkeeping. */
export function memberPresence(entry: Record<string, unknown>): MemberPresence {
  const out: MemberPresence = {};
  for (const kind of STATE_KINDS) {
    const value = entry[kind];
    if (typeof value === 'boolean') out[kind] = value;
  }
  return out;
}
