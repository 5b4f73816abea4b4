-- Generated from src/calls/machine.ts RULES by `npm run docs` (a test fails while it is stale): the rows, first match wins.
local MACHINE_RULES = {
  { event = 'ring', who = 'caller', then_ = { code = 'forbidden', status = 403 } },
  { event = 'ring', member = { invited = true }, then_ = { code = 'ringing', status = 200, member = 'ringing', change = 'ringing' } },
  { event = 'ring', then_ = { code = 'ok', status = 200 } },
  { event = 'answer', who = 'caller', when = { 'pair' }, then_ = { code = 'forbidden', status = 403 } },
  { event = 'answer', member = { joined = true }, when = { 'sameInstallation' }, then_ = { code = 'ok', status = 200 } },
  { event = 'answer', member = { joined = true }, when = { 'otherInstallation' }, then_ = { code = 'answer_conflict', status = 409 } },
  { event = 'answer', call = { ended = true }, then_ = { code = 'answer_conflict', status = 409 } },
  { event = 'answer', when = { 'staleRevision' }, then_ = { code = 'revision_conflict', status = 409 } },
  { event = 'answer', member = { invited = true, ringing = true }, then_ = { code = 'ok', status = 200, member = 'joined', change = 'joined' } },
  { event = 'answer', member = { declined = true, missed = true, busy = true, left = true }, then_ = { code = 'ok', status = 200, member = 'joined', change = 'joined' } },
  { event = 'end', call = { ended = true }, then_ = { code = 'ok', status = 200 } },
  { event = 'end', when = { 'echoReason' }, then_ = { code = 'ok', status = 200 } },
  { event = 'end', who = 'caller', call = { ringing = true }, then_ = { code = 'ok', status = 200, ends = true, change = 'ended' } },
  { event = 'end', who = 'caller', member = { joined = true }, when = { 'sameInstallation', 'forAll' }, then_ = { code = 'ok', status = 200, ends = true, change = 'ended' } },
  { event = 'end', who = 'caller', member = { joined = true }, when = { 'sameInstallation', 'pair' }, then_ = { code = 'ok', status = 200, ends = true, change = 'ended' } },
  { event = 'end', member = { joined = true }, when = { 'sameInstallation' }, then_ = { code = 'ok', status = 200, member = 'left', change = 'member' } },
  { event = 'end', member = { invited = true, ringing = true }, then_ = { code = 'ok', status = 200, member = 'byReason', change = 'member' } },
  { event = 'end', then_ = { code = 'ok', status = 200 } },
  { event = 'ringOut', member = { invited = true, ringing = true }, when = { 'windowPassed' }, then_ = { code = 'ok', status = 200, member = 'missed', change = 'member' } },
  { event = 'ringOut', then_ = { code = 'ok', status = 200 } },
}
local STATE_BY_REASON = { busy = 'busy', unanswered = 'missed' }
