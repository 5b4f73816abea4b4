-- Lazy expiry: a ringing call past expiresAtMs is never seen as ringing. Ends it as `unanswered`
-- (by the system) when due. Returns true when it ended the call. (The ring sweeps,
-- lua/expireDue.lua, end due calls on time; this is the safety net for any that were missed.)
--@include "endCallNow"
local function expireIfDue(callKey, call, outboxKey, ringingKey, atMs, retention)
  if call.values.state == 'ringing' and atMs >= tonumber(call.values.expiresAtMs) then
    endCallNow(callKey, call, outboxKey, ringingKey, atMs, 'unanswered', 'system', '', retention)
    return true
  end
  return false
end
