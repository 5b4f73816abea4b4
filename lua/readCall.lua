--[[
  Reads a call for one of its parties, ending it first when its ring window has passed.

  KEYS[1] callKey
  KEYS[2] outboxKey
  KEYS[3] ringingKey  the shard's ring index (lazy expiry takes a due call out of it)

  Arguments, by name (src/redis/scripts.ts scriptDefinitions holds their order):
  userId
  retention   callMs (lua/includes/retention.lua)
  earlyNotice '1' on a single Redis: the change's early notice is published
                      (lua/includes/appendOutbox.lua); '' on a cluster

  Returns { 'ok', fields } or { 'error', 'not_found' } (also for non-members).
]]
local callKey, outboxKey, ringingKey = KEYS[1], KEYS[2], KEYS[3]
--@include "retention"
--@arguments
local retention = parseRetention(retention)

--@include "nowMs"
--@include "callRecord"
--@include "callParties"
--@include "expireIfDue"

local call = loadCall(callKey)
if not isParty(call, userId) then return { 'error', 'not_found' } end
call.early = earlyNotice
expireIfDue(callKey, call, outboxKey, ringingKey, nowMs(), retention)
return { 'ok', callFieldList(call) }
