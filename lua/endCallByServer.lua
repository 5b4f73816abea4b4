--[[
  Ends a call on request of the app's backend (the server API, docs/server-api.md "End a call"),
  whatever its state and whoever its parties: as a ring timeout does, by the system, so each side's
  devices are told the same reason.

  KEYS[1] callKey
  KEYS[2] outboxKey
  KEYS[3] ringingKey   the shard's ring index

  Arguments, by name (src/redis/scripts.ts scriptDefinitions holds their order):
  reason       the end reason both sides are told (validated by the API)
  retention    callMs (lua/includes/retention.lua)
  earlyNotice  '1' on a single Redis: the change's early notice is published
                       (lua/includes/appendOutbox.lua); '' on a cluster

  Returns
    { 'ended', fields }      this request ended it
    { 'unchanged', fields }  it had already ended (a retry, or it ended meanwhile)
    { 'error', 'not_found' }
]]
local callKey, outboxKey, ringingKey = KEYS[1], KEYS[2], KEYS[3]
--@arguments

--@include "retention"
--@include "nowMs"
--@include "callRecord"
--@include "expireIfDue"

local retention = parseRetention(retention)
local call = loadCall(callKey)
if not call then return { 'error', 'not_found' } end
call.early = earlyNotice
local now = nowMs()
-- A ringing call past its deadline ended as unanswered, before anyone asked.
expireIfDue(callKey, call, outboxKey, ringingKey, now, retention)
if call.values.state == 'ended' then return { 'unchanged', callFieldList(call) } end
return { 'ended', endCallNow(callKey, call, outboxKey, ringingKey, now, reason, 'system', '', retention) }
