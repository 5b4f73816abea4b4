-- Formats an integral number without exponent (tostring would print 1.7e+12 past 14 digits).
local function fmtInt(n)
  return string.format('%d', n)
end
