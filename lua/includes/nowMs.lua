-- Current time in epoch milliseconds, from the Redis server clock (app servers' clocks do not matter).
local function nowMs()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
