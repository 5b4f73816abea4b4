-- How long a call's keys live once it can no longer change, as the call scripts take it:
-- "<callMs>:<historyMs>" (src/calls/store.ts retentionArg). `call`: the call hash (and what is
-- kept with it); `history`: the call's history record (docs/call-history.md).
local function parseRetention(arg)
  local callMs, historyMs = string.match(arg or '', '^(%d+):(%d+)$')
  if not callMs then error('retention must be "<callMs>:<historyMs>", got ' .. tostring(arg)) end
  return { call = tonumber(callMs), history = tonumber(historyMs) }
end
