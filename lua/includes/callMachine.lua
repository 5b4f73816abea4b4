-- The call machine's interpreter (docs/protocol.md "The call machine"): the rows are
-- src/calls/machine.ts RULES, generated into lua/includes/callMachineRules.lua, and `decide`
-- walks them as src/calls/machine.ts `decide` does, first match wins. Pure: it reads the call's
-- table and the request, and touches no key (lua/includes/applyDecision.lua writes).
--
-- A request `r`: { event, userId, installationId, reason, forAll, expectedRevision, via }; the
-- interpreter adds `call`, `pair` (a one-to-one call), `member` (the requesting member, a table
-- of the call's members: lua/includes/groupMembers.lua callMembers)
-- and `role` ('caller' or 'invitee').
--@include "callMachineRules"
--@include "groupMembers"

local ECHO_REASONS = { remoteEnded = true, callerCancelled = true, answeredElsewhere = true }

-- The guards the rows name (src/calls/machine.ts GUARDS).
local GUARDS = {
  sameInstallation = function(r) return r.member.installationId == r.installationId end,
  otherInstallation = function(r) return r.member.installationId ~= r.installationId end,
  staleRevision = function(r) return (r.expectedRevision or '') ~= '' and r.expectedRevision ~= r.call.values.revision end,
  echoReason = function(r) return ECHO_REASONS[r.reason] == true end,
  forAll = function(r) return r.forAll == true end,
  pair = function(r) return r.pair end,
  windowPassed = function(r) return r.member.ringUntilMs ~= nil and r.now >= r.member.ringUntilMs end,
  busyElsewhere = function(r) return r.busy == true end,
}

-- The first row that holds for `r`, and its place in the table.
local function decide(r)
  for i, row in ipairs(MACHINE_RULES) do
    if row.event == r.event and (not row.who or row.who == r.role)
      and (not row.call or row.call[r.call.values.state])
      and (not row.member or row.member[r.member.state]) then
      local holds = true
      for _, g in ipairs(row.when or {}) do
        if not GUARDS[g](r) then
          holds = false
          break
        end
      end
      if holds then return row, i end
    end
  end
  return redis.error_reply('ERR the call machine has no row for ' .. tostring(r.event))
end

-- Decides `r` for `member`, one of `members` (lua/includes/groupMembers.lua callMembers).
local function decideFor(call, members, member, r)
  r.call, r.pair, r.member = call, isPair(call), member
  r.role = member == members[1] and 'caller' or 'invitee'
  return decide(r)
end

-- Decides the request `r` of its user (a party of `call`: lua/includes/openCallChange.lua
-- checked it).
local function decideRequest(call, r)
  local members = callMembers(call)
  for _, m in ipairs(members) do
    if m.userId == r.userId then return decideFor(call, members, m, r) end
  end
end
