-- Lazy expiry: a ringing call past expiresAtMs is never seen as ringing. Ends it as `unanswered`
-- (by the system) when due. Returns true when it ended the call.
local function expireIfDue(callKey, outboxKey, atMs, retentionMs)
  local state, expiresAtMs = unpack(redis.call('HMGET', callKey, 'state', 'expiresAtMs'))
  if state == 'ringing' and atMs >= tonumber(expiresAtMs) then
    endCallNow(callKey, outboxKey, atMs, 'unanswered', 'system', '', retentionMs)
    return true
  end
  return false
end
