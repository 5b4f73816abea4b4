--[[
  Appends relayed events to one user's event log, trims it by length and age, and publishes each
  new entry on the user's live channel (sharded Pub/Sub) for the gateways, atomically. The live
  message carries the entry ID and the previous one, so a gateway notices when it missed one.
  In the same step it keeps the user's busy marker and files the batch's calls that started or
  ended in the user's call index (lua/includes/indexCalls.lua): the relay's whole work for one
  user and one batch is this one script.

  KEYS[1] logKey      the user's event stream
  KEYS[2] metaKey     the user's relay state, a hash: epoch; last (last entry ID); trimmed
                      (newest entry ID trimmed away); n (entries in the log); agedAt (ms of the
                      last age check); per outbox shard `s<shard>`, the last outbox entry whose
                      events were appended here; and `active`, the user's busy marker (the
                      callId of their accepted call, src/calls/activeCalls.ts); and
                      `historyCheckedAt`, the newest end of the call index's last retention trim
  KEYS[3] pushKey     the user's push registrations (lua/registerPushToken.lua), read when
                      ARGV[10] asks, so the relay's push handler needs no read of its own
  KEYS[4] activeKey   the user's calls in progress   } the user's call index
  KEYS[5] historyKey  the user's call history        } (lua/includes/indexCalls.lua)
  KEYS[6] missedKey   the user's missed calls        }

  ARGV[1] channel     the user's live channel (shares the user's hash tag)
  ARGV[2] maxLen      maximum number of entries kept
  ARGV[3] maxAgeMs    entries older than this are trimmed (checked every ageCheckMs)
  ARGV[4] metaTtlMs   how long the epoch outlives the last append
  ARGV[5] newEpoch    the epoch to use when the log has none yet
  ARGV[6] shardField  `s<shard>`: the outbox shard all these events come from
  ARGV[7] ageCheckMs  how often age trimming and the keys' expiry are renewed
  ARGV[8] markerOp    '' | 'set' | 'clear': the busy marker change of this batch (the last one)
  ARGV[9] markerCall  the callId it is about ('clear' only clears a marker naming this call)
  ARGV[10] withPush   '1': also return the user's push registrations
  ARGV[11] historyRetentionMs  how long call history is kept (CALL_RECORD_RETENTION_DAYS)
  ARGV[12] indexOps   n: how many call index quintets follow (may be 0)
  ARGV[13..12+5n]     the call index quintets (lua/includes/indexCalls.lua), in outbox order
  ARGV[13+5n..] quads outbox entry ID, payload JSON, only-installation ('' = any),
                      except-installation ('' = none); in outbox order (may be none)

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
  Returns { epoch, lastId, appended, registrations } (registrations: HGETALL of pushKey as a
  flat list when asked, else empty).
]]
local logKey, metaKey, pushKey = KEYS[1], KEYS[2], KEYS[3]
local activeKey, historyKey, missedKey = KEYS[4], KEYS[5], KEYS[6]
local channel, maxLen, maxAgeMs = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local metaTtlMs, newEpoch, shardField, ageCheckMs = tonumber(ARGV[4]), ARGV[5], ARGV[6], tonumber(ARGV[7])
local markerOp, markerCall = ARGV[8], ARGV[9]
local historyRetentionMs, indexOps = tonumber(ARGV[11]), tonumber(ARGV[12])
local firstQuad = 13 + 5 * indexOps
local registrations = ARGV[10] == '1' and redis.call('HGETALL', pushKey) or {}

--@include "fmtInt"
--@include "streamIds"
--@include "indexCalls"
--@include "logHolds"
--@include "appendLogEntry"
--@include "trimLogByAge"

-- The call index's ops, with the meta's `historyCheckedAt` when this batch read it (else nil:
-- then the retention trim runs); returns the value to keep, or nil.
local function index(checkedAt)
  if indexOps == 0 then return nil end
  return indexCalls(activeKey, historyKey, missedKey, historyRetentionMs, 13, firstQuad - 1, tonumber(checkedAt))
end

-- No events for the user in this batch: a busy marker to change, calls to file, or both.
if #ARGV < firstQuad then
  if markerOp == 'set' then
    index(nil)
    -- The hash may be new (no log yet): it gets the meta's expiry, as an append would give it.
    if redis.call('HSET', metaKey, 'active', markerCall) == 1 then
      redis.call('PEXPIRE', metaKey, metaTtlMs + ageCheckMs)
    end
  elseif markerOp == 'clear' then
    local active, checkedAt = unpack(redis.call('HMGET', metaKey, 'active', 'historyCheckedAt'))
    if active == markerCall then
      -- The hash exists (it holds the marker): the trim's time can be kept in it.
      local trimmedAt = index(checkedAt)
      if trimmedAt then
        redis.call('HSET', metaKey, 'active', '', 'historyCheckedAt', fmtInt(trimmedAt))
      else
        redis.call('HSET', metaKey, 'active', '')
      end
    else
      index(nil)
    end
  else
    index(nil)
  end
  return { '', '', 0, registrations }
end

local epoch, last, mark, count, agedAt, active, historyCheckedAt =
  unpack(redis.call('HMGET', metaKey, 'epoch', 'last', shardField, 'n', 'agedAt', 'active', 'historyCheckedAt'))
local fresh = not epoch
if fresh then epoch, last = newEpoch, '0-0' end
count, agedAt = tonumber(count) or 0, tonumber(agedAt) or 0
local previous = last
local firstNew
local appended = 0
local shardTag = string.sub(shardField, 2) .. ':'
local lost = false
-- Whether this call made the stream (it did not exist): then it holds exactly this call's entries.
local created = false
-- Outbox entries appended by this call (one entry may have several deliveries for the user).
local appendedNow = {}
for i = firstQuad, #ARGV, 4 do
  local entryId, payload, only, except = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local isNew = appendedNow[entryId] or not mark or streamIdLess(mark, entryId)
  if isNew or not logHolds(logKey, shardTag, entryId) then
    local id = appendLogEntry(logKey, firstNew ~= nil, shardTag .. entryId, payload, only, except)
    if not id then
      lost = previous ~= '0-0'
      created = true
      id = appendLogEntry(logKey, true, shardTag .. entryId, payload, only, except)
    end
    redis.call('SPUBLISH', channel, epoch .. '\n' .. last .. '\n' .. id .. '\n' .. only .. '\n' .. except .. '\n' .. payload)
    firstNew = firstNew or id
    last = id
    if not mark or streamIdLess(mark, entryId) then mark = entryId end
    appendedNow[entryId] = true
    appended = appended + 1
  end
end
local marker
if markerOp == 'set' or (markerOp == 'clear' and active == markerCall) then
  marker = markerOp == 'set' and markerCall or ''
end
if appended == 0 then
  index(nil)
  if marker then redis.call('HSET', metaKey, 'active', marker) end
  return { epoch, last, 0, registrations }
end

-- Redis's time of this append, from the ID XADD gave the newest entry.
local now = parseStreamId(last)
local trimmed
local meta = { 'last', last, shardField, mark }
if marker then
  meta[#meta + 1], meta[#meta + 2] = 'active', marker
end
if fresh then
  meta[#meta + 1], meta[#meta + 2] = 'epoch', epoch
end
if lost then
  trimmed, count, agedAt = previous, appended, 0
elseif previous ~= '0-0' and now - parseStreamId(previous) > maxAgeMs then
  -- Everything before this append is past the age limit.
  redis.call('XTRIM', logKey, 'MINID', firstNew)
  trimmed, count, agedAt = previous, appended, 0
else
  count = count + appended
  if count > maxLen then
    local doomed = redis.call('XRANGE', logKey, '-', '+', 'COUNT', count - maxLen)
    trimmed = doomed[#doomed][1]
    redis.call('XTRIM', logKey, 'MAXLEN', maxLen)
    count = maxLen
  end
end
local checked = false
if now - agedAt >= ageCheckMs then
  trimmed, count = trimLogByAge(logKey, now, maxAgeMs, ageCheckMs, trimmed, count, created)
  agedAt = now
  checked = true
end
if trimmed then
  meta[#meta + 1], meta[#meta + 2] = 'trimmed', trimmed
end
local historyTrimmedAt = index(historyCheckedAt)
if historyTrimmedAt then
  meta[#meta + 1], meta[#meta + 2] = 'historyCheckedAt', fmtInt(historyTrimmedAt)
end
meta[#meta + 1], meta[#meta + 2] = 'n', count
meta[#meta + 1], meta[#meta + 2] = 'agedAt', fmtInt(agedAt)
redis.call('HSET', metaKey, unpack(meta))
-- After the HSET, which may have made the hash (an expiry set before would have been lost).
if checked then redis.call('PEXPIRE', metaKey, metaTtlMs + ageCheckMs) end
return { epoch, last, appended, registrations }
