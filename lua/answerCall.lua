--[[
  Answers a call: the first answering installation of an invitee wins for that invitee,
  atomically, and the call is accepted; in a group call a member who is out joins again. The
  rules are the call machine's `answer` rows (docs/protocol.md "The call machine").

  KEYS[1] callKey
  KEYS[2] opKey
  KEYS[3] outboxKey
  KEYS[4] ringingKey  the shard's ring index (the answered call leaves it)
  KEYS[5] bindingKey  on a single Redis, the user's operationId binding, taken at the end
                      with the record in it (lua/includes/operationRecord.lua); absent on a cluster

  Arguments, by name (src/redis/scripts.ts scriptDefinitions holds their order):
  userId            the requesting user (from the session)
  installationId    the answering installation (equals the session's)
  expectedRevision  decimal string, or '' when not given
  firstUse          on a cluster, '1' when the user's operationId binding was new: no record of
                    this operation exists unless a concurrent replay made it
  retention, operationTtlMs, fingerprint, earlyNotice, traceparent: those of every change of a
                    call (lua/includes/openCallChange.lua)

  Returns one of
    { 'fresh' | 'replay', code, status, fields } with code
        'ok' (200)                 this installation won (or had already won)
        'answer_conflict' (409)    another installation won, or the call is no longer ringing
        'revision_conflict' (409)  expectedRevision differs from the ringing call's revision
    { 'error', 'not_found' | 'forbidden' | 'idempotency_conflict' }
]]
local callKey, opKey, outboxKey, ringingKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
--@arguments
--@include "retention"
local retention, operationTtlMs = parseRetention(retention), tonumber(operationTtlMs)

--@include "openCallChange"
--@include "applyDecision"

-- On a cluster a first use skips the record read, except with a revision precondition: that can
-- fail for a concurrent replay and then hold for this request (a rename in between), so it reads.
local readRecord = openOperation(KEYS[5], opKey, fingerprint, firstUse, expectedRevision ~= '')

local call, now, reply = openCallChange(callKey, opKey, outboxKey, ringingKey, userId, nil, fingerprint, readRecord, retention, earlyNotice, traceparent)
if reply then return reply end
local code, status, fields = runRequest(callKey, call, outboxKey, ringingKey, now, retention,
  { event = 'answer', userId = userId, installationId = installationId, expectedRevision = expectedRevision })
return replyWith(opKey, fingerprint, operationTtlMs, not readRecord, call, code, status, fields)
