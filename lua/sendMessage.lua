--[[
  Stores one in-call message (docs/api.md "In-call messages") and publishes it, or queues its
  publication, atomically.

  KEYS[1] callKey
  KEYS[2] opKey        the operation's idempotency record
  KEYS[3] outboxKey    the shard's outbox: where the relay publishes the message from, on a cluster
  KEYS[4] ringingKey   the shard's ring index (lazy expiry takes a due call out of it)
  KEYS[5] messagesKey  the call's message stream (kept apart from the users' event logs)
  KEYS[6] seqKey       the call's per-sender sequence counters (a hash: userId -> last seq)
  KEYS[7] limitKey     the sender's fixed-window message counter on this call (RATE_CALL_MESSAGES_PER_10S)
  KEYS[8] bindingKey   on a single Redis, the user's operationId binding (src/calls/store.ts
                       bindOperation): bound here, so a message costs one round trip. Absent on
                       a cluster, where it lives in the user's slot and the caller binds first.

  Arguments, by name (src/redis/scripts.ts scriptDefinitions holds their order):
  userId
  installationId
  eventId          chosen by the server for this operation (a replay returns the first one)
  payloadJson      the message's payload, a JSON object (already validated and bounded)
  retention        callMs (lua/includes/retention.lua)
  operationTtlMs
  fingerprint
  maxKept          messages kept in the call's stream (older ones are trimmed)
  messagesTtlMs    the stream and counters expire this long after the last message (the
                   stream at most the call's retention after it)
  liveChannel      on a single Redis, the users' live channel with a NUL where the userId
                   goes: the message is published here, to the recipient, in this script
                   (no relay hop), as is a lazy expiry's early notice. '' on a cluster,
                   where the recipient's channel lives in another slot: the relay
                   publishes it from the outbox entry.
  limit            messages per window and sender on this call; 0: no limit
  windowMs         the limit's window

  Who may send: the caller's calling installation, and while ringing any callee installation,
  after the answer only the answering one. Who receives: the caller's messages go to every
  callee installation while ringing (an early offer), to the answering one after; the callee's go
  to the caller's calling installation.

  Returns
    { 'fresh' | 'replay', 'ok', 200, { eventId, seq, occurredAtMs } }
    { 'error', 'not_found' | 'forbidden' | 'idempotency_conflict' | 'call_not_active' | 'not_pair' }
    { 'limited', retryAfterMs }   over the limit: nothing sent, nothing bound
  A refused message leaves no trace: a binding this script made is undone.
]]
local callKey, opKey, outboxKey, ringingKey, messagesKey, seqKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
--@arguments
--@include "retention"
local retention, operationTtlMs = parseRetention(retention), tonumber(operationTtlMs)
local maxKept, messagesTtlMs = tonumber(maxKept), tonumber(messagesTtlMs)
local limitKey, bindingKey, limit, windowMs = KEYS[7], KEYS[8], tonumber(limit), tonumber(windowMs)

--@include "nowMs"
--@include "fmtInt"
--@include "callRecord"
--@include "callParties"
--@include "callMachine"
--@include "expireIfDue"
--@include "operationRecord"
--@include "liveChannel"
--@include "fixedWindow"

-- The limit first: a message over it is refused before anything is bound or read.
if limit > 0 then
  local retryAfterMs = hitFixedWindow(limitKey, limit, windowMs)
  if retryAfterMs > 0 then return { 'limited', retryAfterMs } end
end

-- A binding this script made new (a single Redis) means no record exists: the binding and the
-- record are written by one script with one expiry, so a concurrent copy of the message finds the
-- binding taken and reads the record. On a cluster the binding was taken apart (store.ts), and a
-- message always reads its record: two concurrent copies must not both store it.
local conflict, firstUse = bindOperation(bindingKey, fingerprint, operationTtlMs, nil)
if conflict then return { 'error', 'idempotency_conflict' } end
local replay = replayOperation(opKey, fingerprint, not firstUse)
if replay then return replay end

local call = loadCall(callKey)
if not isParty(call, userId) then return refuse('not_found') end
-- A lazy expiry's early notice goes where the message would (lua/includes/appendOutbox.lua).
call.early = liveChannel ~= '' and '1' or ''
local now = nowMs()
expireIfDue(callKey, call, outboxKey, ringingKey, now, retention)
-- The call machine's `message` rows (docs/protocol.md "The call machine"): between the two
-- parties of a one-to-one call, each from its installation in the call.
local asked = decideRequest(call, { event = 'message', userId = userId, installationId = installationId })
if asked.status ~= 200 then return refuse(asked.code) end

local v = call.values
local to, only
if userId == v.callerUserId then
  to = v.calleeUserId
  only = v.state == 'accepted' and v.answeredByInstallationId or ''
else
  to, only = v.callerUserId, v.callerInstallationId
end

local seq = redis.call('HINCRBY', seqKey, userId, 1)
-- Built by concatenation so the payload's JSON text reaches the recipient unchanged.
local event = '{"schemaVersion":1,"eventId":' .. cjson.encode(eventId) ..
  ',"type":"call.message","callId":' .. cjson.encode(v.callId) ..
  ',"occurredAtMs":' .. fmtInt(now) ..
  ',"fromInstallationId":' .. cjson.encode(installationId) ..
  ',"seq":' .. fmtInt(seq) ..
  ',"payload":' .. payloadJson .. '}'
redis.call('XADD', messagesKey, 'MAXLEN', maxKept, '*', 'f', userId, 't', to, 'o', only, 's', seq, 'm', event)
-- Never kept past the call's own retention: a deployment that keeps calls shorter than an hour
-- keeps their messages no longer (docs/keyspace.md "Per call").
local keepMs = math.min(messagesTtlMs, retention.call)
redis.call('PEXPIRE', messagesKey, keepMs)
-- The counters outlive the call's record, so a sender's seq never restarts while the call exists.
redis.call('PEXPIRE', seqKey, math.max(keepMs, retention.call))
if liveChannel ~= '' then
  -- Published with the write that stores it: live delivery as certain as the relay's (the same
  -- Pub/Sub), one hop shorter, and in seq order (scripts run one at a time). The live message
  -- format of lua/publishMessages.lua.
  redis.call('SPUBLISH', liveChannelOf(liveChannel, to), '\n\n\n' .. only .. '\n\n' .. event)
else
  redis.call('XADD', outboxKey, '*', 'message', v.callId, 'at', fmtInt(now), 'to', to, 'only', only, 'event', event)
end
return recordOperation(opKey, fingerprint, 'ok', 200, { eventId, fmtInt(seq), fmtInt(now) }, operationTtlMs)
