--[[
  One hit on each of one or more fixed-window rate limits (src/limits/rateLimiter.ts): the hits a
  process makes in one turn share this call on a single Redis (on a cluster, one key a call).
  Its limits are on requests a subject seldom makes twice in a window, so each hit takes the form
  that costs one command on a window's first hit (lua/includes/fixedWindow.lua).
  KEYS[i]        a subject's counter
  Arguments (src/redis/scripts.ts scriptDefinitions): only the rest, `rules`: per key, its
  limit (hits allowed per window), then its windowMs
  Returns, per key in order, 0 when the hit is allowed, else the window's rest in ms.
]]
--@arguments
--@include "fixedWindow"
local out = {}
for i = 1, #KEYS do
  local at = rulesFrom + 2 * (i - 1)
  out[i] = hitFixedWindowOpening(KEYS[i], tonumber(ARGV[at]), tonumber(ARGV[at + 1]))
end
return out
