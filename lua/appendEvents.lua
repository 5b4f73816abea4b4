--[[
  Appends events to one user's event log, trims it by length and age, and publishes each event
  to the user's live channel for the gateways, atomically (the live message carries the entry
  ID and the previous one, so a gateway notices when it missed a message).

  KEYS[1] logKey      the user's event stream
  KEYS[2] metaKey     hash: epoch, last (last entry ID), trimmed (newest entry ID trimmed away)

  ARGV[1] channel     the user's live Pub/Sub channel
  ARGV[2] maxLen      maximum number of entries kept
  ARGV[3] maxAgeMs    entries older than this are trimmed
  ARGV[4] metaTtlMs   how long the epoch outlives the last append
  ARGV[5] newEpoch    the epoch to use when the log has none yet
  ARGV[6..] triples   payload JSON, only-installation ('' = any), except-installation ('' = none)

  Live message: "<epoch>\n<previous id>\n<id>\n<only>\n<except>\n<payload>".
  Trimming is exact and records the newest entry it removed in the meta hash (`trimmed`), so
  readEvents.lua can tell a cursor that lost events from one that did not: Redis does not track
  trimmed IDs itself (XINFO's max-deleted-entry-id only follows XDEL).
  Returns { epoch, lastId }.
]]
local logKey, metaKey = KEYS[1], KEYS[2]
local channel, maxLen, maxAgeMs = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local metaTtlMs, newEpoch = tonumber(ARGV[4]), ARGV[5]

--@include "fmtInt"
--@include "nowMs"
--@include "logEpoch"
--@include "streamIds"

local epoch, last = logEpoch(metaKey, newEpoch, metaTtlMs)
-- The newest entry removed by retention. A log that expired as a whole lost everything up to
-- `last`, which then counts as trimmed too.
local trimmed
if last ~= '0-0' and redis.call('EXISTS', logKey) == 0 then trimmed = last end
for i = 6, #ARGV, 3 do
  local payload, only, except = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local id
  if only ~= '' then
    id = redis.call('XADD', logKey, '*', 'p', payload, 'o', only)
  elseif except ~= '' then
    id = redis.call('XADD', logKey, '*', 'p', payload, 'x', except)
  else
    id = redis.call('XADD', logKey, '*', 'p', payload)
  end
  redis.call('PUBLISH', channel, epoch .. '\n' .. last .. '\n' .. id .. '\n' .. only .. '\n' .. except .. '\n' .. payload)
  last = id
end

-- Retention: by length, then by age; remember the newest entry removed.
local excess = redis.call('XLEN', logKey) - maxLen
if excess > 0 then
  local doomed = redis.call('XRANGE', logKey, '-', '+', 'COUNT', excess)
  if not trimmed or streamIdLess(trimmed, doomed[#doomed][1]) then trimmed = doomed[#doomed][1] end
  redis.call('XTRIM', logKey, 'MAXLEN', maxLen)
end
local minId = fmtInt(nowMs() - maxAgeMs)
local aged = redis.call('XREVRANGE', logKey, '(' .. minId, '-', 'COUNT', 1)
if #aged > 0 then
  if not trimmed or streamIdLess(trimmed, aged[1][1]) then trimmed = aged[1][1] end
  redis.call('XTRIM', logKey, 'MINID', minId)
end
if trimmed then redis.call('HSET', metaKey, 'trimmed', trimmed) end
redis.call('HSET', metaKey, 'last', last)
redis.call('PEXPIRE', logKey, maxAgeMs)
redis.call('PEXPIRE', metaKey, metaTtlMs)
return { epoch, last }
