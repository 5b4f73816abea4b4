--[[
  Removes one installation's push registration, optionally only if it is unchanged
  (compare-and-clear).

  KEYS[1] registrationsKey  the user's registrations hash (lua/registerPushToken.lua)

  Arguments, by name (src/redis/scripts.ts scriptDefinitions holds their order):
  field             "<installationId>\n<kind>"
  tokenHash         '' to remove unconditionally; else remove only while the stored
                            registration still holds this token
  notAfterMs        '' or: remove only if the registration was last written at or
                            before this time (a token re-registered after a push survives)

  Returns 0 when kept or absent; when removed, the removed registration's tokenHash ('' if it was
  unreadable), so the caller can release the token's owner key (docs/keyspace.md).
]]
local registrationsKey = KEYS[1]
--@arguments

local stored = redis.call('HGET', registrationsKey, field)
if not stored then return 0 end
local ok, registration = pcall(cjson.decode, stored)
if ok and type(registration) == 'table' then
  if tokenHash ~= '' and registration.tokenHash ~= tokenHash then return 0 end
  if notAfterMs ~= '' and tonumber(registration.updatedAtMs) > tonumber(notAfterMs) then return 0 end
end
-- An unreadable registration is never sent to: removing it is always right.
redis.call('HDEL', registrationsKey, field)
if ok and type(registration) == 'table' and type(registration.tokenHash) == 'string' then return registration.tokenHash end
return ''
