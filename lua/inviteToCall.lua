--[[
  Rings more members into a live group call (docs/group-calls.md "Inviting more"), on request of
  a participant from its installation in the call. New users become members `invited`; members
  who declined, missed, were busy or left are rung again; members still ringing or in the call
  are left as they are. One `invited` change names the members it moved (its subjects: rung, or
  busy when call waiting is off and they are in another call).

  KEYS[1] callKey
  KEYS[2] opKey
  KEYS[3] outboxKey
  KEYS[4] ringingKey
  KEYS[5] bindingKey  on a single Redis, the user's operationId binding, taken at the end with the
                      record in it (lua/includes/operationRecord.lua); absent on a cluster
  KEYS[6..]           on a single Redis, the counters of the invitees' invitation limits
                      (`limits`), then their policy hashes and allow lists (`policyAt`); none on a
                      cluster

  Arguments, by name (src/redis/scripts.ts scriptDefinitions holds their order):
  userId            the requesting user
  installationId    the requesting installation
  invitees          JSON array of userIds (distinct; checked by the API)
  busy              JSON array: those of them in an accepted call (call waiting off): made `busy`
  ringTimeoutMs
  maxInvitees       GROUP_CALL_MAX_MEMBERS: members besides the caller a call may hold
  limits            on a single Redis, the rules of the counters at KEYS[6..], one per invitee
                    with a limit (lua/includes/createLimits.lua); '' for none
  policyAt          on a single Redis, the index in KEYS of the first invitee's policy hash and
                    allow list, two keys per invitee in `invitees`' order (after the counters);
                    '' on a cluster
  screened          on a cluster, JSON object userId -> verdict read before the script; ''
  screenedReply     as lua/createCall.lua: 'unanswered' or 'busy'
                    Each invitee's own policy is checked against the inviting user, at the time
                    of the invite (docs/call-policy.md "Group calls").
  retention, operationTtlMs, fingerprint, earlyNotice, traceparent: those of every change of a
                    call (lua/includes/openCallChange.lua)

  Returns
    { 'fresh' | 'replay', 'ok', 200, fields }
    { 'error', 'not_found' | 'forbidden' | 'idempotency_conflict' | 'not_group' | 'call_not_active' | 'too_many_members' }
    { 'limited', n, retryAfterMs }  as lua/createCall.lua: nothing else was done
]]
local callKey, opKey, outboxKey, ringingKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
--@arguments
--@include "retention"
local ringTimeoutMs, maxInvitees = tonumber(ringTimeoutMs), tonumber(maxInvitees)
local retention, operationTtlMs = parseRetention(retention), tonumber(operationTtlMs)

--@include "fmtInt"
--@include "appendOutbox"
--@include "openCallChange"
--@include "applyDecision"
--@include "callPolicy"
--@include "nowMs"
--@include "createLimits"

-- Each invitee's call policy, then the invitees' limits, first, as a create's (docs/api.md "Abuse
-- limits"): every invite counts, a replay too, except toward an invitee whose policy screens the
-- inviting user (docs/call-policy.md "Group calls").
local inviteeIds = cjson.decode(invitees)
local verdicts = screenInvitees(inviteeIds, policyAt, screened, userId, nowMs())
local limited = hitCreateLimits(6, limits, verdicts)
if limited then return limited end

-- On a cluster an invite always reads its record: a concurrent replay may have rung the same
-- members first.
local readRecord = openOperation(KEYS[5], opKey, fingerprint, nil, true)

local call, now, reply = openCallChange(callKey, opKey, outboxKey, ringingKey, userId, nil, fingerprint, readRecord, retention, earlyNotice, traceparent)
if reply then return reply end
-- The call machine's `inviteMore` rows (docs/protocol.md "The call machine"), then each invitee's.
local asked = decideRequest(call, { event = 'inviteMore', userId = userId, installationId = installationId })
if asked.status ~= 200 then return refuse(asked.code) end

local busyUsers, subjects = {}, {}
for _, u in ipairs(cjson.decode(busy)) do busyUsers[u] = true end
for u, verdict in pairs(verdicts) do
  if screenedAsBusy(verdict, screenedReply) then busyUsers[u] = true end
end
local members = membersOf(call)
for _, u in ipairs(inviteeIds) do
  local m = memberOf(call, u)
  if not m then
    -- A user new to the call is decided as a member who is out (never in it).
    m = { userId = u, state = 'left' }
    members[#members + 1] = m
  end
  -- The call machine's `invite` rows (docs/protocol.md "The call machine").
  local to = decideFor(call, members, m, { event = 'invite', busy = busyUsers[u] == true }).member
  if to then
    m.invitedAtMs, m.installationId, m.joinedAtMs, m.ringingAtMs, m.leftAtMs = now, nil, nil, nil, nil
    m.byInstallationId, m.joinedFrom, m.removedFrom, m.via = nil, nil, nil, nil
    m.screened = verdicts[u]
    if to == 'busy' then
      m.state, m.ringUntilMs, m.endedAtMs = to, nil, now
    else
      m.state, m.ringUntilMs, m.endedAtMs = to, now + ringTimeoutMs, nil
    end
    subjects[#subjects + 1] = u
  end
end
if #members - 1 > maxInvitees then return refuse('too_many_members') end
if #subjects == 0 then return recordOperation(opKey, fingerprint, 'ok', 200, callFieldList(call), operationTtlMs) end

-- Kept at least through the new ring windows and the retention after them.
local keepMs = ringTimeoutMs + retention.call
saveMembers(callKey, call, redis.call('PTTL', callKey) < keepMs and keepMs or nil)
scheduleRing(ringingKey, call)
local fields = appendOutbox(outboxKey, call, 'invited', now, subjects)
return recordOperation(opKey, fingerprint, 'ok', 200, fields, operationTtlMs)
