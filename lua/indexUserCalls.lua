--[[
  Keeps one user's call index (docs/call-history.md), run by the relay for the calls of one batch
  that started or ended, in the user's slot: the user's active calls, and their history.

  KEYS[1] activeKey    the user's calls that have not ended (sorted set: callId by createdAtMs)
  KEYS[2] historyKey   the user's history records (hash: callId -> record JSON)
  KEYS[3] allKey       their order (sorted set: callId by endedAtMs)
  KEYS[4] missedKey    the missed ones only (same)

  ARGV[1] historyRetentionMs   records older than this (by endedAtMs) are removed
  ARGV[2] activeTtlMs          the active set's expiry, renewed with each call that starts
  ARGV[3..] quintets, in outbox order:
          'start', callId, createdAtMs, '', ''
          'end',   callId, endedAtMs,   record JSON, '1' when missed else ''

  Every step is idempotent, so a relay that hands a batch over again changes nothing more. A start
  replayed after its call's end (a shard taken over late) is not re-added: the record exists.
  Returns the number of records removed as too old.
]]
local activeKey, historyKey, allKey, missedKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local retentionMs, activeTtlMs = tonumber(ARGV[1]), tonumber(ARGV[2])

--@include "nowMs"
--@include "fmtInt"

local ended = false
for i = 3, #ARGV, 5 do
  local op, callId, atMs = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  if op == 'start' then
    if redis.call('HEXISTS', historyKey, callId) == 0 then
      redis.call('ZADD', activeKey, atMs, callId)
      redis.call('PEXPIRE', activeKey, activeTtlMs)
    end
  else
    redis.call('ZREM', activeKey, callId)
    redis.call('HSET', historyKey, callId, ARGV[i + 3])
    redis.call('ZADD', allKey, atMs, callId)
    if ARGV[i + 4] == '1' then redis.call('ZADD', missedKey, atMs, callId) end
    ended = true
  end
end
if not ended then return 0 end

-- Retention: at most TRIM_BATCH old records per call (a user's records age out about as fast as
-- they come in), and the keys expire with the newest record.
local TRIM_BATCH = 100
local cutoff = '(' .. fmtInt(nowMs() - retentionMs)
local old = redis.call('ZRANGE', allKey, '-inf', cutoff, 'BYSCORE', 'LIMIT', 0, TRIM_BATCH)
if #old > 0 then
  redis.call('HDEL', historyKey, unpack(old))
  redis.call('ZREM', allKey, unpack(old))
  redis.call('ZREM', missedKey, unpack(old))
end
for _, key in ipairs({ historyKey, allKey, missedKey }) do redis.call('PEXPIRE', key, retentionMs) end
return #old
