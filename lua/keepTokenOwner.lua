--[[
  Moves a push token's owner key's expiry to its registration's (lua/includes/pushIdleExpiry.lua)
  while it still names this owner, so the key neither outlives nor dies before the registration
  that holds the token (docs/keyspace.md "Push registrations"). A key another installation owns
  by now keeps its own expiry.

  KEYS[1] ownerKey    the token's owner (PushRegistry.register): "<userId>\n<installationId>"

  Arguments, by name (src/redis/scripts.ts scriptDefinitions holds their order):
  owner       "<userId>\n<installationId>"
  expireAtMs  the expiry of the owner's registrations hash

  Returns 1 when moved, 0 otherwise.
]]
--@arguments
if redis.call('GET', KEYS[1]) == owner then
  redis.call('PEXPIREAT', KEYS[1], expireAtMs)
  return 1
end
return 0
