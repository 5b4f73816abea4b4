--[[
  A relay's heartbeat in the set of live relays; forgets relays silent for longer than a lease.
  The relays size their share of the outbox shards by the number of live relays.

  KEYS[1] relaysKey   sorted set: relay consumer name by its last heartbeat (Redis time, ms)

  ARGV[1] relay       this relay's consumer name
  ARGV[2] leaseMs     a relay silent this long is gone
  ARGV[3] leaving     '1' when the relay stops (it leaves the set at once)

  Returns the live relays' names, sorted.
]]
local relaysKey = KEYS[1]
local relay, leaseMs, leaving = ARGV[1], tonumber(ARGV[2]), ARGV[3] == '1'

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
