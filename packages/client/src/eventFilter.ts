import type { EventPayload } from './types.js';

/**
 * What a client does with every event it receives, from signaling or from a catch-up page: drop
 * an eventId it already delivered (a resume or a relay may repeat one), and drop an event whose
 * revision is not above the last one delivered for its call (a stale event: per call, events come
 * in revision order; docs/protocol.md "Ordering and delivery"). Both memories are bounded.
 */
export class EventFilter {
  private readonly seen = new Set<string>();
  private readonly revisions = new Map<string, bigint>();

  constructor(private readonly window = 1000) {}

  /** True when the event is new and in order for its call; remembers it. In-call messages have no revision. */
  accept(event: Pick<EventPayload, 'eventId' | 'callId'> & { revision?: string }): boolean {
    if (this.seen.has(event.eventId)) return false;
    const revision = toRevision(event.revision);
    const last = this.revisions.get(event.callId);
    if (last !== undefined && revision !== undefined && revision < last) return false;
    this.remember(this.seen, event.eventId);
    if (revision !== undefined && (last === undefined || revision > last)) {
      this.revisions.delete(event.callId);
      this.revisions.set(event.callId, revision);
      while (this.revisions.size > this.window) this.revisions.delete(this.revisions.keys().next().value as string);
    }
    return true;
  }

  private remember(set: Set<string>, id: string): void {
    set.add(id);
    while (set.size > this.window) set.delete(set.values().next().value as string);
  }
}

function toRevision(text: string | undefined): bigint | undefined {
  return text !== undefined && /^[0-9]{1,30}$/.test(text) ? BigInt(text) : undefined;
}
