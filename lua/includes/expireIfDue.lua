-- Lazy expiry: a ringing call past expiresAtMs is never seen as ringing. Ends it as `unanswered`
-- (by the system) when due; in a group call, rings out each member past its own ring window
-- (lua/includes/groupRules.lua). Returns true when it changed the call. (The ring sweeps,
-- lua/expireDue.lua, act on time; this is the safety net for any they missed.)
--@include "endCallNow"
--@include "groupRules"
local function expireIfDue(callKey, call, outboxKey, ringingKey, atMs, retention)
  if isGroup(call) then return expireGroupMembers(callKey, call, outboxKey, ringingKey, atMs, retention) end
  if call.values.state == 'ringing' and atMs >= tonumber(call.values.expiresAtMs) then
    endCallNow(callKey, call, outboxKey, ringingKey, atMs, 'unanswered', 'system', '', retention)
    return true
  end
  return false
end
