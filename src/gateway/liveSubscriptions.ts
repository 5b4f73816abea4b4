import type { RedisClient } from '../redis/connection.js';
import { keys, type KeySpace } from '../redis/keys.js';
import { parseLiveMessage, type LiveMessage } from '../events/eventLog.js';

/**
 * One sharded Pub/Sub subscription (SSUBSCRIBE) per user with at least one socket on this
 * gateway, shared by that user's sockets, on a connection used for nothing else. The user's
 * channel shares the user's hash tag (keys.liveChannel), so the event log's append publishes it
 * from the same slot, and on Redis Cluster the message goes to that slot's node only.
 */
export class LiveSubscriptions<S> {
  private readonly byUser = new Map<string, { sockets: Set<S>; ready: Promise<unknown> }>();
  /** Every live channel is `<head><userId><tail>` (keys.liveChannel). */
  private readonly head: string;
  private readonly tail: string;

  constructor(
    private readonly subscriber: RedisClient,
    private readonly ks: KeySpace,
    private readonly dispatch: (socket: S, msg: LiveMessage) => void,
    private readonly onResubscribed: () => void,
  ) {
    const probe = keys.liveChannel(ks, '\u0000');
    [this.head, this.tail] = probe.split('\u0000') as [string, string];
    subscriber.on('smessage', (channel: string, message: string) => this.onMessage(channel, message));
    // Pub/Sub drops messages while disconnected: after ioredis re-subscribes (a reconnect, or on
    // a cluster the subscriptions of slots that moved after a failover or resharding), every
    // socket re-reads its log from its cursor.
    for (const event of ['ready', 'subscribersReady']) {
      subscriber.on(event, () => {
        if (this.byUser.size > 0) this.onResubscribed();
      });
    }
  }

  /** Resolves once Redis confirmed the subscription, so nothing published after is missed. */
  async add(userId: string, socket: S): Promise<void> {
    const entry = this.byUser.get(userId);
    if (entry) {
      entry.sockets.add(socket);
      await entry.ready;
      return;
    }
    const channel = keys.liveChannel(this.ks, userId);
    const ready = this.subscriber.ssubscribe(channel);
    this.byUser.set(userId, { sockets: new Set([socket]), ready });
    await ready;
  }

  remove(userId: string, socket: S): void {
    const entry = this.byUser.get(userId);
    if (!entry) return;
    entry.sockets.delete(socket);
    if (entry.sockets.size === 0) {
      this.byUser.delete(userId);
      this.subscriber.sunsubscribe(keys.liveChannel(this.ks, userId)).catch(() => {});
    }
  }

  /** How many sockets of this user this gateway holds. */
  socketsOf(userId: string): number {
    return this.byUser.get(userId)?.sockets.size ?? 0;
  }

  users(): number {
    return this.byUser.size;
  }

  private onMessage(channel: string, message: string): void {
    if (!channel.startsWith(this.head) || !channel.endsWith(this.tail)) return;
    const entry = this.byUser.get(channel.slice(this.head.length, channel.length - this.tail.length));
    if (!entry) return;
    const msg = parseLiveMessage(message);
    if (!msg) return;
    for (const socket of entry.sockets) this.dispatch(socket, msg);
  }
}
