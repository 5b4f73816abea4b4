--@include "fmtInt"
--@include "streamIds"

-- The event log's age check (lua/appendEvents.lua, at most every ageCheckMs): trims entries older
-- than maxAgeMs before `now` and renews the log's expiry, which so stays at least maxAgeMs ahead
-- of its last append. A stream the append just made (`created`) holds only its new entries and
-- `count` is exact: nothing to read. Returns the newest entry trimmed so far and the count.
local function trimLogByAge(logKey, now, maxAgeMs, ageCheckMs, trimmed, count, created)
  if not created then
    local minId = fmtInt(now - maxAgeMs)
    local aged = redis.call('XREVRANGE', logKey, '(' .. minId, '-', 'COUNT', 1)
    if #aged > 0 then
      if not trimmed or streamIdLess(trimmed, aged[1][1]) then trimmed = aged[1][1] end
      redis.call('XTRIM', logKey, 'MINID', minId)
    end
    count = redis.call('XLEN', logKey)
  end
  redis.call('PEXPIRE', logKey, maxAgeMs + ageCheckMs)
  return trimmed, count
end
