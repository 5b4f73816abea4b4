--[[
  The ring timer: ends a still-ringing call as `unanswered` once its expiresAtMs has passed.

  KEYS[1] callKey
  KEYS[2] outboxKey

  ARGV[1] retentionMs

  Returns
    { 'expired' }            the call was ringing and is now ended as unanswered
    { 'early', msLeft }      still ringing and not yet due (the timer fired early)
    { 'done' }               nothing to do: the call is gone, accepted or ended
]]
local callKey, outboxKey = KEYS[1], KEYS[2]
local retentionMs = tonumber(ARGV[1])

--@include "fmtInt"
--@include "nowMs"
--@include "appendOutbox"
--@include "endCallNow"
--@include "expireIfDue"

local now = nowMs()
if expireIfDue(callKey, outboxKey, now, retentionMs) then return { 'expired' } end
local state, expiresAtMs = unpack(redis.call('HMGET', callKey, 'state', 'expiresAtMs'))
if state == 'ringing' then return { 'early', tonumber(expiresAtMs) - now } end
return { 'done' }
