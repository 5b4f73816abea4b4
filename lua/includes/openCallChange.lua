-- The opening that every request-driven change of an existing call shares (answer, end, rename):
--   1. a replayed request gets its recorded reply (`mayHaveRecord` false: the request's
--      operationId binding was new, so the read is skipped; see recordUnchanged);
--   2. the call is loaded; a user who is not a party gets not_found (the call's existence is not
--      revealed); with `role` 'caller' (a rename), anyone else gets forbidden, before anything
--      changes, and a binding the script made is undone (refuse). Who may make the requests the
--      call machine decides is in its rows (lua/includes/callMachine.lua);
--   3. the request's trace context is noted for the outbox entry (docs/operations.md "Tracing"),
--      and whether its early notice is published ('1', else ''; appendOutbox.lua);
--   4. a ringing call past its expiresAtMs is ended as unanswered first (lazy expiry).
-- Returns `call, now`, or `nil, nil, reply` when the script must answer `reply` at once.
--
-- The arguments every such script takes besides its own (src/redis/scripts.ts CHANGE_ARGS):
--   retention       callMs (lua/includes/retention.lua)
--   operationTtlMs  how long the operation's record is kept
--   fingerprint     hash of the request; a replay must carry the same
--   earlyNotice     '1' on a single Redis: the change's early notice is published
--                   (lua/includes/appendOutbox.lua); '' on a cluster
--   traceparent     optional: the request's W3C trace context (docs/operations.md "Tracing")
--@include "nowMs"
--@include "callRecord"
--@include "callParties"
--@include "expireIfDue"
--@include "operationRecord"
local function openCallChange(callKey, opKey, outboxKey, ringingKey, userId, role, fingerprint, mayHaveRecord, retention, early, traceparent)
  local replay = replayOperation(opKey, fingerprint, mayHaveRecord)
  if replay then return nil, nil, replay end
  local call = loadCall(callKey)
  if not isParty(call, userId) then return nil, nil, refuse('not_found') end
  if role == 'caller' and userId ~= call.values.callerUserId then return nil, nil, refuse('forbidden') end
  call.trace, call.early = traceparent, early
  local now = nowMs()
  expireIfDue(callKey, call, outboxKey, ringingKey, now, retention)
  return call, now
end
