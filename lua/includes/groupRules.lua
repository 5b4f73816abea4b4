-- The rules that end a group call or ring its members out (docs/group-calls.md "When a group
-- call ends"). Each change is its own outbox entry with its own revision: a `member` change
-- names the members it moved (its subjects), and an end that follows is an `ended` change.
--@include "endCallNow"
--@include "groupMembers"

-- Ends the call when it can no longer hold a conversation:
--   - before anyone joined, once no invitee can still join (every one declined, missed or was
--     busy): `busy` when all were busy, `unanswered` when one missed, else `declined`;
--   - after a join, once fewer than two participants are in it: `remoteEnded`.
-- Both by the system. Returns true when it ended the call.
local function endGroupIfOver(callKey, call, outboxKey, ringingKey, atMs, retention)
  if call.values.state == 'ended' then return false end
  local joined = countMembers(call, function(m) return m.state == 'joined' end)
  if call.values.state == 'accepted' then
    if joined >= 2 then return false end
    endCallNow(callKey, call, outboxKey, ringingKey, atMs, 'remoteEnded', 'system', '', retention)
    return true
  end
  if countMembers(call, isRinging) > 0 then return false end
  local reason = 'declined'
  local invitees = countMembers(call, function(m) return m.userId ~= call.values.callerUserId end)
  if countMembers(call, function(m) return m.state == 'busy' end) == invitees then
    reason = 'busy'
  elseif countMembers(call, function(m) return m.state == 'missed' end) > 0 then
    reason = 'unanswered'
  end
  endCallNow(callKey, call, outboxKey, ringingKey, atMs, reason, 'system', '', retention)
  return true
end

-- Appends a `member` change for the given members (subjects), after their states changed in
-- `call.members`; then ends the call if that left it over. Returns the reply's fields.
local function memberChange(callKey, call, outboxKey, ringingKey, atMs, retention, subjects)
  saveMembers(callKey, call, nil)
  scheduleRing(ringingKey, call)
  local fields = appendOutbox(outboxKey, call, 'member', atMs, subjects)
  if endGroupIfOver(callKey, call, outboxKey, ringingKey, atMs, retention) then fields = callFieldList(call) end
  return fields
end
