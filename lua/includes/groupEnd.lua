-- An end request on a group call (endCall.lua; docs/group-calls.md "Leaving, declining,
-- cancelling"), by the member's state:
--   - the caller before anyone joined: cancels the call for everyone still ringing;
--   - the caller with `forAll`, from its installation in the call: ends it for everyone;
--   - a member in the call, from its installation in the call: leaves;
--   - a member still ringing: declines (`busy` and `unanswered` reported by its phone are kept
--     as busy and missed); its other installations stop ringing.
-- Anything else changes nothing. Returns the reply's fields, or nil when nothing changed.
--@include "groupRules"
local STATE_FOR_REASON = { busy = 'busy', unanswered = 'missed' }
local function endForGroupMember(callKey, call, outboxKey, ringingKey, now, retention, userId, installationId, reason, forAll)
  local m = memberOf(call, userId)
  if m.userId == call.values.callerUserId then
    -- The caller's own reason, as in a one-to-one call: `failed` when its side could not go on
    -- (docs/protocol.md "End reasons"); any other end of its is a hang-up.
    local callerReason = reason == 'failed' and 'failed' or 'localHangup'
    if call.values.state == 'ringing' then
      return endCallNow(callKey, call, outboxKey, ringingKey, now, callerReason, 'caller', installationId, retention)
    end
    if m.state ~= 'joined' or m.installationId ~= installationId then return nil end
    if forAll then
      return endCallNow(callKey, call, outboxKey, ringingKey, now, callerReason, 'caller', installationId, retention)
    end
  end
  if m.state == 'joined' then
    if m.installationId ~= installationId then return nil end
    m.state, m.leftAtMs = 'left', now
  elseif isRinging(m) then
    m.state, m.endedAtMs, m.byInstallationId = STATE_FOR_REASON[reason] or 'declined', now, installationId
  else
    return nil
  end
  return memberChange(callKey, call, outboxKey, ringingKey, now, retention, { userId })
end
