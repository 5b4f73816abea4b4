--[[
  Fixed-window rate limit: counts one hit in the current window.

  KEYS[1] counterKey   expires with its window

  ARGV[1] limit        hits allowed per window
  ARGV[2] windowMs

  Returns { allowed (1|0), msUntilReset }.
]]
local counterKey = KEYS[1]
local limit, windowMs = tonumber(ARGV[1]), tonumber(ARGV[2])

local hits = redis.call('INCR', counterKey)
if hits == 1 then redis.call('PEXPIRE', counterKey, windowMs) end
local ttl = redis.call('PTTL', counterKey)
if ttl < 0 then
  -- A counter without expiry (should not happen): give it one rather than block for ever.
  redis.call('PEXPIRE', counterKey, windowMs)
  ttl = windowMs
end
if hits > limit then return { 0, ttl } end
return { 1, ttl }
