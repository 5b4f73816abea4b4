-- A new call's fields, from the ARGV both creates share (createCall.lua, createGroupCall.lua:
-- callId, the caller's userId, installationId, display name and handle, and video in ARGV[7]),
-- then `...` (a group call's own fields). The key lives `ttlMs`; on a single Redis its SET … NX
-- guards the request's other writes (lua/includes/callRecord.lua createCallRecord).
--@include "fmtInt"
--@include "callRecord"
local function setNewCall(callKey, call, now, ringTimeoutMs, ttlMs, calleeUserId, ...)
  createCallRecord(callKey, call, ttlMs,
    'callId', ARGV[1],
    'state', 'ringing',
    'revision', '1',
    'callerUserId', ARGV[2],
    'callerInstallationId', ARGV[3],
    'callerDisplayName', ARGV[4],
    'callerHandle', ARGV[5],
    'calleeUserId', calleeUserId,
    'video', ARGV[7],
    'createdAtMs', fmtInt(now),
    'expiresAtMs', fmtInt(now + ringTimeoutMs),
    ...)
end
