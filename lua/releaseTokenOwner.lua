--[[
  Deletes a push token's owner key while it still names this owner: the registration that held
  the token is gone (removed, or its token replaced), so the key has no more use (docs/keyspace.md).
  A token registered meanwhile by another installation has another owner and keeps its key.

  KEYS[1] ownerKey  the token's owner (PushRegistry.register): "<userId>\n<installationId>"

  Arguments, by name (src/redis/scripts.ts scriptDefinitions holds their order):
  owner     "<userId>\n<installationId>"
  onlyUnexpiring  '1': only while the key has no expiry (a key left by a version before idle
            expiry, src/push/legacyRegistrations.ts; a registration since gave it one); else ''

  Returns 1 when deleted, 0 otherwise.
]]
--@arguments
if redis.call('GET', KEYS[1]) == owner and (onlyUnexpiring ~= '1' or redis.call('PTTL', KEYS[1]) == -1) then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
