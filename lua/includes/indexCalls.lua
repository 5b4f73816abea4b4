-- One user's call index for one relay batch (docs/call-history.md), in the user's slot: the
-- user's calls in progress (activeKey: callId by createdAtMs; entries leave at the call's end, so
-- the set is gone whenever no call is in progress) and their history (historyKey, and missedKey
-- for the missed calls only: record JSON by endedAtMs). The ops are the quintets ARGV[from..to],
-- in outbox order:
--   'start', callId, createdAtMs, '', ''
--   'end',   callId, endedAtMs,   record JSON, '1' when missed else ''
-- A record is its own member: it starts with `{"callId":"<callId>"`, so records of the same
-- millisecond are ordered by callId (lua/readIndexedRecords.lua reads them). Every step is
-- idempotent and a relay hands a shard's entries over again in their order, so a batch handed
-- over again changes nothing more.
--
-- Retention, by the time of the newest end (Redis time, from the call script): records that
-- ended more than retentionMs before it go, and the keys expire retentionMs + checkMs after it
-- (checkMs: retentionMs / 100, as the event log's age check). That trim runs at most once every
-- checkMs when `checkedAt` (the newest end of the last trim, ms) is known: until then the keys'
-- expiry outlives every new record by retentionMs, and readers skip records past retention by
-- themselves (src/history/callHistory.ts). Returns the newest end when the trim ran now (to be
-- kept as the next `checkedAt`), else nil.
--@include "fmtInt"
local function indexCalls(activeKey, historyKey, missedKey, retentionMs, from, to, checkedAt)
  local newest, missed = nil, false
  for i = from, to, 5 do
    local op, callId, atMs = ARGV[i], ARGV[i + 1], ARGV[i + 2]
    if op == 'start' then
      redis.call('ZADD', activeKey, atMs, callId)
    else
      redis.call('ZREM', activeKey, callId)
      redis.call('ZADD', historyKey, atMs, ARGV[i + 3])
      if ARGV[i + 4] == '1' then
        redis.call('ZADD', missedKey, atMs, ARGV[i + 3])
        missed = true
      end
      if not newest or tonumber(atMs) > newest then newest = tonumber(atMs) end
    end
  end
  if not newest then return nil end
  local checkMs = math.max(1, math.floor(retentionMs / 100))
  local keepMs = retentionMs + checkMs
  if checkedAt and newest >= checkedAt and newest - checkedAt < checkMs then
    -- A missed set that was empty until now gets its expiry.
    if missed then redis.call('PEXPIRE', missedKey, keepMs) end
    return nil
  end
  local cutoff = '(' .. fmtInt(newest - retentionMs)
  local removed = redis.call('ZREMRANGEBYSCORE', historyKey, '-inf', cutoff)
  redis.call('PEXPIRE', historyKey, keepMs)
  if missed or removed > 0 then
    redis.call('ZREMRANGEBYSCORE', missedKey, '-inf', cutoff)
    redis.call('PEXPIRE', missedKey, keepMs)
  end
  return newest
end
