--[[
  Stores one installation's push registration in its user's registrations hash, the one place
  invitations fan out from (docs/architecture.md "Push").

  KEYS[1] registrationsKey  hash of the user's registrations: field "<installationId>\n<kind>",
                            value JSON { token, tokenHash, appId, iosEnvironment?, updatedAtMs }

  Arguments, by name (src/redis/scripts.ts scriptDefinitions holds their order):
  token
  tokenHash          sha256 of the token (what the owner index and removals compare)
  appId
  iosEnvironment     '' for androidPush
  field              "<installationId>\n<kind>"
  idleMs             PUSH_REGISTRATION_IDLE_DAYS in ms: the user's registrations expire
                             this long after this write unless another one comes first

  Returns { updatedAtMs (string), the tokenHash this registration held before if it was another
  token, else '', expireAtMs (string), then field, tokenHash of every registration of the user,
  this one included } (the caller releases the old token's owner key and moves the owner keys'
  expiry to expireAtMs, docs/keyspace.md).
]]
local registrationsKey = KEYS[1]
--@arguments
local idleMs = tonumber(idleMs)

--@include "fmtInt"
--@include "nowMs"
--@include "pushIdleExpiry"

local nowNum = nowMs()
local now = fmtInt(nowNum)
local registration = { token = token, tokenHash = tokenHash, appId = appId, updatedAtMs = now }
if iosEnvironment ~= '' then registration.iosEnvironment = iosEnvironment end
local before = redis.call('HGET', registrationsKey, field)
local previousHash = ''
if before then
  local ok, old = pcall(cjson.decode, before)
  if ok and type(old) == 'table' and type(old.tokenHash) == 'string' and old.tokenHash ~= tokenHash then previousHash = old.tokenHash end
end
redis.call('HSET', registrationsKey, field, cjson.encode(registration))
local expireAt = nowNum + idleMs
local reply = { now, previousHash, fmtInt(expireAt) }
for _, v in ipairs(keepRegistrationsUntil(registrationsKey, expireAt)) do reply[#reply + 1] = v end
return reply
