-- Appends one change of a call to the shard's outbox: the change name, when it happened, and the
-- whole call after the change. The relay derives every event and push from this entry. Returns
-- the call's fields (the script's reply). A request traced with OpenTelemetry sets `call.trace` to
-- its W3C `traceparent`; the entry then carries it as `tp` (after the call's fields), so the
-- relay's and the push sender's spans join the request's trace (docs/operations.md "Tracing").
--
-- Early notice: when `call.early` is '1' (a single Redis, and a change a device asked for), the
-- same entry is also published at once, once, on the call shard's early channel (the outbox key
-- with `early` for `outbox`: src/redis/keys.ts earlyChannel), in the order the changes happen
-- (scripts run one at a time). Every gateway subscribes to it and derives the events of the
-- parties it holds, sent ahead of the relay without a cursor; the relay still appends the events
-- to the logs and publishes them with their cursors (docs/signaling.md "Early events"). On a
-- cluster the gateways' subscriptions are per user only, and only the relay publishes.
--@include "fmtInt"
--@include "callRecord"
-- The live message's header for an early notice (src/events/eventLog.ts EARLY_EPOCH).
local EARLY_NOTICE = '!early\n\n\n\n\n'
local function appendOutbox(outboxKey, call, change, atMs, subjects)
  local fields = callFieldList(call)
  local entry = { 'change', change, 'at', fmtInt(atMs) }
  for i = 1, #fields do entry[#entry + 1] = fields[i] end
  if subjects then
    entry[#entry + 1] = 'sub'
    entry[#entry + 1] = cjson.encode(subjects)
  end
  if call.trace then
    entry[#entry + 1] = 'tp'
    entry[#entry + 1] = call.trace
  end
  write('XADD', outboxKey, '*', unpack(entry))
  if call.early == '1' then
    write('SPUBLISH', (string.gsub(outboxKey, 'outbox$', 'early')), EARLY_NOTICE .. cjson.encode(entry))
  end
  return fields
end
