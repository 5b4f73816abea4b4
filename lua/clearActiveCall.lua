--[[
  Clears a user's active-call marker, but only if it still names this call (a newer call of
  the user may have replaced it).

  KEYS[1] activeKey
  ARGV[1] callId

  Returns 1 when cleared, 0 otherwise.
]]
local activeKey, callId = KEYS[1], ARGV[1]
if redis.call('GET', activeKey) == callId then
  redis.call('DEL', activeKey)
  return 1
end
return 0
