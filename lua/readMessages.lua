--[[
  Reads one call's in-call messages meant for one installation (docs/api.md "In-call messages"): how a
  device that reconnects during a call recovers messages it missed (they are not in its event log).

  KEYS[1] callKey
  KEYS[2] messagesKey

  Arguments, by name (src/redis/scripts.ts scriptDefinitions holds their order):
  userId          the reader (must be a party of the call)
  installationId
  afterSeq        only messages with a larger per-sender seq

  Returns { 'ok', { event JSON, ... } } in send order, or { 'error', 'not_found' }.
]]
local callKey, messagesKey = KEYS[1], KEYS[2]
--@arguments
local afterSeq = tonumber(afterSeq)

--@include "callRecord"
--@include "callParties"

local call = loadCall(callKey)
if not isParty(call, userId) then return { 'error', 'not_found' } end
local out = {}
for _, e in ipairs(redis.call('XRANGE', messagesKey, '-', '+')) do
  local f = {}
  for j = 1, #e[2], 2 do f[e[2][j]] = e[2][j + 1] end
  if f.t == userId and (f.o == '' or f.o == installationId) and tonumber(f.s) > afterSeq then out[#out + 1] = f.m end
end
return { 'ok', out }
