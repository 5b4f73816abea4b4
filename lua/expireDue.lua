--[[
  One ring sweep step over one call shard: ends the given calls as `unanswered` if they are still
  in the shard's ring index and due. The callIds come from a read of the index just before
  (ZRANGE BYSCORE, which may be stale by now); each is checked again here, atomically, so two
  sweepers, or a sweeper and an answer, can never both end a call (compare-and-delete).

  KEYS[1]    ringingKey   the shard's ring index (sorted set: callId by expiresAtMs)
  KEYS[2]    outboxKey    the shard's outbox stream
  KEYS[3..]  callKeys     one per callId, same order (all in the shard)

  Arguments, by name (src/redis/scripts.ts scriptDefinitions holds their order):
  retention    callMs (lua/includes/retention.lua)
  earlyNotice  '1' on a single Redis: the change's early notice is published
               (lua/includes/appendOutbox.lua); '' on a cluster
  callIds      the rest: one per call key, same order

  A group call's entry is due at its earliest member's ring window: the step rings out the
  members due (lua/includes/groupRules.lua) and moves the entry to the next window.

  Returns { ended, lateMs... }: how many calls this step ended or rang members out of, then for
  each of them how long after its due time it did (the sweep's lateness).
]]
local ringingKey, outboxKey = KEYS[1], KEYS[2]
--@include "retention"
--@arguments
local retention = parseRetention(retention)

--@include "nowMs"
--@include "callRecord"
--@include "expireIfDue"

local now = nowMs()
local out = { 0 }
-- The i-th callId's key is KEYS[i - callIdsFrom + 3].
for i = callIdsFrom, #ARGV do
  local callId, callKey = ARGV[i], KEYS[i - callIdsFrom + 3]
  local due = redis.call('ZSCORE', ringingKey, callId)
  if due and tonumber(due) <= now then
    local call = loadCall(callKey)
    if call then call.early = earlyNotice end
    if call and expireIfDue(callKey, call, outboxKey, ringingKey, now, retention) then
      out[1] = out[1] + 1
      out[#out + 1] = now - tonumber(due)
    elseif call then
      -- Nobody to ring out (answered, declined or ended meanwhile by a script that predates the
      -- entry's removal): the timer moves to the next ring window of a member still ringing, or goes.
      scheduleRing(ringingKey, call)
    else
      -- The call is gone: the entry is stale.
      redis.call('ZREM', ringingKey, callId)
    end
  end
end
return out
