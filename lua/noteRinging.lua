--[[
  A ringing receipt (docs/group-calls.md "Ringing receipts"): an installation of an invitee shows
  the incoming call. The first receipt of each invitee is a `ringing` change (subject: that
  invitee), so the caller's devices can say "Ringing" instead of "Calling"; later ones change
  nothing. On a one-to-one call it sets `ringingAtMs` and keeps the revision (the snapshot does
  not show it, and an answer made with the invitation's revision must still match); on a group
  call the member moves from `invited` to `ringing`, a revision of its own.

  KEYS[1] callKey
  KEYS[2] opKey
  KEYS[3] outboxKey
  KEYS[4] ringingKey  the shard's ring index (lazy expiry)
  KEYS[5] bindingKey  on a single Redis, the user's operationId binding, taken at the end with the
                      record in it (lua/includes/operationRecord.lua); absent on a cluster

  Arguments, by name (src/redis/scripts.ts scriptDefinitions holds their order):
  userId            the requesting user
  via               how the invitation reached the installation: socket, apns or fcm (kept
                    with the receipt for the relay's invitation-to-receipt metric)
  retention, operationTtlMs, fingerprint, earlyNotice, traceparent: those of every change of a
                    call (lua/includes/openCallChange.lua)

  Returns
    { 'fresh' | 'replay', 'ringing' | 'ok', 200, fields }  'ringing': this was the invitee's first receipt
    { 'error', 'not_found' | 'forbidden' | 'idempotency_conflict' }
]]
local callKey, opKey, outboxKey, ringingKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
--@arguments
--@include "retention"
local retention, operationTtlMs = parseRetention(retention), tonumber(operationTtlMs)

--@include "openCallChange"
--@include "applyDecision"

-- On a cluster a receipt always reads its record (a concurrent replay may have noted it first).
local readRecord = openOperation(KEYS[5], opKey, fingerprint, nil, true)
local call, now, reply = openCallChange(callKey, opKey, outboxKey, ringingKey, userId, nil, fingerprint, readRecord, retention, earlyNotice, traceparent)
if reply then return reply end
local code, status, fields = runRequest(callKey, call, outboxKey, ringingKey, now, retention, { event = 'ring', userId = userId, via = via })
return replyWith(opKey, fingerprint, operationTtlMs, not readRecord, call, code, status, fields)
