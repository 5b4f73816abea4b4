-- A user's live channel from its template: the channel with a NUL where the userId goes
-- (src/redis/keys.ts liveChannel, passed by the caller so that the key space's prefix lives in
-- one place).
local function liveChannelOf(template, userId)
  local at = string.find(template, '\0', 1, true)
  return string.sub(template, 1, at - 1) .. userId .. string.sub(template, at + 1)
end
