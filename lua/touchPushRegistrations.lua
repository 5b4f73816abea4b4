--[[
  Gives a user's registrations hash written before idle expiry (it has no TTL) the expiry a
  registration write gives it (lua/includes/pushIdleExpiry.lua); one with a TTL is left as it is.

  KEYS[1] registrationsKey  the user's registrations hash (lua/registerPushToken.lua)

  Arguments, by name (src/redis/scripts.ts scriptDefinitions holds their order):
  idleMs            PUSH_REGISTRATION_IDLE_DAYS in ms

  Returns {} when left as it is; else { expireAtMs, then field, tokenHash of every registration }
  (the caller moves their owner keys' expiry with it).
]]
--@arguments
--@include "fmtInt"
--@include "nowMs"
--@include "pushIdleExpiry"
if redis.call('PTTL', KEYS[1]) ~= -1 then return {} end
local expireAt = nowMs() + tonumber(idleMs)
local reply = { fmtInt(expireAt) }
for _, v in ipairs(keepRegistrationsUntil(KEYS[1], expireAt)) do reply[#reply + 1] = v end
return reply
