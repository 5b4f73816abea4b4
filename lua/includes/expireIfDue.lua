-- Lazy expiry: a member still ringing past its ring window is never seen as ringing (the call
-- machine's `ringOut` rows, docs/protocol.md "The call machine"). Rings out every member due, in
-- one change: a one-to-one call then ends as `unanswered`, a group call when no one can still
-- join it (lua/includes/groupRules.lua), both by the system. Returns true when it changed the
-- call. (The ring sweeps, lua/expireDue.lua, act on time; this is the safety net for any they
-- missed.)
--@include "applyDecision"
local function expireIfDue(callKey, call, outboxKey, ringingKey, atMs, retention)
  if call.values.state == 'ended' then return false end
  local members, due = callMembers(call), {}
  for _, m in ipairs(members) do
    if decideFor(call, members, m, { event = 'ringOut', now = atMs }).member then due[#due + 1] = m end
  end
  if #due == 0 then return false end
  ringOut(callKey, call, outboxKey, ringingKey, atMs, retention, due)
  return true
end
