-- A group call's members (docs/group-calls.md): the call record's `kind` is 'group' and its
-- `members` field holds them as a JSON array, the caller first, then the invitees in the order
-- they were invited. Each member: { userId, state, invitedAtMs, ringUntilMs, installationId,
-- joinedAtMs, ringingAtMs, leftAtMs, endedAtMs } (only what applies). States: joined (the caller
-- from the start), invited, ringing (a receipt came), declined, missed, busy, left. Kept in the
-- call record, under the call's hash tag: a transition reads and writes the call with the one
-- read and write it already does (lua/includes/callRecord.lua).
--@include "fmtInt"
--@include "callRecord"
--@include "callMachineRules"

-- A one-to-one call: a call of two members (docs/protocol.md "The call machine"); how it is
-- stored is the only thing that differs from a group call's (lua/includes/applyDecision.lua).
local function isPair(call)
  return call.values.kind ~= 'group'
end

-- The decoded members, cached on the call table.
local function membersOf(call)
  if not call.members then call.members = cjson.decode(call.values.members) end
  return call.members
end

local function memberOf(call, userId)
  for _, m in ipairs(membersOf(call)) do
    if m.userId == userId then return m end
  end
  return nil
end

-- Whether a member can still be rung into the call (its ring window is open).
local function isRinging(m)
  return m.state == 'invited' or m.state == 'ringing'
end

local function countMembers(call, pred)
  local n = 0
  for _, m in ipairs(membersOf(call)) do
    if pred(m) then n = n + 1 end
  end
  return n
end

-- Writes the members back with the given call fields, and the next revision; `ttlMs` as for
-- setCallFields (lua/includes/callRecord.lua).
local function saveMembers(callKey, call, ttlMs, ...)
  setCallFields(callKey, call, ttlMs, 'members', cjson.encode(call.members), 'revision', nextRevision(call), ...)
end

-- A one-to-one call's two members, as a group call keeps its members (src/calls/participants.ts
-- projects them the same way): the caller in the call from its calling installation until the
-- end, and the callee by the call's state: ringing (with a receipt or not) until its ring window;
-- in the call from the answering installation; once the call ended, `left` after an answer,
-- declined, busy or missed as its phone reported when it ended the ringing, `busy` when never
-- rung, else missed (it still rang at the end).
local function pairMembers(call)
  local v = call.values
  local callee = { userId = v.calleeUserId, installationId = v.answeredByInstallationId }
  if v.state == 'ringing' then
    callee.state = v.ringingAtMs and 'ringing' or 'invited'
    callee.ringUntilMs = tonumber(v.expiresAtMs)
  elseif v.state == 'accepted' then
    callee.state = 'joined'
  elseif v.acceptedAtMs then
    callee.state = 'left'
  elseif v.endedBy == 'callee' then
    callee.state = STATE_BY_REASON[v.endReason] or 'declined'
  elseif v.endReason == 'busy' then
    callee.state = 'busy'
  else
    callee.state = 'missed'
  end
  local caller = { userId = v.callerUserId, installationId = v.callerInstallationId, state = v.state == 'ended' and 'left' or 'joined' }
  return { caller, callee }
end

-- Every call's members, the caller first: a group call's as kept, a one-to-one call's two.
local function callMembers(call)
  if isPair(call) then return pairMembers(call) end
  return membersOf(call)
end

-- The call's ring timer in the shard's ring index: the earliest ring window of a member still
-- ringing; none when nobody rings.
local function scheduleRing(ringingKey, call)
  local due
  for _, m in ipairs(callMembers(call)) do
    if isRinging(m) and (not due or m.ringUntilMs < due) then due = m.ringUntilMs end
  end
  if due and call.values.state ~= 'ended' then
    write('ZADD', ringingKey, fmtInt(due), call.values.callId)
  else
    write('ZREM', ringingKey, call.values.callId)
  end
end
