import type { Redis } from 'ioredis';
import { keys, type KeySpace } from '../redis/keys.js';
import { parseLiveMessage, type LiveMessage } from '../events/eventLog.js';

/**
 * One Pub/Sub subscription per user with at least one socket on this gateway, shared by that
 * user's sockets, on a connection used for nothing else.
 */
export class LiveSubscriptions<S> {
  private readonly byUser = new Map<string, { sockets: Set<S>; ready: Promise<unknown> }>();
  private readonly prefix: string;

  constructor(
    private readonly subscriber: Redis,
    private readonly ks: KeySpace,
    private readonly dispatch: (socket: S, msg: LiveMessage) => void,
    private readonly onResubscribed: () => void,
  ) {
    this.prefix = keys.liveChannel(ks, '');
    subscriber.on('message', (channel: string, message: string) => this.onMessage(channel, message));
    // Pub/Sub drops messages while disconnected: after ioredis re-subscribes, every socket
    // re-reads its log from its cursor.
    subscriber.on('ready', () => {
      if (this.byUser.size > 0) this.onResubscribed();
    });
  }

  /** Resolves once Redis confirmed the subscription, so nothing published after is missed. */
  async add(userId: string, socket: S): Promise<void> {
    const entry = this.byUser.get(userId);
    if (entry) {
      entry.sockets.add(socket);
      await entry.ready;
      return;
    }
    const ready = this.subscriber.subscribe(keys.liveChannel(this.ks, userId));
    this.byUser.set(userId, { sockets: new Set([socket]), ready });
    await ready;
  }

  remove(userId: string, socket: S): void {
    const entry = this.byUser.get(userId);
    if (!entry) return;
    entry.sockets.delete(socket);
    if (entry.sockets.size === 0) {
      this.byUser.delete(userId);
      this.subscriber.unsubscribe(keys.liveChannel(this.ks, userId)).catch(() => {});
    }
  }

  users(): number {
    return this.byUser.size;
  }

  private onMessage(channel: string, message: string): void {
    if (!channel.startsWith(this.prefix)) return;
    const entry = this.byUser.get(channel.slice(this.prefix.length));
    if (!entry) return;
    const msg = parseLiveMessage(message);
    if (!msg) return;
    for (const socket of entry.sockets) this.dispatch(socket, msg);
  }
}
