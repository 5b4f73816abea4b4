-- A fixed-window rate limit (src/limits/rateLimiter.ts, RATE_* settings): one more hit on `key`,
-- counted and given its expiry in one atomic step, so no counter is ever left without one. The
-- window starts at its first hit and lasts `windowMs`.
--
-- Two forms of the same rule, for the commands they cost:
--  - hitFixedWindow: INCR, and PEXPIRE when the count is 1. One command a hit, two on a window's
--    first: for limits hit many times a window (in-call messages, lua/sendMessage.lua).
--  - hitFixedWindowOpening: SET key 1 PX windowMs NX GET, and INCR when a window was open
--    already. One command on a window's first hit, two after: for limits a subject seldom hits
--    twice in a window, where the first hit is the common one (a user's call creates, a callee's
--    invitations: lua/includes/createLimits.lua; the separate limit calls, lua/hitRateLimit.lua).
-- Each returns 0 when the hit is allowed, else how long until the window ends (ms).

-- A hit over the limit: the window's rest.
local function windowRest(key, windowMs)
  local ttl = redis.call('PTTL', key)
  -- A counter an earlier version left without expiry (its INCR and PEXPIRE were two steps).
  if ttl < 0 then
    redis.call('PEXPIRE', key, windowMs)
    ttl = windowMs
  end
  -- Never 0, which means allowed: a window in its last millisecond still refuses.
  return math.max(ttl, 1)
end

local function hitFixedWindow(key, limit, windowMs)
  local hits = redis.call('INCR', key)
  if hits == 1 then redis.call('PEXPIRE', key, windowMs) end
  if hits <= limit then return 0 end
  return windowRest(key, windowMs)
end

local function hitFixedWindowOpening(key, limit, windowMs)
  local hits = 1
  -- nil back: this hit opened the window (the counter is set with its expiry in one command).
  if redis.call('SET', key, '1', 'PX', windowMs, 'NX', 'GET') then hits = redis.call('INCR', key) end
  if hits <= limit then return 0 end
  return windowRest(key, windowMs)
end
