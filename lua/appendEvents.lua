--[[
  Appends relayed events to the event logs of one or more users, trims each log by length and age,
  and publishes each new entry on its user's live channel (sharded Pub/Sub) for the gateways,
  atomically. The live message carries the entry ID and the previous one, so a gateway notices
  when it missed one. In the same step it keeps each user's busy marker and files the batch's
  calls that started or ended in the user's call index (lua/includes/indexCalls.lua): the relay's
  whole work for a batch's users is this script, one call per batch on a single Redis (users'
  keys live in their own hash slots, so a cluster's relay makes one call per user;
  src/events/shardReader.ts). Each user's part is lua/includes/appendUserEvents.lua.

  Per user u (u = 1, 2, ...), six keys, all in the user's hash slot:
  KEYS[6u-5] logKey      the user's event stream
  KEYS[6u-4] metaKey     the user's relay state, a hash: epoch; last (last entry ID); trimmed
                         (newest entry ID trimmed away); n (entries in the log); agedAt (ms of the
                         last age check); per outbox shard `s<shard>`, the last outbox entry whose
                         events were appended here; and `active`, the user's busy marker (the
                         callId of their accepted call, src/calls/activeCalls.ts); and
                         `historyCheckedAt`, the newest end of the call index's last retention trim
  KEYS[6u-3] pushKey     the user's push registrations (lua/registerPushToken.lua), read when
                         the user's withPush asks, so the relay's push handler needs no read of its own
  KEYS[6u-2] activeKey   the user's calls in progress   } the user's call index
  KEYS[6u-1] historyKey  the user's call history        } (lua/includes/indexCalls.lua)
  KEYS[6u]   missedKey   the user's missed calls        }

  Arguments, by name (src/redis/scripts.ts scriptDefinitions holds their order):
  maxLen      maximum number of entries kept in a log
  maxAgeMs    entries older than this are trimmed (checked every ageCheckMs)
  metaTtlMs   how long the epoch outlives the last append
  newEpoch    the epoch to use for a log that has none yet (shared by the call's users:
              an epoch need only differ between the lives of one user's log)
  ageCheckMs  how often age trimming and the keys' expiry are renewed
  historyRetentionMs  how long call history is kept (CALL_RECORD_RETENTION_DAYS)
  noticeChannel  '' on a cluster: each new entry is published on its user's live channel.
              On a single Redis, the call shard's early channel (src/redis/keys.ts
              earlyChannel), which every gateway follows: the batch's new entries are
              published there once, together, as a log notice (src/events/logNotice.ts)
  blocks      the rest (from ARGV[blocksFrom]): one block per user, in the keys' order; a block
              at ARGV[b]:
    ARGV[b]     channel     the user's live channel (shares the user's hash tag)
    ARGV[b+1]   shardField  `s<shard>`: the outbox shard all the user's events come from
    ARGV[b+2]   markerOp    '' | 'set' | 'clear': the busy marker change of this batch (the last one)
    ARGV[b+3]   markerCall  the callId it is about ('clear' only clears a marker naming this call)
    ARGV[b+4]   withPush    '1': also return the user's push registrations
    ARGV[b+5]   indexOps    i: how many call index quintets follow (may be 0)
    ARGV[b+6]   quads       q: how many event quads follow them (may be 0: the user has no
                            events in this batch, only a busy marker, calls to file or a read)
    ARGV[b+7..b+6+5i]       the call index quintets (lua/includes/indexCalls.lua), in outbox order
    ARGV[b+7+5i..b+6+5i+4q] the quads: outbox entry ID, payload JSON, only-installation ('' = any),
                            except-installation ('' = none); in outbox order
    The next block starts at b+7+5i+4q; the last one ends with ARGV (else the call fails before
    any write). The arguments are read in place, never unpacked (a batch may bring thousands).

  Exactly once per outbox entry: the relay may hand the same outbox entry over again (a retried
  batch, a crash between this append and its acknowledgement, a Redis restart). Each log entry
  records the outbox entry it came from (field `e`: "<shard>:<entry ID>"). An entry newer than
  the shard's `s<shard>` mark is new (the common case: a shard's entries reach a user in outbox
  order, and no read is needed); one that is not is looked for in the log, newest first, back to
  an older entry of the same shard (and at least DEDUPE_WINDOW entries, for the brief overlap of
  two relays during a lease handover), and appended only if absent.

  Trimming is exact by length and records the newest entry it removed (`trimmed`), so
  readEvents.lua can tell a cursor that lost events from one that did not. Age trimming and the
  keys' expiry are renewed at most every ageCheckMs (the common append costs no more than its
  writes); the log's expiry always stays at least maxAgeMs ahead of its last append. When the
  previous append is older than maxAgeMs, or the log was lost as a whole, everything before this
  append counts as trimmed.

  Live message: "<epoch>\n<previous id>\n<id>\n<only>\n<except>\n<payload>".
  Returns one reply per user, in order: { epoch, lastId, appended, registrations } (epoch and
  lastId '' and appended 0 for a user with no quads; registrations: HGETALL of pushKey as a
  flat list when asked, else empty).
]]
--@include "appendUserEvents"

-- The live message header of a log notice (src/events/logNotice.ts LOG_NOTICE_EPOCH).
local LOG_NOTICE = '!log\n\n\n\n\n'

--@arguments
local s = {
  maxLen = tonumber(maxLen),
  maxAgeMs = tonumber(maxAgeMs),
  metaTtlMs = tonumber(metaTtlMs),
  newEpoch = newEpoch,
  ageCheckMs = tonumber(ageCheckMs),
  historyRetentionMs = tonumber(historyRetentionMs),
  -- A single Redis: the batch's live copies, gathered for one log notice on noticeChannel.
  notice = noticeChannel ~= '' and {} or nil,
}
-- Each user's block, checked before any write: a layout error fails the call as a whole.
local blocks, at = {}, blocksFrom
for _ = 1, #KEYS / 6 do
  blocks[#blocks + 1] = at
  at = at + 7 + 5 * tonumber(ARGV[at + 5]) + 4 * tonumber(ARGV[at + 6])
end
if #KEYS % 6 ~= 0 or at ~= #ARGV + 1 then
  return redis.error_reply('ERR appendEvents: 6 keys and one argument block per user')
end
local replies = {}
for u, b in ipairs(blocks) do
  replies[u] = appendUserEvents(6 * u - 5, b, s)
end
if s.notice and #s.notice > 0 then
  redis.call('SPUBLISH', noticeChannel, LOG_NOTICE .. table.concat(s.notice, '\n'))
end
return replies
