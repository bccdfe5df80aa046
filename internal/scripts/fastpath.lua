-- fastpath.lua: what the fast paths of scripts with a "--@helpers" line use;
-- first in those scripts and in the batch scripts only (see scripts.go,
-- batch.go), so it must stay small.

-- new_token returns the next fencing token after last (a stored token, or
-- false), as a string and as a number: max(last + 1, server time in µs),
-- the rule of next_token in common.lua. The clock is what keeps tokens
-- increasing when the stored token went back: a restart from an older
-- snapshot, a failover to a replica that missed writes. The string is built
-- from TIME's reply, so the common case formats no float. The clock is read
-- once per call: a batch script's tokens are of different mutexes, or
-- above the last one anyway.
local now_s, now_n
local function new_token(last)
  if not now_s then
    local t = redis.call('TIME')
    now_s = t[1] .. string.sub('00000' .. t[2], -6)
    now_n = tonumber(now_s)
  end
  if last then
    local l = tonumber(last) + 1
    if l > now_n then
      return string.format('%.0f', l), l
    end
  end
  return now_s, now_n
end
