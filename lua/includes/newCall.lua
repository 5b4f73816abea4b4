-- A new call's fields, from the arguments both creates share (createCall.lua, createGroupCall.lua,
-- bound by name before this include: callId, the caller's userId, installationId, display name
-- and handle, and video), then `...` (a group call's own fields). The key lives `ttlMs`; on a single Redis its SET … NX
-- guards the request's other writes (lua/includes/callRecord.lua createCallRecord).
--@include "fmtInt"
--@include "callRecord"
local function setNewCall(callKey, call, now, ringTimeoutMs, ttlMs, calleeUserId, ...)
  createCallRecord(callKey, call, ttlMs,
    'callId', callId,
    'state', 'ringing',
    'revision', '1',
    'callerUserId', callerUserId,
    'callerInstallationId', callerInstallationId,
    'callerDisplayName', callerDisplayName,
    'callerHandle', callerHandle,
    'calleeUserId', calleeUserId,
    'video', video,
    'createdAtMs', fmtInt(now),
    'expiresAtMs', fmtInt(now + ringTimeoutMs),
    ...)
end
