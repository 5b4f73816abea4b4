--[[
  Appends events to one user's event log, trims it by length and age, and publishes each event
  to the user's live channel for the gateways, atomically (the live message carries the entry
  ID and the previous one, so a gateway notices when it missed a message).

  KEYS[1] logKey      the user's event stream
  KEYS[2] metaKey     hash: epoch, last (last entry ID)

  ARGV[1] channel     the user's live Pub/Sub channel
  ARGV[2] maxLen      approximate maximum number of entries kept
  ARGV[3] maxAgeMs    entries older than this are trimmed
  ARGV[4] metaTtlMs   how long the epoch outlives the last append
  ARGV[5] newEpoch    the epoch to use when the log has none yet
  ARGV[6..] triples   payload JSON, only-installation ('' = any), except-installation ('' = none)

  Live message: "<epoch>\n<previous id>\n<id>\n<only>\n<except>\n<payload>".
  Returns { epoch, lastId }.
]]
local logKey, metaKey = KEYS[1], KEYS[2]
local channel, maxLen, maxAgeMs = ARGV[1], ARGV[2], tonumber(ARGV[3])
local metaTtlMs, newEpoch = tonumber(ARGV[4]), ARGV[5]

--@include "fmtInt"
--@include "nowMs"
--@include "logEpoch"

local epoch, last = logEpoch(metaKey, newEpoch, metaTtlMs)
for i = 6, #ARGV, 3 do
  local payload, only, except = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local id
  if only ~= '' then
    id = redis.call('XADD', logKey, 'MAXLEN', '~', maxLen, '*', 'p', payload, 'o', only)
  elseif except ~= '' then
    id = redis.call('XADD', logKey, 'MAXLEN', '~', maxLen, '*', 'p', payload, 'x', except)
  else
    id = redis.call('XADD', logKey, 'MAXLEN', '~', maxLen, '*', 'p', payload)
  end
  redis.call('PUBLISH', channel, epoch .. '\n' .. last .. '\n' .. id .. '\n' .. only .. '\n' .. except .. '\n' .. payload)
  last = id
end
redis.call('XTRIM', logKey, 'MINID', '~', fmtInt(nowMs() - maxAgeMs))
redis.call('HSET', metaKey, 'last', last)
redis.call('PEXPIRE', logKey, maxAgeMs)
redis.call('PEXPIRE', metaKey, metaTtlMs)
return { epoch, last }
