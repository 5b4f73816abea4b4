-- Idempotency records: the outcome of one operation (code, HTTP status, call fields at that time),
-- stored under the operation key with the request fingerprint. A replay returns it unchanged.

-- Returns nil when no record exists, the reply to send when it does, or an error reply when the
-- same operation key was used with a different fingerprint. `mayExist` is false when the caller
-- just bound the operationId for the first time (no record can exist then): nothing is read.
local function replayOperation(opKey, fingerprint, mayExist)
  if not mayExist then return nil end
  local raw = redis.call('GET', opKey)
  if not raw then return nil end
  local rec = cjson.decode(raw)
  if rec.fp ~= fingerprint then return { 'error', 'idempotency_conflict' } end
  return { 'replay', rec.code, rec.status, rec.fields }
end

local function recordOperation(opKey, fingerprint, code, status, fields, ttlMs)
  redis.call('SET', opKey, cjson.encode({ fp = fingerprint, code = code, status = status, fields = fields }), 'PX', ttlMs)
  return { 'fresh', code, status, fields }
end

-- The outcome of a request that changes nothing (a conflict, an echo, a repeat). When the script
-- skipped the record read at its opening (`skippedRead`: this request's operationId binding was
-- new), a concurrent replay of the same request may still have run first and recorded its
-- outcome; that record is then the answer, so the two requests get one outcome. Only a request
-- that changes the call may skip the read for good: a recorded replay always leaves the call where
-- this request can no longer change it.
local function recordUnchanged(opKey, fingerprint, code, status, fields, ttlMs, skippedRead)
  local replay = replayOperation(opKey, fingerprint, skippedRead)
  if replay then return replay end
  return recordOperation(opKey, fingerprint, code, status, fields, ttlMs)
end

-- The user's operationId binding (src/calls/store.ts bindOperation: first use wins, catches an
-- operationId reused across calls). On a single Redis the script takes it itself, with
-- `bindingKey` its last key, so the request costs one round trip; on a cluster the binding lives
-- in the user's slot, apart from the call's keys, and the store binds first and passes whether
-- the binding was new (`firstUseArg`, '1' or '0'; nil for scripts that always read their record).
-- Returns `conflict, firstUse`.
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

-- A refusal before anything changed (unknown call, not a party): it leaves no trace, so a
-- binding this script made is undone and the operationId stays unused.
local function refuse(code)
  if boundHere then redis.call('DEL', boundHere) end
  return { 'error', code }
end
