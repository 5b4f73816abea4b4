-- A fixed-window rate limit (src/limits/rateLimiter.ts, RATE_* settings): one more hit on `key`,
-- counted and given its expiry in one atomic step, so no counter is ever left without one.
-- Returns 0 when the hit is allowed, else how long until the window ends (ms).
local function hitFixedWindow(key, limit, windowMs)
  local hits = redis.call('INCR', key)
  if hits == 1 then redis.call('PEXPIRE', key, windowMs) end
  if hits <= limit then return 0 end
  local ttl = redis.call('PTTL', key)
  -- A counter an earlier version left without expiry (its INCR and PEXPIRE were two steps).
  if ttl < 0 then
    redis.call('PEXPIRE', key, windowMs)
    ttl = windowMs
  end
  -- Never 0, which means allowed: a window in its last millisecond still refuses.
  return math.max(ttl, 1)
end
