--[[
  Fixed-window rate limit: counts one hit in the current window.

  KEYS[1] counterKey   expires with its window

  ARGV[1] limit        hits allowed per window
  ARGV[2] windowMs

  Returns { 1, 0 } when allowed, { 0, msUntilReset } when not (the window's rest is read only
  then: an allowed hit costs INCR alone, PEXPIRE too when it opens a window).
]]
local counterKey = KEYS[1]
local limit, windowMs = tonumber(ARGV[1]), tonumber(ARGV[2])

local hits = redis.call('INCR', counterKey)
if hits == 1 then redis.call('PEXPIRE', counterKey, windowMs) end
if hits <= limit then return { 1, 0 } end
local ttl = redis.call('PTTL', counterKey)
if ttl < 0 then
  -- A counter without expiry (should not happen): give it one rather than block for ever.
  redis.call('PEXPIRE', counterKey, windowMs)
  ttl = windowMs
end
return { 0, ttl }
