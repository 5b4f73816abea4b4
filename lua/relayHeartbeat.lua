--[[
  A relay's heartbeat in the set of live relays; forgets relays silent for longer than a lease.
  The relays size their share of the outbox shards by the number of live relays.

  KEYS[1] relaysKey   sorted set: relay consumer name by its last heartbeat (Redis time, ms)

  Arguments, by name (src/redis/scripts.ts scriptDefinitions holds their order):
  relay       this relay's consumer name
  leaseMs     a relay silent this long is gone
  leaving     '1' when the relay stops (it leaves the set at once)

  Returns the live relays' names, sorted.
]]
local relaysKey = KEYS[1]
--@arguments
local leaseMs, leaving = tonumber(leaseMs), leaving == '1'

--@include "nowMs"

local now = nowMs()
if leaving then
  redis.call('ZREM', relaysKey, relay)
else
  redis.call('ZADD', relaysKey, now, relay)
end
redis.call('ZREMRANGEBYSCORE', relaysKey, '-inf', now - leaseMs)
redis.call('PEXPIRE', relaysKey, leaseMs * 2)
return redis.call('ZRANGE', relaysKey, 0, -1)
