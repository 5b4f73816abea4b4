-- Ends a call: state, end fields, revision, retention, outbox; takes it out of the shard's ring
-- index (a call that no longer rings needs no sweep). Returns the call's fields.
--@include "fmtInt"
--@include "callRecord"
--@include "appendOutbox"
local function endCallNow(callKey, call, outboxKey, ringingKey, atMs, reason, endedBy, endedByInstallationId, retentionMs)
  local wasRinging = call.values.state == 'ringing'
  setCallFields(callKey, call,
    'state', 'ended',
    'revision', nextRevision(call),
    'endedAtMs', fmtInt(atMs),
    'endReason', reason,
    'endedBy', endedBy,
    'endedByInstallationId', endedByInstallationId)
  redis.call('PEXPIRE', callKey, retentionMs)
  if wasRinging then redis.call('ZREM', ringingKey, call.values.callId) end
  return appendOutbox(outboxKey, call, 'ended', atMs)
end
