--[[
  Keeps webhook deliveries that exhausted their retries (docs/webhooks.md "Dead letters"), at most
  maxKept of them: the oldest go first.

  KEYS[1] recordsKey   hash: id -> JSON (to find one by id)
  KEYS[2] orderKey     sorted set: JSON by the time it was added (to read them in order,
                       lua/readIndexedRecords.lua); each JSON starts with `{"id":"<id>"`

  Arguments, by name (src/redis/scripts.ts scriptDefinitions holds their order):
  maxKept
  letters   the rest: pairs of id, JSON

  Returns how many old ones were removed to make room.
]]
local recordsKey, orderKey = KEYS[1], KEYS[2]
--@arguments
local maxKept = tonumber(maxKept)

--@include "nowMs"

local now = nowMs()
for i = lettersFrom, #ARGV, 2 do
  local previous = redis.call('HGET', recordsKey, ARGV[i])
  if previous then redis.call('ZREM', orderKey, previous) end
  redis.call('HSET', recordsKey, ARGV[i], ARGV[i + 1])
  redis.call('ZADD', orderKey, now, ARGV[i + 1])
end
local over = redis.call('ZCARD', orderKey) - maxKept
if over <= 0 then return 0 end
local oldest = redis.call('ZPOPMIN', orderKey, over)
local ids = {}
for i = 1, #oldest, 2 do ids[#ids + 1] = string.match(oldest[i], '^{"id":"([^"]*)"') end
redis.call('HDEL', recordsKey, unpack(ids))
return #ids
