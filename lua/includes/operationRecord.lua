-- Idempotency records: the outcome of one operation (code, HTTP status, call fields at that time)
-- with the request's fingerprint. A replay returns it unchanged; the same operationId with another
-- fingerprint gets idempotency_conflict. Where the record lives (docs/keyspace.md):
--  - on a single Redis, in the user's operationId binding itself (`bindingKey`, the script's last
--    key; it catches an operationId reused across calls). The request script holds its writes
--    (lua/includes/heldWrites.lua) and ends with one SET … NX GET that takes the binding with the
--    record in it: when the operationId was bound already, the held writes are dropped and the
--    earlier record answers. One command binds and records, and a refusal writes nothing.
--  - on a cluster the binding lives in the user's slot, apart from the call's keys: the store binds
--    first (src/calls/store.ts bindOperation) and says whether the binding was new (`firstUse`),
--    and the record is kept under `opKey`, in the call's slot. In-call messages keep this layout on
--    both (lua/sendMessage.lua: their sequence number is a write the script must read).
--  - a binding made by a version before records moved into it holds the bare fingerprint; its
--    record, if any, is at `opKey`.
--@include "heldWrites"

-- Reads the record at `opKey`: nil when none exists, the reply to send when it does, or an error
-- reply when the operation key was used with a different fingerprint. `mayExist` false (the
-- binding was new, so no record can exist) skips the read.
local function replayOperation(opKey, fingerprint, mayExist)
  if not mayExist then return nil end
  local raw = redis.call('GET', opKey)
  if not raw then return nil end
  local rec = cjson.decode(raw)
  if rec.fp ~= fingerprint then return { 'error', 'idempotency_conflict' } end
  return { 'replay', rec.code, rec.status, rec.fields }
end

-- This request's operation on a single Redis, once opened: its binding, record key and fingerprint.
local held = nil

-- Opens a request's operation. On a single Redis (`bindingKey` given) the writes are held from
-- here, and nothing is read: the binding's earlier value comes back with the closing SET. Returns
-- whether the script reads a record at `opKey` now (a cluster only: when the store's binding was
-- not new, `firstUseArg` not '1', or when the script must read it anyway, `alwaysRead`).
local function openOperation(bindingKey, opKey, fingerprint, firstUseArg, alwaysRead)
  if not bindingKey then return alwaysRead or firstUseArg ~= '1' end
  held = { bindingKey = bindingKey, opKey = opKey, fingerprint = fingerprint }
  holdWrites()
  return false
end

-- The reply for a binding's earlier value: its record, idempotency_conflict, or (a binding of an
-- earlier version without a record at opKey) nil.
local function replayOfBinding(previous)
  if string.sub(previous, 1, 1) == '{' then
    local rec = cjson.decode(previous)
    if rec.fp ~= held.fingerprint then return { 'error', 'idempotency_conflict' } end
    return { 'replay', rec.code, rec.status, rec.fields }
  end
  if previous ~= held.fingerprint then return { 'error', 'idempotency_conflict' } end
  return replayOperation(held.opKey, held.fingerprint, true)
end

-- An earlier record of this request, read now (a refusal's, or a create finding its callId used):
-- the reply to send, or nil.
local function existingRecord(opKey, fingerprint)
  if not held then return replayOperation(opKey, fingerprint, true) end
  local previous = redis.call('GET', held.bindingKey)
  return previous and replayOfBinding(previous) or nil
end

-- Stores this request's outcome and answers it. On a single Redis the binding is taken with the
-- record in it, and the held writes run; when the operationId was bound already the earlier
-- outcome answers instead and nothing is written.
local function recordOperation(opKey, fingerprint, code, status, fields, ttlMs)
  local record = cjson.encode({ fp = fingerprint, code = code, status = status, fields = fields })
  if held then
    local previous = redis.call('SET', held.bindingKey, record, 'PX', ttlMs, 'NX', 'GET')
    if previous then
      local replay = replayOfBinding(previous)
      if replay then
        dropWrites()
        return replay
      end
      -- An earlier version's binding of this request, with no record: this request goes on.
      redis.call('SET', held.bindingKey, record, 'PX', ttlMs)
    end
    local refusal = releaseWrites()
    if refusal then
      -- A guarded write found its key taken (a create's callId in use): the request changed
      -- nothing, and its operationId stays unused.
      redis.call('DEL', held.bindingKey)
      return refusal
    end
  else
    redis.call('SET', opKey, record, 'PX', ttlMs)
  end
  return { 'fresh', code, status, fields }
end

-- The outcome of a request that changes nothing (a conflict, an echo, a repeat). When the script
-- skipped the record read at its opening (`skippedRead`: on a cluster, the binding was new), a
-- concurrent replay of the same request may still have run first and recorded its outcome; that
-- record is then the answer, so the two requests get one outcome. Only a request that changes the
-- call may skip the read for good: a recorded replay always leaves the call where this request can
-- no longer change it. (On a single Redis the closing SET … NX GET is that read.)
local function recordUnchanged(opKey, fingerprint, code, status, fields, ttlMs, skippedRead)
  local replay = not held and replayOperation(opKey, fingerprint, skippedRead)
  if replay then return replay end
  return recordOperation(opKey, fingerprint, code, status, fields, ttlMs)
end

-- The user's operationId binding taken at the start (lua/sendMessage.lua on a single Redis, with
-- `bindingKey` its binding key; nil on a cluster, where `firstUseArg` says whether the store's
-- binding was new). Returns `conflict, firstUse`.
local boundHere = nil
local function bindOperation(bindingKey, fingerprint, ttlMs, firstUseArg)
  if not bindingKey then return false, firstUseArg == '1' end
  local previous = redis.call('SET', bindingKey, fingerprint, 'PX', ttlMs, 'NX', 'GET')
  if not previous then
    boundHere = bindingKey
    return false, true
  end
  return previous ~= fingerprint, false
end

-- A refusal before anything changed (unknown call, not a party): it leaves no trace, so a binding
-- this script made is undone, held writes are dropped and the operationId stays unused. A replay
-- of a request that succeeded before (its call since gone, say) still gets its record.
local function refuse(code)
  if boundHere then redis.call('DEL', boundHere) end
  if held then
    dropWrites()
    local replay = existingRecord(held.opKey, held.fingerprint)
    if replay then return replay end
  end
  return { 'error', code }
end
