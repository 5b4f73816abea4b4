-- Ends a call: state, end fields, revision, retention, outbox; takes it out of the shard's ring
-- index (a call that no longer rings needs no sweep), and writes the call's history record in
-- the same step. Returns the call's fields.
--
-- The history record (docs/call-history.md) is a hash at the call key + ':history' (same hash
-- tag, so the same slot; src/redis/keys.ts callHistory spells it too): what every ended call
-- leaves behind for `retention.history`, long after the call hash itself is gone. It is derived
-- here rather than declared by each of the scripts that can end a call.
--@include "fmtInt"
--@include "callRecord"
--@include "appendOutbox"
--@include "groupMembers"
local HISTORY_FIELDS = {
  'callId', 'callerUserId', 'callerInstallationId', 'calleeUserId', 'video', 'createdAtMs', 'acceptedAtMs',
  'answeredByInstallationId', 'endedAtMs', 'endReason', 'endedBy', 'endedByInstallationId',
  'kind', 'title', 'members',
}
-- A group call's members take their last state with it: one still ringing has missed it, one in
-- it has left; `endedIn` keeps what each was doing, so the relay knows whom the end reaches.
local function closeMembers(call, atMs)
  for _, m in ipairs(membersOf(call)) do
    if isRinging(m) then
      m.endedIn, m.state, m.endedAtMs = m.state, 'missed', atMs
    elseif m.state == 'joined' then
      m.endedIn, m.state, m.leftAtMs = 'joined', 'left', atMs
    end
  end
  return 'members', cjson.encode(call.members)
end

local function endCallNow(callKey, call, outboxKey, ringingKey, atMs, reason, endedBy, endedByInstallationId, retention)
  local group = isGroup(call)
  local wasRinging = group or call.values.state == 'ringing'
  local fields = {
    'state', 'ended',
    'revision', nextRevision(call),
    'endedAtMs', fmtInt(atMs),
    'endReason', reason,
    'endedBy', endedBy,
    'endedByInstallationId', endedByInstallationId,
  }
  if group then
    fields[#fields + 1], fields[#fields + 2] = closeMembers(call, atMs)
  end
  setCallFields(callKey, call, unpack(fields))
  redis.call('PEXPIRE', callKey, retention.call)
  if wasRinging then redis.call('ZREM', ringingKey, call.values.callId) end
  local historyKey, record = callKey .. ':history', {}
  for _, name in ipairs(HISTORY_FIELDS) do
    local v = call.values[name]
    if v and v ~= '' then
      record[#record + 1] = name
      record[#record + 1] = v
    end
  end
  redis.call('HSET', historyKey, unpack(record))
  redis.call('PEXPIRE', historyKey, retention.history)
  return appendOutbox(outboxKey, call, 'ended', atMs)
end
