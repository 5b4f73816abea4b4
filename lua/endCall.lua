--[[
  Ends a call on request of one of its parties (hang-up, cancel, decline, local failure).

  KEYS[1] callKey
  KEYS[2] opKey
  KEYS[3] outboxKey
  KEYS[4] ringingKey  the shard's ring index (a call that stops ringing leaves it)
  KEYS[5] bindingKey  on a single Redis, the user's operationId binding, taken at the end
                      with the record in it (lua/includes/operationRecord.lua); absent on a cluster

  Arguments, by name (src/redis/scripts.ts scriptDefinitions holds their order):
  userId            the requesting user
  installationId    the requesting installation
  reason            the end reason the requesting phone reports (validated by the API)
  forAll            '1': the caller of a group call ends it for everyone (else it leaves)
  firstUse          on a cluster, '1' when the user's operationId binding was new: no record of
                    this operation exists unless a concurrent replay made it
  retention, operationTtlMs, fingerprint, earlyNotice, traceparent: those of every change of a
                    call (lua/includes/openCallChange.lua)

  The rules are the call machine's `end` rows (docs/protocol.md "The call machine"): an ended
  call and echo reasons change nothing; the caller cancels a ringing call, or ends an accepted one
  from its installation in it (a one-to-one call, or `forAll`); a member in the call leaves, one
  still ringing declines; anything else changes nothing.

  Returns
    { 'fresh' | 'replay', 'ok', 200, fields }
    { 'error', 'not_found' | 'idempotency_conflict' }
]]
local callKey, opKey, outboxKey, ringingKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
--@arguments
--@include "retention"
local retention, operationTtlMs = parseRetention(retention), tonumber(operationTtlMs)

--@include "openCallChange"
--@include "applyDecision"

local readRecord = openOperation(KEYS[5], opKey, fingerprint, firstUse)

local call, now, reply = openCallChange(callKey, opKey, outboxKey, ringingKey, userId, nil, fingerprint, readRecord, retention, earlyNotice, traceparent)
if reply then return reply end
local code, status, fields = runRequest(callKey, call, outboxKey, ringingKey, now, retention,
  { event = 'end', userId = userId, installationId = installationId, reason = reason, forAll = forAll == '1' })
return replyWith(opKey, fingerprint, operationTtlMs, not readRecord, call, code, status, fields)
