--[[
  Removes a member from a group call on request of the app's backend (docs/server-api.md "Remove
  a participant"): a member in the call or still ringing is out (`left`, `removedFrom` keeping
  what it was doing), told `call.ended` `remoteEnded`, and the others get `call.participant`; a
  call left with fewer than two in it ends (lua/includes/groupRules.lua). The caller removed before
  anyone joined cancels the call, as its own end would.

  KEYS[1] callKey
  KEYS[2] outboxKey
  KEYS[3] ringingKey

  Arguments, by name (src/redis/scripts.ts scriptDefinitions holds their order):
  userId       the member to remove
  retention    callMs (lua/includes/retention.lua)
  earlyNotice  '1' on a single Redis: the change's early notice is published
                       (lua/includes/appendOutbox.lua); '' on a cluster

  Returns
    { 'removed', fields }    this request removed the member
    { 'unchanged', fields }  the member was already out, or the call has ended
    { 'error', 'not_found' | 'not_group' | 'not_member' }
]]
local callKey, outboxKey, ringingKey = KEYS[1], KEYS[2], KEYS[3]
--@arguments

--@include "retention"
--@include "nowMs"
--@include "callRecord"
--@include "expireIfDue"
--@include "applyDecision"

local retention = parseRetention(retention)
local call = loadCall(callKey)
if not call then return { 'error', 'not_found' } end
-- The call machine's `remove` rows (docs/protocol.md "The call machine"): the kind's row first,
-- so a user who is not a member is decided as one who is out.
local members = callMembers(call)
local m
for _, each in ipairs(members) do
  if each.userId == userId then m = each end
end
local decision = decideFor(call, members, m or { userId = userId, state = 'left' }, { event = 'remove' })
if decision.status ~= 200 then return { 'error', decision.code } end
if not m then return { 'error', 'not_member' } end
call.early = earlyNotice
local now = nowMs()
expireIfDue(callKey, call, outboxKey, ringingKey, now, retention)
local changed, fields = removeFromCall(callKey, call, outboxKey, ringingKey, now, retention, m)
return { changed and 'removed' or 'unchanged', fields }
