/**
 * The only module that spells Redis keys. Every key of one Lua script shares a hash tag so the
 * same scripts run on Redis Cluster:
 *  - call-scoped keys (the call record, its operation records, the shard's outbox) carry the
 *    call's shard tag `{c<shard>}`, the shard being a hash of the callId;
 *  - user-scoped keys (push registrations, the event log) carry `{u:<userId>}`.
 */
export interface KeySpace {
  readonly prefix: string;
  readonly shards: number;
}

/** FNV-1a over UTF-16 code units: stable, fast, and identical in every process. */
export function shardOf(callId: string, shards: number): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < callId.length; i++) {
    h ^= callId.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) % shards;
}

export function callShardTag(ks: KeySpace, callId: string): string {
  return `{c${shardOf(callId, ks.shards)}}`;
}

export const keys = {
  call: (ks: KeySpace, callId: string) => `${ks.prefix}:${callShardTag(ks, callId)}:call:${callId}`,
  /** Stored outcome of one operation of one user on one call. */
  operation: (ks: KeySpace, callId: string, userId: string, operationId: string) =>
    `${ks.prefix}:${callShardTag(ks, callId)}:op:${userId.length}:${userId}:${operationId}`,
  outboxForCall: (ks: KeySpace, callId: string) => `${ks.prefix}:${callShardTag(ks, callId)}:outbox`,
  outboxForShard: (ks: KeySpace, shard: number) => `${ks.prefix}:{c${shard}}:outbox`,
  /** The shard's ring index: a sorted set of its ringing calls by expiresAtMs (ring sweeps). */
  ringingForCall: (ks: KeySpace, callId: string) => `${ks.prefix}:${callShardTag(ks, callId)}:ringing`,
  ringingForShard: (ks: KeySpace, shard: number) => `${ks.prefix}:{c${shard}}:ringing`,
  /** One call's in-call messages (a stream) and its per-sender sequence counters (docs/api.md "In-call messages"). */
  /**
   * A per-call copy of the history record that versions before 2026-11-26 wrote at every end and
   * nothing read (the parties' own copies are the history: docs/call-history.md). No longer
   * written; erasure still removes it until the last one expires (CALL_RECORD_RETENTION_DAYS).
   */
  callHistory: (ks: KeySpace, callId: string) => `${keys.call(ks, callId)}:history`,
  callMessages: (ks: KeySpace, callId: string) => `${ks.prefix}:${callShardTag(ks, callId)}:msgs:${callId}`,
  callMessageSeqs: (ks: KeySpace, callId: string) => `${ks.prefix}:${callShardTag(ks, callId)}:msgseq:${callId}`,
  /** Fixed-window counter of one sender's messages on one call. */
  callMessageLimit: (ks: KeySpace, callId: string, userId: string) =>
    `${ks.prefix}:${callShardTag(ks, callId)}:rl:msg:${callId}:${userId.length}:${userId}`,
  /** A call's current live-signal state per member (lua/sendSignals.lua). */
  callPresence: (ks: KeySpace, callId: string) => `${ks.prefix}:${callShardTag(ks, callId)}:presence:${callId}`,
  /**
   * A call's signal view (lua/includes/presence.lua signalSender): its members in the call and the
   * head of the record they were read from, so a live signal decodes the record only after a
   * change of who is in the call.
   */
  callSignalView: (ks: KeySpace, callId: string) => `${ks.prefix}:${callShardTag(ks, callId)}:sigview:${callId}`,
  /** Fixed-window counter of a call's live signals, all senders together. */
  callSignalLimit: (ks: KeySpace, callId: string) => `${ks.prefix}:${callShardTag(ks, callId)}:rl:sig:${callId}`,
  /** The live relays (by heartbeat): each takes about shards ÷ relays of the outbox shards. */
  relays: (ks: KeySpace) => `${ks.prefix}:relays`,
  /** Which relay reads a shard's outbox right now. */
  shardLease: (ks: KeySpace, shard: number) => `${ks.prefix}:{c${shard}}:relay-lease`,

  /** Binds a user's operationId to one (action, callId): catches reuse across calls. */
  operationBinding: (ks: KeySpace, userId: string, operationId: string) =>
    `${ks.prefix}:{u:${userId}}:opb:${operationId}`,
  /**
   * The user's push registrations, one hash (field `<installationId>\n<kind>`, value JSON): read
   * whole for an invitation's fan-out, in the same script as the user's events.
   */
  pushRegistrations: (ks: KeySpace, userId: string) => `${ks.prefix}:{u:${userId}}:push`,
  /** Version 0.1.0's push registrations, read only to move them (src/push/legacyRegistrations.ts). */
  legacyDevices: (ks: KeySpace, userId: string) => `${ks.prefix}:{u:${userId}}:devices`,
  legacyPushRegistration: (ks: KeySpace, userId: string, installationId: string, kind: string) =>
    `${ks.prefix}:{u:${userId}}:push:${kind}:${installationId}`,
  /** Set once a data migration is done, so later starts skip it. */
  migrationDone: (ks: KeySpace, migration: string) => `${ks.prefix}:migrated:${migration}`,
  /** Which user and installation a push token (by its hash) belongs to, for rebinding. */
  pushTokenOwner: (ks: KeySpace, kind: string, tokenHash: string) => `${ks.prefix}:tok:${kind}:${tokenHash}`,

  /**
   * A missed-call alert's claim (src/push/missedCallClaims.ts): set before its first attempt, so a
   * change relayed again sends it no second time. Expires after an hour.
   */
  missedCallAlertClaim: (ks: KeySpace, userId: string, callId: string, installationId: string, kind: string) =>
    `${ks.prefix}:{u:${userId}}:missed:${callId.length}:${callId}:${installationId.length}:${installationId}:${kind}`,

  /**
   * An installation sent a ringing receipt for the call (src/push/missedCallSeen.ts): with
   * `endSeen` below, its missed-call alert is skipped. Expires a ring window and a margin after
   * the receipt.
   */
  missedCallRang: (ks: KeySpace, userId: string, callId: string, installationId: string) =>
    `${ks.prefix}:{u:${userId}}:rang:${callId.length}:${callId}:${installationId.length}:${installationId}`,
  /**
   * A gateway wrote to one of the installation's sockets the `call.ended` that made its user miss
   * the call (value: the event's revision; src/push/missedCallSeen.ts). Expires after an hour.
   */
  missedCallEndSeen: (ks: KeySpace, userId: string, callId: string, installationId: string) =>
    `${ks.prefix}:{u:${userId}}:endseen:${callId.length}:${callId}:${installationId.length}:${installationId}`,

  /** Fixed-window rate-limit counters. */
  callCreateLimit: (ks: KeySpace, userId: string) => `${ks.prefix}:{u:${userId}}:rl:create`,
  renameLimit: (ks: KeySpace, userId: string) => `${ks.prefix}:{u:${userId}}:rl:rename`,
  /** Invitations to this user (as callee) from all callers together. */
  inviteLimit: (ks: KeySpace, calleeUserId: string) => `${ks.prefix}:{u:${calleeUserId}}:rl:invited`,
  pushTokenWriteLimit: (ks: KeySpace, userId: string, installationId: string) =>
    `${ks.prefix}:{u:${userId}}:rl:push:${installationId}`,
  /** The user's calls that have not ended (callId by createdAtMs), kept by the relay (lua/indexUserCalls.lua). */
  userActiveCalls: (ks: KeySpace, userId: string) => `${ks.prefix}:{u:${userId}}:calls:active`,
  /** The user's call history: the records by endedAtMs, all and the missed ones (sorted sets of record JSON). */
  userHistoryIndex: (ks: KeySpace, userId: string) => `${ks.prefix}:{u:${userId}}:calls:history`,
  userMissedIndex: (ks: KeySpace, userId: string) => `${ks.prefix}:{u:${userId}}:calls:missed`,
  /** The user's missed calls a missed-call alert was accepted for (callId by when it was missed; src/history/missedCallAlerts.ts). */
  userAlertedCalls: (ks: KeySpace, userId: string) => `${ks.prefix}:{u:${userId}}:calls:alerted`,
  /** Webhook dead letters (hash: id -> JSON) and their order by time (docs/webhooks.md "Dead letters"). */
  webhookDeadLetters: (ks: KeySpace) => `${ks.prefix}:{wh}:dead`,
  webhookDeadLetterOrder: (ks: KeySpace) => `${ks.prefix}:{wh}:dead:order`,
  /**
   * Webhook deliveries waiting for their first attempt, per queue partition (a stream read by the
   * workers' consumer group, src/webhooks/streamReader.ts; docs/webhooks.md "Delivery").
   */
  webhookStream: (ks: KeySpace, partition: number) => `${ks.prefix}:{webhook-${partition}}:first`,
  /** Webhook endpoints disabled by a 410 answer (hash: endpoint id -> JSON). */
  webhookDisabled: (ks: KeySpace) => `${ks.prefix}:{wh}:disabled`,
  /**
   * The user's call policy (docs/call-policy.md): a hash of its mode, its block list (`b:<userId>`
   * fields) and the allow list's replace state; the allow list itself (a set); and the staging
   * set of an allow-list replace being gathered.
   */
  callPolicy: (ks: KeySpace, userId: string) => `${ks.prefix}:{u:${userId}}:policy`,
  allowList: (ks: KeySpace, userId: string) => `${ks.prefix}:{u:${userId}}:allowed`,
  allowListNext: (ks: KeySpace, userId: string) => `${ks.prefix}:{u:${userId}}:allowed:next`,
  eventLog: (ks: KeySpace, userId: string) => `${ks.prefix}:{u:${userId}}:log`,
  eventLogMeta: (ks: KeySpace, userId: string) => `${ks.prefix}:{u:${userId}}:logmeta`,
  /**
   * Sharded Pub/Sub channel gateways subscribe to for a user's live events: it shares the user's
   * hash tag, so appendEvents.lua publishes it from the user's slot (SPUBLISH).
   */
  liveChannel: (ks: KeySpace, userId: string) => `${ks.prefix}:{u:${userId}}:live`,
  /**
   * Sharded Pub/Sub channel of a call shard's early notices (docs/signaling.md "Early events"),
   * which every gateway subscribes to on a single Redis. lua/includes/appendOutbox.lua derives it
   * from the shard's outbox key (`outbox` → `early`): keep the two in step.
   */
  earlyChannel: (ks: KeySpace, shard: number) => `${ks.prefix}:{c${shard}}:early`,
} as const;

/**
 * The keys allowed to live without a TTL, as patterns over the whole key name (docs/keyspace.md
 * "Long-lived keys"). Every other key the backend writes has a TTL; test/integration/keyspace-bounds.test.ts
 * checks both. Add a row here and in docs/keyspace.md for each new long-lived key.
 */
export const LONG_LIVED_KEYS: readonly { pattern: RegExp; bound: string }[] = [
  { pattern: /:\{c\d+\}:outbox$/, bound: 'per shard; trimmed by the relay behind what it acknowledged' },
  { pattern: /:\{c\d+\}:ringing$/, bound: 'per shard; one entry per ringing call' },
  { pattern: /:migrated:[A-Za-z0-9._-]+$/, bound: 'one per data migration' },
  { pattern: /:\{u:[^}]*\}:calls:active$/, bound: "a user's calls in progress: each leaves at its end, and the empty set is gone" },
  { pattern: /:\{u:[^}]*\}:(policy|allowed)$/, bound: "a user's call policy: at most MAX_BLOCKED blocked users and MAX_ALLOWED allowed ones (docs/call-policy.md); erased with the user" },
  { pattern: /:\{wh\}:dead(:order)?$/, bound: 'webhook dead letters: at most WEBHOOK_DEAD_LETTERS_MAX, oldest removed first' },
  { pattern: /:\{wh\}:disabled$/, bound: 'one field per configured webhook endpoint a 410 disabled' },
  { pattern: /:\{webhook-\d+\}:first$/, bound: 'per queue partition; trimmed by the webhook workers behind what they acknowledged' },
  { pattern: /:q:/, bound: "BullMQ's per-queue keys: fixed per partition; jobs removed on completion, failed ones by age and count" },
];
