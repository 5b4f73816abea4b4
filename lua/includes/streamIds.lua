-- Stream ID helpers: parse "ms-seq" and compare two IDs.
local function parseStreamId(id)
  local dash = string.find(id, '-', 1, true)
  if not dash then return tonumber(id), 0 end
  return tonumber(string.sub(id, 1, dash - 1)), tonumber(string.sub(id, dash + 1))
end

-- True when stream ID a sorts before b.
local function streamIdLess(a, b)
  local ams, aseq = parseStreamId(a)
  local bms, bseq = parseStreamId(b)
  return ams < bms or (ams == bms and aseq < bseq)
end
