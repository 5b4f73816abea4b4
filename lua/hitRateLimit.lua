--[[
  One hit on a fixed-window rate limit (src/limits/rateLimiter.ts).

  KEYS[1] the subject's counter
  ARGV[1] limit      hits allowed per window
  ARGV[2] windowMs

  Returns 0 when the hit is allowed, else the window's rest in ms.
]]
--@include "fixedWindow"
return hitFixedWindow(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]))
