--[[
  Publishes relayed in-call messages on one user's live channel (docs/api.md "In-call messages"). They
  are not appended to the user's event log, so they never push its lifecycle events out; the live
  message has an empty epoch and IDs, which tells the gateways it is outside the log.

  KEYS[1] channel   the user's live channel (sharded Pub/Sub; it carries the user's hash tag)

  Arguments (src/redis/scripts.ts scriptDefinitions): only the rest, `messages`: pairs of
  only-installation ('' = every installation), event JSON; in outbox order

  Live message: "\n\n\n<only>\n\n<event>" (the format of lua/appendEvents.lua with no log position).
]]
--@arguments
for i = messagesFrom, #ARGV, 2 do
  redis.call('SPUBLISH', KEYS[1], '\n\n\n' .. ARGV[i] .. '\n\n' .. ARGV[i + 1])
end
return (#ARGV - messagesFrom + 1) / 2
