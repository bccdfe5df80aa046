-- lib.lua: prepended to every fence script (never built from input).
-- A token travels as the canonical decimal of a positive int64 (no sign, no
-- leading zero), and is compared as a string: Lua numbers are doubles, which
-- cannot tell 2^53 from 2^53+1.

-- atleast reports whether token a >= token b.
local function atleast(a, b)
  if #a ~= #b then
    return #a > #b
  end
  return a >= b
end

-- admit raises the mark KEYS[1] to token tok and returns nil, or returns
-- the mark when it is above tok (nothing is changed then).
local function admit(tok)
  local mark = redis.call('GET', KEYS[1])
  if mark and not atleast(tok, mark) then
    return mark
  end
  if mark ~= tok then
    redis.call('SET', KEYS[1], tok)
  end
  return nil
end
