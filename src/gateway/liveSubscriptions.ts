import { topologyOf, type RedisClient } from '../redis/connection.js';
import { keys, type KeySpace } from '../redis/keys.js';
import { parseLiveMessage, type LiveMessage } from '../events/eventLog.js';
import { EARLY_EPOCH, earlyEventsFor, parseEarlyNotice } from '../events/earlyNotice.js';
import { LOG_NOTICE_EPOCH, logNoticeEntries } from '../events/logNotice.js';
import { SIGNAL_EPOCH, parseSignalNotice, signalNoticePrefix } from './signalNotice.js';

/**
 * The gateway's sockets, by user, and one sharded Pub/Sub subscription (SSUBSCRIBE) per user with
 * at least one socket here, shared by that user's sockets, on a connection used for nothing else.
 * The user's channel shares the user's hash tag (keys.liveChannel), so the event log's append
 * publishes it from the same slot, and on Redis Cluster the message goes to that slot's node only.
 *
 * Kept lean for idle sockets (docs/performance.md "Memory per socket"): a user with one device is
 * one map entry whose value is the socket itself (a Set only from the second socket on), and the
 * channel name is built when needed instead of being kept.
 *
 * On a single Redis it also subscribes to every call shard's early channel (keys.earlyChannel),
 * where the call scripts publish each change once (docs/signaling.md "Early events"); a notice
 * is parsed once and dispatched to the sockets of the call's parties held here. The relay
 * publishes its log copies there too, a batch's together (src/events/logNotice.ts): each entry
 * goes to the sockets of its user as if it had come on the user's channel, and behind the
 * change's early notice, on the same channel. Live signals come there too, once for all their
 * recipients (src/gateway/signalNotice.ts).
 */
export class LiveSubscriptions<S extends object> {
  private readonly byUser = new Map<string, S | Set<S>>();
  /** Subscriptions Redis has not confirmed yet, by user. */
  private readonly subscribing = new Map<string, Promise<unknown>>();
  private count = 0;
  /** Re-subscription rounds started (confirmAll). */
  private rounds = 0;
  /** Every live channel is `<head><userId><tail>` (keys.liveChannel). */
  private readonly head: string;
  private readonly tail: string;
  /** The call shards' early channels (a single Redis; none on a cluster). */
  private readonly earlyChannels: ReadonlySet<string>;

  constructor(
    private readonly subscriber: RedisClient,
    private readonly ks: KeySpace,
    private readonly dispatch: (socket: S, msg: LiveMessage) => void,
    /** After a re-subscription: `failed` are the users whose subscription Redis refused. */
    private readonly onResubscribed: (failed: ReadonlySet<string>) => void,
  ) {
    const probe = keys.liveChannel(ks, '\u0000');
    [this.head, this.tail] = probe.split('\u0000') as [string, string];
    this.earlyChannels = new Set(topologyOf(subscriber) === 'single' ? Array.from({ length: ks.shards }, (_, shard) => keys.earlyChannel(ks, shard)) : []);
    subscriber.on('smessage', (channel: string, message: string) => this.onMessage(channel, message));
    // A socket that comes before this subscription gets the calls in progress from the log alone.
    if (this.earlyChannels.size > 0) subscriber.ssubscribe(...this.earlyChannels).catch(() => {});
    // Pub/Sub drops messages while disconnected: after ioredis re-subscribes (a reconnect, or on
    // a cluster the subscriptions of slots that moved after a failover or resharding), every
    // socket re-reads its log from its cursor, once its subscription is confirmed (confirmAll).
    for (const event of ['ready', 'subscribersReady']) {
      subscriber.on(event, () => {
        if (this.byUser.size > 0) void this.confirmAll();
      });
    }
  }

  /**
   * Subscribes every user held here again and waits for Redis to confirm it, then hands over the
   * users whose subscription failed. ioredis announces its own re-subscription before Redis
   * confirmed it, and drops one that fails (a MOVED while slots move) without a word: a log
   * re-read that finished before the subscription took hold, or a subscription that never did,
   * would leave a socket deaf until the user's next event, or for good. SSUBSCRIBE of a channel
   * already subscribed changes nothing. A later round supersedes one still waiting.
   */
  private async confirmAll(): Promise<void> {
    const round = ++this.rounds;
    const failed = new Set<string>();
    await Promise.all([...this.byUser.keys()].map((userId) => this.subscriber.ssubscribe(keys.liveChannel(this.ks, userId)).catch(() => failed.add(userId))));
    if (round === this.rounds) this.onResubscribed(failed);
  }

  /**
   * Adds the socket at once (socketsOf counts it from here); resolves once Redis confirmed the
   * user's subscription, so nothing published after is missed.
   */
  async add(userId: string, socket: S): Promise<void> {
    this.count++;
    const entry = this.byUser.get(userId);
    if (entry instanceof Set) entry.add(socket);
    else if (entry) this.byUser.set(userId, new Set([entry, socket]));
    else {
      this.byUser.set(userId, socket);
      const ready = this.subscriber.ssubscribe(keys.liveChannel(this.ks, userId));
      this.subscribing.set(userId, ready);
      try {
        await ready;
      } finally {
        if (this.subscribing.get(userId) === ready) this.subscribing.delete(userId);
      }
      return;
    }
    await this.subscribing.get(userId);
  }

  remove(userId: string, socket: S): void {
    const entry = this.byUser.get(userId);
    if (entry instanceof Set) {
      if (!entry.delete(socket)) return;
      this.count--;
      if (entry.size === 1) this.byUser.set(userId, entry.values().next().value as S);
      return;
    }
    if (entry !== socket) return;
    this.count--;
    this.byUser.delete(userId);
    this.subscribing.delete(userId);
    this.subscriber.sunsubscribe(keys.liveChannel(this.ks, userId)).catch(() => {});
  }

  /** How many sockets of this user this gateway holds. */
  socketsOf(userId: string): number {
    const entry = this.byUser.get(userId);
    return entry instanceof Set ? entry.size : entry ? 1 : 0;
  }

  /** Every socket this gateway holds. */
  *sockets(): IterableIterator<S> {
    for (const entry of this.byUser.values()) {
      if (entry instanceof Set) yield* entry;
      else yield entry;
    }
  }

  size(): number {
    return this.count;
  }

  users(): number {
    return this.byUser.size;
  }

  private onMessage(channel: string, message: string): void {
    if (this.earlyChannels.has(channel)) {
      if (signalNoticePrefix(message) > 0) return this.onSignalNotice(message);
      const msg = parseLiveMessage(message);
      if (msg?.epoch === EARLY_EPOCH) this.onEarlyNotice(msg);
      else if (msg?.epoch === LOG_NOTICE_EPOCH) this.onLogNotice(msg.json);
      return;
    }
    const entry = this.entryOf(channel);
    if (!entry) return;
    const msg = parseLiveMessage(message);
    if (msg) this.dispatchTo(entry, msg);
  }

  /** The sockets of the user whose live channel this is, if any are held here. */
  private entryOf(channel: string): S | Set<S> | undefined {
    if (!channel.startsWith(this.head) || !channel.endsWith(this.tail)) return undefined;
    return this.byUser.get(channel.slice(this.head.length, channel.length - this.tail.length));
  }

  private dispatchTo(entry: S | Set<S>, msg: LiveMessage): void {
    if (entry instanceof Set) for (const socket of entry) this.dispatch(socket, msg);
    else this.dispatch(entry, msg);
  }

  private onLogNotice(body: string): void {
    for (const { channel, message } of logNoticeEntries(body)) {
      const entry = this.entryOf(channel);
      if (entry) this.dispatchTo(entry, message);
    }
  }

  /**
   * Live signals for their recipients held here, each as if it had come on the user's channel.
   * Every gateway gets every notice, the sender's included, and most recipients are held
   * elsewhere: the recipients are walked in place, and only a held one's installationId is cut
   * out. One message per signal serves all its recipients here (dispatch is synchronous, and a
   * signal's message is never kept: src/gateway/gateway.ts onLive).
   */
  private onSignalNotice(message: string): void {
    for (const notice of parseSignalNotice(message)) {
      const r = notice.recipients;
      let msg: LiveMessage | undefined;
      for (let at = 0; at < r.length; ) {
        const tab = r.indexOf('\t', at);
        if (tab < 0) break;
        let end = r.indexOf('\t', tab + 1);
        if (end < 0) end = r.length;
        const entry = this.byUser.get(r.slice(at, tab));
        if (entry) {
          msg ??= { epoch: SIGNAL_EPOCH, previousId: '', id: '', only: '', except: '', json: notice.json, frames: {} };
          msg.only = r.slice(tab + 1, end);
          this.dispatchTo(entry, msg);
        }
        at = end + 1;
      }
    }
  }

  private onEarlyNotice(msg: LiveMessage): void {
    const notice = parseEarlyNotice(msg.json);
    if (!notice) return;
    for (const userId of notice.parties) {
      const entry = this.byUser.get(userId);
      if (entry) this.dispatchTo(entry, { ...msg, early: earlyEventsFor(notice, userId) });
    }
  }
}
