import { primaries, type RedisClient } from '../redis/connection.js';
import { keys, type KeySpace } from '../redis/keys.js';
import type { CallStore } from '../calls/store.js';
import type { CallRecord } from '../calls/model.js';
import { sideOf } from '../calls/participants.js';
import type { EndReason } from '../calls/reasons.js';
import type { CallHistory } from '../history/callHistory.js';
import type { PushRegistry } from '../push/registry.js';
import { PUSH_TOKEN_KINDS } from '../push/kinds.js';
import { signOutMessage } from '../events/eventLog.js';

/**
 * What the server API does to a user or an installation (docs/server-api.md): sign an
 * installation out, erase a user.
 */

/** The reason both sides of a call are told when the app's backend ends it (unless it names another). */
export const SERVER_END_REASON: EndReason = 'remoteEnded';

export class CallsStillEnding extends Error {
  override name = 'CallsStillEnding';
}

export interface Erasure {
  callsEnded: number;
  keysDeleted: number;
}

export class UserAdmin {
  constructor(
    private readonly redis: RedisClient,
    private readonly ks: KeySpace,
    private readonly calls: CallStore,
    private readonly history: CallHistory,
    private readonly pushRegistry: PushRegistry,
  ) {}

  /** The user's calls that have not ended (the relay's index, each call read again). */
  async activeCalls(userId: string): Promise<CallRecord[]> {
    const ids = await this.history.activeCallIds(userId);
    const calls = await Promise.all(ids.map((id) => this.calls.peek(id)));
    return calls.filter((c): c is CallRecord => c !== undefined && c.state !== 'ended' && sideOf(c, userId) !== undefined);
  }

  /** Deletes the installation's push tokens and closes its sockets on every gateway (4010). */
  async signOut(userId: string, installationId: string): Promise<{ pushTokensRemoved: number }> {
    const removed = await Promise.all(PUSH_TOKEN_KINDS.map((kind) => this.pushRegistry.remove(userId, installationId, kind)));
    await this.redis.spublish(keys.liveChannel(this.ks, userId), signOutMessage(installationId));
    return { pushTokensRemoved: removed.filter(Boolean).length };
  }

  /**
   * Erases a user (docs/server-api.md "Erase a user"): ends the calls in progress (and waits until
   * the relay has filed them, so it writes nothing of the user afterwards), closes every socket,
   * then deletes every key of the user: push tokens and their owner keys, the event log, the
   * history, rate-limit counters, operation records, and of each of the user's calls its hash,
   * history record and messages. The peers keep their own history and logs.
   */
  async erase(userId: string, settleMs = 10_000): Promise<Erasure> {
    const ks = this.ks;
    const marker = await this.redis.hget(keys.eventLogMeta(ks, userId), 'active');
    const current = [...new Set([...(await this.history.activeCallIds(userId)), ...(marker ? [marker] : [])])];
    let callsEnded = 0;
    const toFile: string[] = [];
    for (const callId of current) {
      const call = await this.calls.peek(callId);
      // A group call ends for everyone too: once it is filed, nothing more is written for the user
      // (a call going on would file the user's record at its end, after the erasure).
      if (!call || sideOf(call, userId) === undefined) continue;
      const r = await this.calls.endByServer(callId, SERVER_END_REASON);
      if (r?.ended) callsEnded++;
      if (r) toFile.push(callId);
    }
    await this.filed(userId, toFile, settleMs);
    await this.redis.spublish(keys.liveChannel(ks, userId), signOutMessage(''));

    for (const reg of await this.pushRegistry.list(userId)) await this.pushRegistry.remove(userId, reg.installationId, reg.kind);
    const records = await this.redis.zrange(keys.userHistoryIndex(ks, userId), 0, -1);
    const callIds = new Set([...toFile, ...records.map((json) => (JSON.parse(json) as { callId: string }).callId)]);
    const doomed = new Set<string>();
    for (const callId of callIds) {
      for (const k of [keys.call(ks, callId), keys.callHistory(ks, callId), keys.callMessages(ks, callId), keys.callMessageSeqs(ks, callId), keys.callMessageLimit(ks, callId, userId)]) {
        doomed.add(k);
      }
    }
    for (const k of await this.scanUserKeys(userId)) doomed.add(k);
    let keysDeleted = 0;
    const list = [...doomed];
    // One key per command: the keys live in many slots.
    for (let i = 0; i < list.length; i += 500) {
      const counts = await Promise.all(list.slice(i, i + 500).map((k) => this.redis.unlink(k)));
      keysDeleted += counts.reduce((a, b) => a + b, 0);
    }
    return { callsEnded, keysDeleted };
  }

  /** Waits until the relay has filed each call's end: the call has left the user's calls in progress. */
  private async filed(userId: string, callIds: readonly string[], settleMs: number): Promise<void> {
    const deadline = Date.now() + settleMs;
    for (;;) {
      const scores = await Promise.all(callIds.map((callId) => this.redis.zscore(keys.userActiveCalls(this.ks, userId), callId)));
      const pending = scores.filter((s) => s !== null).length;
      if (pending === 0) return;
      if (Date.now() > deadline) throw new CallsStillEnding(`${pending} of the user's calls are still ending; retry`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /**
   * Every key whose name belongs to the user: its own slot's (`{u:<userId>}`), and under the call
   * tags its operation records. Found by one SCAN of each primary: the operation records' names are
   * not listed anywhere else.
   */
  private async scanUserKeys(userId: string): Promise<string[]> {
    const ks = this.ks;
    const own = `:{u:${userId}}:`;
    const operation = `:op:${userId.length}:${userId}:`;
    const mine = (k: string) => k.includes(own) || k.includes(operation);
    const nodes = primaries(this.redis);
    const found: string[] = [];
    for (const node of nodes) {
      let cursor = '0';
      do {
        const [next, batch] = await node.scan(cursor, 'MATCH', `${globEscape(ks.prefix)}:*`, 'COUNT', 1000);
        for (const k of batch) if (mine(k)) found.push(k);
        cursor = next;
      } while (cursor !== '0');
    }
    return found;
  }
}

function globEscape(s: string): string {
  return s.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
}
