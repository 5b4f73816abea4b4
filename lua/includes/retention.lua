-- How long a call's keys live once it can no longer change, as the call scripts take it: callMs
-- (src/calls/retention.ts retentionArg, CALL_RETENTION_MS). `call`: the call record and what is
-- kept with it. (Call history is kept per party, by the relay: docs/call-history.md.)
local function parseRetention(arg)
  local callMs = string.match(arg or '', '^(%d+)$')
  if not callMs then error('retention must be "<callMs>", got ' .. tostring(arg)) end
  return { call = tonumber(callMs) }
end
