--[[
  Changes the caller's display name on a ringing or accepted call (docs/api.md "Rename"); the callee's
  devices are told with a `call.renamed` event.

  KEYS[1] callKey
  KEYS[2] opKey
  KEYS[3] outboxKey
  KEYS[4] ringingKey  the shard's ring index (lazy expiry takes a due call out of it)
  KEYS[5] bindingKey  on a single Redis, the user's operationId binding, taken at the end
                      with the record in it (lua/includes/operationRecord.lua); absent on a cluster

  Arguments, by name (src/redis/scripts.ts scriptDefinitions holds their order):
  userId            the requesting user
  displayName       already cut to 256 UTF-8 bytes
  maxRenames        renames one call may have (each is an event in the callee's log)
  retention, operationTtlMs, fingerprint, earlyNotice, traceparent: those of every change of a
                    call (lua/includes/openCallChange.lua)

  An ended call, or the same name again, is returned unchanged (no revision, no event). A call
  renamed maxRenames times already is refused (`rename_limit`): one call cannot fill the
  callee's event log.

  Returns
    { 'fresh' | 'replay', 'ok', 200, fields }
    { 'error', 'not_found' | 'forbidden' | 'idempotency_conflict' | 'rename_limit' }
]]
local callKey, opKey, outboxKey, ringingKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
--@arguments
--@include "retention"
--@include "fmtInt"
local retention, operationTtlMs, maxRenames = parseRetention(retention), tonumber(operationTtlMs), tonumber(maxRenames)

--@include "appendOutbox"
--@include "openCallChange"

-- On a cluster a rename always reads its record (a concurrent replay may have renamed first).
local readRecord = openOperation(KEYS[5], opKey, fingerprint, nil, true)

local call, now, reply = openCallChange(callKey, opKey, outboxKey, ringingKey, userId, 'caller', fingerprint, readRecord, retention, earlyNotice, traceparent)
if reply then return reply end
if call.values.state == 'ended' or call.values.callerDisplayName == displayName then
  return recordOperation(opKey, fingerprint, 'ok', 200, callFieldList(call), operationTtlMs)
end
local renames = tonumber(call.values.renames or '0')
if renames >= maxRenames then return { 'error', 'rename_limit' } end
setCallFields(callKey, call, nil, 'callerDisplayName', displayName, 'revision', nextRevision(call), 'renames', fmtInt(renames + 1))
local fields = appendOutbox(outboxKey, call, 'renamed', now)
return recordOperation(opKey, fingerprint, 'ok', 200, fields, operationTtlMs)
