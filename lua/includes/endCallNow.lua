-- Ends a call: state, end fields, revision, retention, outbox. Returns the call's fields.
local function endCallNow(callKey, outboxKey, atMs, reason, endedBy, endedByInstallationId, retentionMs)
  redis.call('HSET', callKey,
    'state', 'ended',
    'endedAtMs', fmtInt(atMs),
    'endReason', reason,
    'endedBy', endedBy,
    'endedByInstallationId', endedByInstallationId)
  redis.call('HINCRBY', callKey, 'revision', 1)
  redis.call('PEXPIRE', callKey, retentionMs)
  return appendOutbox(outboxKey, callKey, 'ended', atMs)
end
