import type { PushRegistration } from './registry.js';

/**
 * The registrations a call's invitation was pushed to, per (call, invitee), kept in this process
 * so that the signals that stop that ringing need no second read of the invitee's registrations
 * (docs/architecture.md "Push"). That is not only cheaper but what the signal is for: it stops
 * the devices that were rung, which are the ones registered when the invitation went out; a
 * device registered mid-ring never rang and has nothing to stop (it sees the call over signaling
 * like any other event).
 *
 * A memory, not a record: whatever it does not hold (another worker relayed the invitation, this
 * one restarted, a shard changed hands, the entry was evicted or outlived its lifetime) is read
 * from Redis as before. Bounded without timers: a Map in insertion order, at most `maxEntries`
 * (the oldest go first) and each entry kept `lifetimeMs` (checked on use; expired entries at the
 * front are dropped whenever one is added). A call's entries leave with its `ended` change.
 */
export class RungRegistrations {
  /** `${callId}\n${userId}` → the entry; insertion order is expiry order (one lifetime for all). */
  private readonly entries = new Map<string, { callId: string; expiresAtMs: number; registrations: readonly PushRegistration[] }>();
  /** Per call: the keys of its entries, so that its end removes them without a scan. */
  private readonly byCall = new Map<string, Set<string>>();

  constructor(
    private readonly opts: { maxEntries: number; lifetimeMs: number; now?: () => number },
  ) {}

  get size(): number {
    return this.entries.size;
  }

  /** Keeps what `userId`'s invitation to `callId` was pushed to (replacing an earlier invitation's). */
  remember(callId: string, userId: string, registrations: readonly PushRegistration[]): void {
    const now = this.now();
    this.dropExpired(now);
    const key = entryKey(callId, userId);
    // Delete first: a re-invitation moves to the back (insertion order stays expiry order).
    this.entries.delete(key);
    this.entries.set(key, { callId, expiresAtMs: now + this.opts.lifetimeMs, registrations });
    let keys = this.byCall.get(callId);
    if (!keys) this.byCall.set(callId, (keys = new Set()));
    keys.add(key);
    while (this.entries.size > this.opts.maxEntries) this.delete(this.entries.keys().next().value!);
  }

  /** What `userId` was rung on for `callId`; undefined when not held (read it instead). */
  recall(callId: string, userId: string): readonly PushRegistration[] | undefined {
    const key = entryKey(callId, userId);
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    if (entry.expiresAtMs <= this.now()) {
      this.delete(key);
      return undefined;
    }
    return entry.registrations;
  }

  /** The call ended: nothing of it rings any more. */
  forgetCall(callId: string): void {
    for (const key of this.byCall.get(callId) ?? []) this.entries.delete(key);
    this.byCall.delete(callId);
  }

  private now(): number {
    return (this.opts.now ?? Date.now)();
  }

  private dropExpired(now: number): void {
    for (const [key, entry] of this.entries) {
      if (entry.expiresAtMs > now) return;
      this.delete(key);
    }
  }

  private delete(key: string): void {
    const entry = this.entries.get(key);
    if (!entry) return;
    this.entries.delete(key);
    const keys = this.byCall.get(entry.callId);
    keys?.delete(key);
    if (keys?.size === 0) this.byCall.delete(entry.callId);
  }
}

const entryKey = (callId: string, userId: string) => `${callId}\n${userId}`;
