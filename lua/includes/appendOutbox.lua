-- Appends one change of a call to the shard's outbox: the change name, when it happened, and the
-- whole call after the change. The relay derives every event and push from this entry. Returns
-- the call's fields (the script's reply). A request traced with OpenTelemetry sets `call.trace` to
-- its W3C `traceparent`; the entry then carries it as `tp` (after the call's fields), so the
-- relay's and the push sender's spans join the request's trace (docs/operations.md "Tracing").
--@include "fmtInt"
--@include "callRecord"
local function appendOutbox(outboxKey, call, change, atMs)
  local fields = callFieldList(call)
  local entry = { 'change', change, 'at', fmtInt(atMs) }
  for i = 1, #fields do entry[#entry + 1] = fields[i] end
  if call.trace then
    entry[#entry + 1] = 'tp'
    entry[#entry + 1] = call.trace
  end
  redis.call('XADD', outboxKey, '*', unpack(entry))
  return fields
end
