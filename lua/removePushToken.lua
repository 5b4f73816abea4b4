--[[
  Removes one installation's push registration, optionally only if it is unchanged.

  KEYS[1] registrationKey
  KEYS[2] devicesKey

  ARGV[1] deviceMember        "<installationId>\n<kind>"
  ARGV[2] tokenHash           '' to remove unconditionally; else remove only while the stored
                              registration still holds this token
  ARGV[3] notAfterMs          '' or: remove only if the registration was last written at or
                              before this time (a token re-registered after a push survives)

  Returns 1 when removed, 0 when kept or absent.
]]
local registrationKey, devicesKey = KEYS[1], KEYS[2]
local deviceMember, tokenHash, notAfterMs = ARGV[1], ARGV[2], ARGV[3]

local storedHash, updatedAtMs = unpack(redis.call('HMGET', registrationKey, 'tokenHash', 'updatedAtMs'))
if not storedHash then
  redis.call('SREM', devicesKey, deviceMember)
  return 0
end
if tokenHash ~= '' and storedHash ~= tokenHash then return 0 end
if notAfterMs ~= '' and tonumber(updatedAtMs) > tonumber(notAfterMs) then return 0 end
redis.call('DEL', registrationKey)
redis.call('SREM', devicesKey, deviceMember)
return 1
