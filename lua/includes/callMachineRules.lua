-- Generated from src/calls/machine.ts RULES by `npm run docs` (a test fails while it is stale).
local STATE_BY_REASON = { busy = 'busy', unanswered = 'missed' }

-- The first row that holds for request `r` under guards `G`: its place in RULES, and its outcome.
local function machineRow(r, G)
  local event, role, call, member = r.event, r.role, r.call.values.state, r.member.state
  if event == 'ring' then
    if role == 'caller' then return 1, { code = 'forbidden', status = 403 } end
    if member == 'invited' then return 2, { code = 'ringing', status = 200, member = 'ringing', change = 'ringing' } end
    return 3, { code = 'ok', status = 200 }
  elseif event == 'answer' then
    if role == 'caller' and G.pair(r) then return 4, { code = 'forbidden', status = 403 } end
    if member == 'joined' and G.sameInstallation(r) then return 5, { code = 'ok', status = 200 } end
    if member == 'joined' and G.otherInstallation(r) then return 6, { code = 'answer_conflict', status = 409 } end
    if call == 'ended' then return 7, { code = 'answer_conflict', status = 409 } end
    if G.staleRevision(r) then return 8, { code = 'revision_conflict', status = 409 } end
    if (member == 'invited' or member == 'ringing') then return 9, { code = 'ok', status = 200, member = 'joined', change = 'joined' } end
    if (member == 'declined' or member == 'missed' or member == 'busy' or member == 'left') then return 10, { code = 'ok', status = 200, member = 'joined', change = 'joined' } end
  elseif event == 'end' then
    if call == 'ended' then return 11, { code = 'ok', status = 200 } end
    if G.echoReason(r) then return 12, { code = 'ok', status = 200 } end
    if role == 'caller' and call == 'ringing' then return 13, { code = 'ok', status = 200, ends = true, change = 'ended' } end
    if role == 'caller' and member == 'joined' and G.sameInstallation(r) and G.forAll(r) then return 14, { code = 'ok', status = 200, ends = true, change = 'ended' } end
    if role == 'caller' and member == 'joined' and G.sameInstallation(r) and G.pair(r) then return 15, { code = 'ok', status = 200, ends = true, change = 'ended' } end
    if member == 'joined' and G.sameInstallation(r) then return 16, { code = 'ok', status = 200, member = 'left', change = 'member' } end
    if (member == 'invited' or member == 'ringing') then return 17, { code = 'ok', status = 200, member = 'byReason', change = 'member' } end
    return 18, { code = 'ok', status = 200 }
  elseif event == 'move' then
    if (call == 'ringing' or call == 'ended') then return 19, { code = 'not_in_call', status = 409 } end
    if member == 'joined' and G.sameInstallation(r) then return 20, { code = 'ok', status = 200 } end
    if G.staleRevision(r) then return 21, { code = 'revision_conflict', status = 409 } end
    if member == 'joined' then return 22, { code = 'ok', status = 200, member = 'joined', change = 'moved' } end
    return 23, { code = 'not_in_call', status = 409 }
  elseif event == 'ringOut' then
    if (member == 'invited' or member == 'ringing') and G.windowPassed(r) then return 24, { code = 'ok', status = 200, member = 'missed', change = 'member' } end
    return 25, { code = 'ok', status = 200 }
  elseif event == 'inviteMore' then
    if G.pair(r) then return 26, { code = 'not_group', status = 400 } end
    if call == 'ended' then return 27, { code = 'call_not_active', status = 409 } end
    if member == 'joined' and G.sameInstallation(r) then return 28, { code = 'ok', status = 200 } end
    return 29, { code = 'forbidden', status = 403 }
  elseif event == 'invite' then
    if (member == 'declined' or member == 'missed' or member == 'busy' or member == 'left') and G.busyElsewhere(r) then return 30, { code = 'ok', status = 200, member = 'busy', change = 'invited' } end
    if (member == 'declined' or member == 'missed' or member == 'busy' or member == 'left') then return 31, { code = 'ok', status = 200, member = 'invited', change = 'invited' } end
    return 32, { code = 'ok', status = 200 }
  elseif event == 'message' then
    if call == 'ended' then return 33, { code = 'call_not_active', status = 409 } end
    if member == 'joined' and G.pair(r) and G.otherInstallation(r) then return 34, { code = 'forbidden', status = 403 } end
    if G.pair(r) then return 35, { code = 'ok', status = 200 } end
    return 36, { code = 'not_pair', status = 400 }
  elseif event == 'remove' then
    if G.pair(r) then return 37, { code = 'not_group', status = 400 } end
    if call == 'ended' then return 38, { code = 'ok', status = 200 } end
    if role == 'caller' and call == 'ringing' then return 39, { code = 'ok', status = 200, ends = true, change = 'ended' } end
    if (member == 'joined' or member == 'invited' or member == 'ringing') then return 40, { code = 'ok', status = 200, member = 'left', change = 'member' } end
    return 41, { code = 'ok', status = 200 }
  elseif event == 'close' then
    if (member == 'invited' or member == 'ringing') then return 42, { code = 'ok', status = 200, member = 'missed' } end
    if member == 'joined' then return 43, { code = 'ok', status = 200, member = 'left' } end
    return 44, { code = 'ok', status = 200 }
  end
  return redis.error_reply('ERR the call machine has no row for ' .. tostring(event))
end
