-- Ends a call: state, end fields, revision, retention, outbox; takes it out of the shard's ring
-- index (a call that no longer rings needs no sweep). Returns the call's fields. The parties'
-- history records are filed by the relay from the `ended` outbox entry (docs/call-history.md).
--@include "fmtInt"
--@include "callRecord"
--@include "appendOutbox"
--@include "callMachine"
-- A group call's members take their last state with it (the call machine's `close` rows: one
-- still ringing has missed it, one in it has left); `endedIn` keeps what each was doing, so the
-- relay knows whom the end reaches.
local function closeMembers(call, atMs)
  local members = membersOf(call)
  for _, m in ipairs(members) do
    local to = decideFor(call, members, m, { event = 'close' }).member
    if to then
      m.endedIn, m.state = m.state, to
      if to == 'left' then m.leftAtMs = atMs else m.endedAtMs = atMs end
    end
  end
  return 'members', cjson.encode(call.members)
end

local function endCallNow(callKey, call, outboxKey, ringingKey, atMs, reason, endedBy, endedByInstallationId, retention)
  local pair = isPair(call)
  local wasRinging = not pair or call.values.state == 'ringing'
  local fields = {
    'state', 'ended',
    'revision', nextRevision(call),
    'endedAtMs', fmtInt(atMs),
    'endReason', reason,
    'endedBy', endedBy,
    'endedByInstallationId', endedByInstallationId,
  }
  if not pair then
    fields[#fields + 1], fields[#fields + 2] = closeMembers(call, atMs)
  end
  setCallFields(callKey, call, retention.call, unpack(fields))
  if wasRinging then write('ZREM', ringingKey, call.values.callId) end
  return appendOutbox(outboxKey, call, 'ended', atMs)
end
