-- fastpath.lua: what the fast paths of scripts with a "--@helpers" line use;
-- first in those scripts and in the batch scripts only (see scripts.go,
-- batch.go), so it must stay small.

-- new_token returns the next fencing token after last (a stored token, or
-- false): max(last + 1, server time in µs), the rule of next_token in
-- common.lua, as a string, and as what a reply carries: the same string
-- when the clock wins (the client parses either; see parseGrant), a
-- number otherwise. The clock is what keeps tokens increasing when the
-- stored token went back: a restart from an older snapshot, a failover to
-- a replica that missed writes. The string is built from TIME's reply and
-- compared with last as a string, so the common case formats and parses no
-- number (a strtod of a token costs Redis more than the whole compare):
-- every stored token is a decimal integer without leading zeros (written
-- as this string, by string.format('%.0f'), or read back as a zset score,
-- which Redis prints as an integer below 2^52), so a shorter one, or one
-- of the same length that sorts lower, is the smaller number (Lua compares
-- strings with strcoll, under Redis' LC_COLLATE: digits collate in numeric
-- order in the C locale and in glibc's locales). The clock is
-- read once per call: a batch script's tokens are of different resources,
-- or above the last one anyway.
local now_s
local function new_token(last)
  if not now_s then
    local t = redis.call('TIME')
    local us = t[2]
    if #us < 6 then
      us = string.sub('00000' .. us, -6)
    end
    now_s = t[1] .. us
  end
  if last and (#last > #now_s or (#last == #now_s and last >= now_s)) then
    local l = tonumber(last) + 1
    return string.format('%.0f', l), l
  end
  return now_s, now_s
end
