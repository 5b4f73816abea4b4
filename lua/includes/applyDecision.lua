-- Applies the call machine's decision (lua/includes/callMachine.lua) to the stored call: the
-- only writer of a party's request. The rows say which change it is; this is how each kind of
-- call keeps and tells it:
--   - a group call stores its members and appends one change per member move, then ends by
--     itself when it can no longer hold a conversation (lua/includes/groupRules.lua);
--   - a one-to-one call stores the callee's part in its own fields and tells it as the one-to-one
--     events have always told it (docs/protocol.md): an answer is `answered`, a receipt keeps the
--     revision, and any move that leaves a call of two over ends it as that member's own end.
-- Returns the fields of the call for the request's reply, or nil when the row changes nothing.
--@include "fmtInt"
--@include "callRecord"
--@include "appendOutbox"
--@include "endCallNow"
--@include "groupRules"
--@include "callMachine"
--@include "operationRecord"

local function sideOf(r)
  return r.role == 'caller' and 'caller' or 'callee'
end

-- Moves the member in the call to the requesting installation (the `move` rows: docs/protocol.md
-- "Moving a call"). The installation it leaves is kept as `movedFrom` for the change's deliveries
-- (it is told `movedElsewhere`); a call of two keeps its two installations in its own fields.
local function applyMove(callKey, call, outboxKey, now, r)
  local m = r.member
  if r.pair then
    local field = r.role == 'caller' and 'callerInstallationId' or 'answeredByInstallationId'
    setCallFields(callKey, call, nil, field, r.installationId, 'movedFromInstallationId', m.installationId, 'revision', nextRevision(call))
  else
    m.movedFrom, m.installationId = m.installationId, r.installationId
    saveMembers(callKey, call, nil)
  end
  return appendOutbox(outboxKey, call, 'moved', now, { m.userId })
end

local function applyToGroup(callKey, call, outboxKey, ringingKey, now, retention, r, t)
  local m = r.member
  if t.ends then
    return endCallNow(callKey, call, outboxKey, ringingKey, now, r.reason, sideOf(r), r.installationId, retention)
  end
  if t.member == 'joined' then
    -- `joinedFrom`: a member that was ringing has other installations to stop (docs/group-calls.md).
    m.joinedFrom, m.state, m.installationId, m.joinedAtMs = m.state, 'joined', r.installationId, now
    m.leftAtMs, m.endedAtMs, m.removedFrom = nil, nil, nil
    local accept = {}
    if call.values.state == 'ringing' then accept = { 'state', 'accepted', 'acceptedAtMs', fmtInt(now) } end
    saveMembers(callKey, call, nil, unpack(accept))
    scheduleRing(ringingKey, call)
    return appendOutbox(outboxKey, call, t.change, now, { m.userId })
  end
  if t.member == 'ringing' then
    m.state, m.ringingAtMs, m.via = 'ringing', now, r.via
    saveMembers(callKey, call, nil)
    return appendOutbox(outboxKey, call, t.change, now, { m.userId })
  end
  if t.member == 'left' then
    m.state, m.leftAtMs = 'left', now
  else
    m.state, m.endedAtMs, m.byInstallationId = STATE_BY_REASON[r.reason] or 'declined', now, r.installationId
  end
  return memberChange(callKey, call, outboxKey, ringingKey, now, retention, { m.userId })
end

local function applyToPair(callKey, call, outboxKey, ringingKey, now, retention, r, t)
  if t.member == 'joined' then
    setCallFields(callKey, call, nil,
      'state', 'accepted',
      'revision', nextRevision(call),
      'answeredByInstallationId', r.installationId,
      'acceptedAtMs', fmtInt(now))
    -- Its expiry stays as the create set it (ring timeout + retention, later than retention from
    -- this answer); ending it sets the retention from the end.
    write('ZREM', ringingKey, call.values.callId)
    return appendOutbox(outboxKey, call, 'answered', now)
  end
  if t.member == 'ringing' then
    -- The receipt keeps the revision: the snapshot does not show it, and an answer made with the
    -- invitation's revision must still match (docs/group-calls.md "Ringing receipts").
    setCallFields(callKey, call, nil, 'ringingAtMs', fmtInt(now), 'ringingVia', r.via)
    return appendOutbox(outboxKey, call, 'ringing', now, { r.member.userId })
  end
  -- Anything else leaves a call of two over: it ends as the member's own end, with its reason (a
  -- ringing callee's hang-up is its decline).
  local reason = r.reason
  if t.member == 'byReason' and reason == 'localHangup' then reason = 'declined' end
  return endCallNow(callKey, call, outboxKey, ringingKey, now, reason, sideOf(r), r.installationId, retention)
end

-- Rings out the members `due` (the `ringOut` rows moved them to `missed`), in one change: a call
-- of two ends as `unanswered`; a group call tells the members' move, and ends if that left it
-- over. Both by the system.
local function ringOut(callKey, call, outboxKey, ringingKey, atMs, retention, due)
  if isPair(call) then
    return endCallNow(callKey, call, outboxKey, ringingKey, atMs, 'unanswered', 'system', '', retention)
  end
  local subjects = {}
  for _, m in ipairs(due) do
    m.state, m.endedAtMs = 'missed', atMs
    subjects[#subjects + 1] = m.userId
  end
  return memberChange(callKey, call, outboxKey, ringingKey, atMs, retention, subjects)
end

-- Removes the member `m` of a group call for the app's backend (the `remove` rows). Returns
-- whether it changed the call, and the call's fields.
local function removeFromCall(callKey, call, outboxKey, ringingKey, now, retention, m)
  local t = decideFor(call, membersOf(call), m, { event = 'remove' })
  if t.ends then
    return true, endCallNow(callKey, call, outboxKey, ringingKey, now, 'localHangup', 'caller', '', retention)
  end
  if not t.member then return false, callFieldList(call) end
  m.removedFrom, m.state, m.leftAtMs = m.state, t.member, now
  return true, memberChange(callKey, call, outboxKey, ringingKey, now, retention, { m.userId })
end

-- Decides the request `r` on `call` and applies it. Returns code, status and the reply's fields
-- (nil when nothing changed).
local function runRequest(callKey, call, outboxKey, ringingKey, now, retention, r)
  local t = decideRequest(call, r)
  if not (t.member or t.ends) then return t.code, t.status, nil end
  if t.change == 'moved' then return t.code, t.status, applyMove(callKey, call, outboxKey, now, r) end
  local apply = r.pair and applyToPair or applyToGroup
  return t.code, t.status, apply(callKey, call, outboxKey, ringingKey, now, retention, r, t)
end

-- A request's reply from its outcome: a refusal (403) leaves no trace (lua/includes/
-- operationRecord.lua refuse); an unchanged call's snapshot, or the changed one, is recorded as
-- the operation's answer. `skippedRead`: the script did not look for a recorded answer first.
local function replyWith(opKey, fingerprint, operationTtlMs, skippedRead, call, code, status, fields)
  if status == 403 then return refuse(code) end
  if not fields then return recordUnchanged(opKey, fingerprint, code, status, callFieldList(call), operationTtlMs, skippedRead) end
  return recordOperation(opKey, fingerprint, code, status, fields, operationTtlMs)
end
