--[[
  Moves an accepted call to another installation of a member in it (docs/protocol.md "Moving a
  call"): the member goes on from this installation, the one it leaves is told `movedElsewhere`,
  and the call keeps its callId and stays accepted. The rules are the call machine's `move` rows.

  KEYS as lua/answerCall.lua: callKey, opKey, outboxKey, ringingKey, and on a single Redis the
  user's operationId binding.

  Arguments, by name (src/redis/scripts.ts scriptDefinitions holds their order):
  userId            the requesting user (from the session)
  installationId    the installation that claims the call (equals the session's)
  expectedRevision  the revision the installation saw (decimal string): two installations that
                    move at once saw the same one, and the second gets revision_conflict
  firstUse          on a cluster, '1' when the user's operationId binding was new
  retention, operationTtlMs, fingerprint, earlyNotice, traceparent: those of every change of a
                    call (lua/includes/openCallChange.lua)

  Returns one of
    { 'fresh' | 'replay', code, status, fields } with code
        'ok' (200)                 the call is on this installation (or already was)
        'revision_conflict' (409)  the call changed since expectedRevision
        'not_in_call' (409)        the call is not accepted, or the user is not in it
    { 'error', 'not_found' | 'forbidden' | 'idempotency_conflict' }
]]
local callKey, opKey, outboxKey, ringingKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
--@arguments
--@include "retention"
local retention, operationTtlMs = parseRetention(retention), tonumber(operationTtlMs)

--@include "openCallChange"
--@include "applyDecision"

local readRecord = openOperation(KEYS[5], opKey, fingerprint, firstUse, true)

local call, now, reply = openCallChange(callKey, opKey, outboxKey, ringingKey, userId, nil, fingerprint, readRecord, retention, earlyNotice, traceparent)
if reply then return reply end
local code, status, fields = runRequest(callKey, call, outboxKey, ringingKey, now, retention,
  { event = 'move', userId = userId, installationId = installationId, expectedRevision = expectedRevision })
return replyWith(opKey, fingerprint, operationTtlMs, not readRecord, call, code, status, fields)
