--[[
  Takes or renews a relay's lease on one outbox shard: only the holder reads that shard, so a
  call's changes are relayed one after another, in order.

  KEYS[1] leaseKey     the shard's lease (shares the shard's hash tag)

  Arguments, by name (src/redis/scripts.ts scriptDefinitions holds their order):
  holder       the relay's consumer name
  leaseMs      lease duration
  release      '1' to give the lease up (only if held)

  Returns 1 when `holder` holds the lease after the call, 0 otherwise.
]]
local leaseKey = KEYS[1]
--@arguments
local leaseMs, release = tonumber(leaseMs), release == '1'

local current = redis.call('GET', leaseKey)
if release then
  if current == holder then redis.call('DEL', leaseKey) end
  return 0
end
if current == holder then
  redis.call('PEXPIRE', leaseKey, leaseMs)
  return 1
end
if not current then
  redis.call('SET', leaseKey, holder, 'PX', leaseMs)
  return 1
end
return 0
