-- The call machine (docs/protocol.md "The call machine"): the rows are src/calls/machine.ts
-- RULES, compiled into lua/includes/callMachineRules.lua, and `decide` runs them, first match
-- wins, as src/calls/machine.ts `decide` does. Pure: it reads the call's table and the request,
-- and touches no key (lua/includes/applyDecision.lua writes). Each returns the row's outcome:
-- { code, status, member?, ends?, change? } (src/calls/machine.ts Outcome).
--
-- A request `r`: { event, userId, installationId, reason, forAll, expectedRevision, via }; the
-- interpreter adds `call`, `pair` (a one-to-one call), `member` (the requesting member, a table
-- of the call's members: lua/includes/groupMembers.lua callMembers)
-- and `role` ('caller' or 'invitee').
--@include "callMachineRules"
--@include "groupMembers"

local ECHO_REASONS = { remoteEnded = true, callerCancelled = true, answeredElsewhere = true, movedElsewhere = true }

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

-- The outcome of the first row that holds for `r` (lua/includes/callMachineRules.lua), and its
-- place in src/calls/machine.ts RULES.
local function decide(r)
  local index, outcome = machineRow(r, GUARDS)
  return outcome, index
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
