-- Ends a call: state, end fields, revision, retention, outbox; takes it out of the shard's ring
-- index (a call that no longer rings needs no sweep). Returns the call's fields.
--@include "fmtInt"
--@include "appendOutbox"
local function endCallNow(callKey, outboxKey, ringingKey, callId, atMs, reason, endedBy, endedByInstallationId, retentionMs)
  redis.call('HSET', callKey,
    'state', 'ended',
    'endedAtMs', fmtInt(atMs),
    'endReason', reason,
    'endedBy', endedBy,
    'endedByInstallationId', endedByInstallationId)
  redis.call('HINCRBY', callKey, 'revision', 1)
  redis.call('PEXPIRE', callKey, retentionMs)
  redis.call('ZREM', ringingKey, callId)
  return appendOutbox(outboxKey, callKey, 'ended', atMs)
end
