--[[
  Keeps one user's call index (docs/call-history.md), run by the relay for the calls of one batch
  that started or ended, in the user's slot: the user's calls in progress, and their history.

  KEYS[1] activeKey    the user's calls in progress (sorted set: callId by createdAtMs); entries
                       leave at the call's end, so the set is gone whenever no call is in progress
  KEYS[2] allKey       the user's history (sorted set: record JSON by endedAtMs)
  KEYS[3] missedKey    the missed calls only (same)

  ARGV[1] historyRetentionMs   records that ended longer ago than this are removed
  ARGV[2..] quintets, in outbox order:
          'start', callId, createdAtMs, '', ''
          'end',   callId, endedAtMs,   record JSON, '1' when missed else ''

  A record is its own member: it starts with `{"callId":"<callId>"`, so records of the same
  millisecond are ordered by callId (lua/readIndexedRecords.lua reads them). Every step is
  idempotent and a relay hands a shard's entries over again in their order, so a batch handed
  over again changes nothing more. Returns the number of records removed as too old.
]]
local activeKey, allKey, missedKey = KEYS[1], KEYS[2], KEYS[3]
local retentionMs = tonumber(ARGV[1])

--@include "fmtInt"

local newest, missed = nil, false
for i = 2, #ARGV, 5 do
  local op, callId, atMs = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  if op == 'start' then
    redis.call('ZADD', activeKey, atMs, callId)
  else
    redis.call('ZREM', activeKey, callId)
    redis.call('ZADD', allKey, atMs, ARGV[i + 3])
    if ARGV[i + 4] == '1' then
      redis.call('ZADD', missedKey, atMs, ARGV[i + 3])
      missed = true
    end
    if not newest or tonumber(atMs) > newest then newest = tonumber(atMs) end
  end
end
if not newest then return 0 end

-- Retention, by the time of the newest end (Redis time, from the call script): older records go,
-- and the keys expire with the newest record.
local cutoff = '(' .. fmtInt(newest - retentionMs)
local removed = redis.call('ZREMRANGEBYSCORE', allKey, '-inf', cutoff)
redis.call('PEXPIRE', allKey, retentionMs)
if missed or removed > 0 then
  redis.call('ZREMRANGEBYSCORE', missedKey, '-inf', cutoff)
  redis.call('PEXPIRE', missedKey, retentionMs)
end
return removed
