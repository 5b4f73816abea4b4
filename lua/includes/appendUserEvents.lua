--@include "fmtInt"
--@include "streamIds"
--@include "indexCalls"
--@include "logHolds"
--@include "appendLogEntry"
--@include "trimLogByAge"

-- One user's part of lua/appendEvents.lua (its header describes the keys, the arguments and the
-- guarantees): appends the user's events of one relay batch to their log, trims it, publishes
-- each new entry on the user's live channel (or, with `s.notice`, adds it to the batch's log
-- notice: the entry's live message after its channel's name), keeps the busy marker and files
-- the call index.
-- `k`: the index of the user's first key (6 keys, in the header's order); `at`: the index of the
-- user's block in ARGV; `s`: the settings common to every user of the call. Returns the user's
-- reply { epoch, lastId, appended, registrations }.
local function appendUserEvents(k, at, s)
  local logKey, metaKey, pushKey = KEYS[k], KEYS[k + 1], KEYS[k + 2]
  local activeKey, historyKey, missedKey = KEYS[k + 3], KEYS[k + 4], KEYS[k + 5]
  local channel, shardField, markerOp, markerCall = ARGV[at], ARGV[at + 1], ARGV[at + 2], ARGV[at + 3]
  local indexOps, quads = tonumber(ARGV[at + 5]), tonumber(ARGV[at + 6])
  local firstOp = at + 7
  local firstQuad = firstOp + 5 * indexOps
  local registrations = ARGV[at + 4] == '1' and redis.call('HGETALL', pushKey) or {}

  -- The call index's ops, with the meta's `historyCheckedAt` when this batch read it (else nil:
  -- then the retention trim runs); returns the value to keep, or nil.
  local function index(checkedAt)
    if indexOps == 0 then return nil end
    return indexCalls(activeKey, historyKey, missedKey, s.historyRetentionMs, firstOp, firstQuad - 1, tonumber(checkedAt))
  end

  -- No events for the user in this batch: a busy marker to change, calls to file, or both.
  if quads == 0 then
    if markerOp == 'set' then
      index(nil)
      -- The hash may be new (no log yet): it gets the meta's expiry, as an append would give it.
      if redis.call('HSET', metaKey, 'active', markerCall) == 1 then
        redis.call('PEXPIRE', metaKey, s.metaTtlMs + s.ageCheckMs)
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
  if fresh then epoch, last = s.newEpoch, '0-0' end
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
  for i = firstQuad, firstQuad + 4 * quads - 1, 4 do
    local entryId, payload, only, except = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
    local isNew = appendedNow[entryId] or not mark or streamIdLess(mark, entryId)
    if isNew or not logHolds(logKey, shardTag, entryId) then
      local id = appendLogEntry(logKey, firstNew ~= nil, shardTag .. entryId, payload, only, except)
      if not id then
        lost = previous ~= '0-0'
        created = true
        id = appendLogEntry(logKey, true, shardTag .. entryId, payload, only, except)
      end
      local live = epoch .. '\n' .. last .. '\n' .. id .. '\n' .. only .. '\n' .. except .. '\n' .. payload
      if s.notice then
        s.notice[#s.notice + 1] = channel .. '\n' .. live
      else
        redis.call('SPUBLISH', channel, live)
      end
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
  elseif previous ~= '0-0' and now - parseStreamId(previous) > s.maxAgeMs then
    -- Everything before this append is past the age limit.
    redis.call('XTRIM', logKey, 'MINID', firstNew)
    trimmed, count, agedAt = previous, appended, 0
  else
    count = count + appended
    if count > s.maxLen then
      local doomed = redis.call('XRANGE', logKey, '-', '+', 'COUNT', count - s.maxLen)
      trimmed = doomed[#doomed][1]
      redis.call('XTRIM', logKey, 'MAXLEN', s.maxLen)
      count = s.maxLen
    end
  end
  local checked = false
  if now - agedAt >= s.ageCheckMs then
    trimmed, count = trimLogByAge(logKey, now, s.maxAgeMs, s.ageCheckMs, trimmed, count, created)
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
  if checked then redis.call('PEXPIRE', metaKey, s.metaTtlMs + s.ageCheckMs) end
  return { epoch, last, appended, registrations }
end
