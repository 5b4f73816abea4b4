-- Joins a group call (answerCall.lua on a group call; docs/group-calls.md "Joining"): the
-- first installation of a member to join wins for that member, and the call is accepted from
-- its first join. A member who declined, missed, was busy or left may join while the call
-- lives. Returns code, status and fields, or nil fields when nothing changed (code, status).
--@include "groupRules"
local function joinGroup(callKey, call, outboxKey, ringingKey, now, userId, installationId, expectedRevision)
  local m = memberOf(call, userId)
  if m.state == 'joined' then
    if m.installationId == installationId then return 'ok', 200, nil end
    return 'answer_conflict', 409, nil
  end
  if call.values.state == 'ended' then return 'answer_conflict', 409, nil end
  if expectedRevision ~= '' and expectedRevision ~= call.values.revision then
    return 'revision_conflict', 409, nil
  end
  -- `joinedFrom`: a member that was ringing has other installations to stop (docs/group-calls.md).
  m.joinedFrom, m.state, m.installationId, m.joinedAtMs = m.state, 'joined', installationId, now
  m.leftAtMs, m.endedAtMs, m.removedFrom = nil, nil, nil
  local accept = {}
  if call.values.state == 'ringing' then accept = { 'state', 'accepted', 'acceptedAtMs', fmtInt(now) } end
  saveMembers(callKey, call, nil, unpack(accept))
  scheduleRing(ringingKey, call)
  return 'ok', 200, appendOutbox(outboxKey, call, 'joined', now, { userId })
end
