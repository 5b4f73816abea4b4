--[[
  Stores one installation's push registration and indexes it under its user for fan-out.

  KEYS[1] registrationKey   hash: token, tokenHash, appId, iosEnvironment, updatedAtMs
  KEYS[2] devicesKey        set of "<installationId>\n<kind>" of the user

  ARGV[1] token
  ARGV[2] tokenHash          sha256 of the token (what the owner index and removals compare)
  ARGV[3] appId
  ARGV[4] iosEnvironment     '' for androidPush
  ARGV[5] deviceMember       "<installationId>\n<kind>"

  Returns updatedAtMs (string).
]]
local registrationKey, devicesKey = KEYS[1], KEYS[2]
local token, tokenHash, appId, iosEnvironment, deviceMember = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]

--@include "fmtInt"
--@include "nowMs"

local now = fmtInt(nowMs())
redis.call('DEL', registrationKey)
redis.call('HSET', registrationKey, 'token', token, 'tokenHash', tokenHash, 'appId', appId, 'updatedAtMs', now)
if iosEnvironment ~= '' then redis.call('HSET', registrationKey, 'iosEnvironment', iosEnvironment) end
redis.call('SADD', devicesKey, deviceMember)
return now
