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
local HISTORY_FIELDS = {
  'callId', 'callerUserId', 'callerInstallationId', 'calleeUserId', 'video', 'createdAtMs', 'acceptedAtMs',
  'answeredByInstallationId', 'endedAtMs', 'endReason', 'endedBy', 'endedByInstallationId',
}
local function endCallNow(callKey, call, outboxKey, ringingKey, atMs, reason, endedBy, endedByInstallationId, retention)
  local wasRinging = call.values.state == 'ringing'
  setCallFields(callKey, call,
    'state', 'ended',
    'revision', nextRevision(call),
    'endedAtMs', fmtInt(atMs),
    'endReason', reason,
    'endedBy', endedBy,
    'endedByInstallationId', endedByInstallationId)
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
