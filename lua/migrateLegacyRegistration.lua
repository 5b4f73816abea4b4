--[[
  Moves one push registration stored by version 0.1.0 (a hash per installation and kind, indexed
  in the user's devices set) into the user's registrations hash (lua/registerPushToken.lua).
  A registration already stored there (written since, by this version) is kept.

  KEYS[1] devicesKey        0.1.0's set of "<installationId>\n<kind>" of the user
  KEYS[2] legacyKey         0.1.0's hash: token, tokenHash, appId, iosEnvironment, updatedAtMs
  KEYS[3] registrationsKey  the user's registrations hash

  Arguments, by name (src/redis/scripts.ts scriptDefinitions holds their order):
  field             "<installationId>\n<kind>"
  idleMs            PUSH_REGISTRATION_IDLE_DAYS in ms (lua/includes/pushIdleExpiry.lua)

  Returns { 0 } when there was none to move (or a newer one won); when a registration was moved,
  { 1, expireAtMs, then field, tokenHash of every registration of the user } (the registrations
  expire as if written now, and the caller moves their owner keys' expiry with them).
]]
local devicesKey, legacyKey, registrationsKey = KEYS[1], KEYS[2], KEYS[3]
--@arguments
local idleMs = tonumber(idleMs)

--@include "fmtInt"
--@include "nowMs"
--@include "pushIdleExpiry"

local stored = redis.call('HGETALL', legacyKey)
local legacy = {}
for i = 1, #stored, 2 do legacy[stored[i]] = stored[i + 1] end
local moved = 0
if legacy.token and legacy.appId then
  local registration = { token = legacy.token, tokenHash = legacy.tokenHash, appId = legacy.appId, updatedAtMs = legacy.updatedAtMs }
  if legacy.iosEnvironment and legacy.iosEnvironment ~= '' then registration.iosEnvironment = legacy.iosEnvironment end
  moved = redis.call('HSETNX', registrationsKey, field, cjson.encode(registration))
end
redis.call('DEL', legacyKey)
redis.call('SREM', devicesKey, field)
if moved == 0 then return { 0 } end
local expireAt = nowMs() + idleMs
local reply = { 1, fmtInt(expireAt) }
for _, v in ipairs(keepRegistrationsUntil(registrationsKey, expireAt)) do reply[#reply + 1] = v end
return reply
