-- new_token.lua: the next fencing token after last (a stored token, or
-- false): max(last + 1, server time in µs), the rule of next_token in
-- common.lua, as statement text inlined where a fast path takes a token
-- (--@inline, see assemble.go), not a function: Redis would create the
-- closure on every call of every script that has it, about 1.2k
-- instructions, most of them for calls that take no token (a release with
-- no hand-off). The includer names last and declares tok and n; now_s is
-- fastpath.lua's. tok is the token as a string, n as what a reply carries:
-- the same string when the clock wins (the client parses either; see
-- parseAcquire), a number otherwise. The clock is what keeps tokens
-- increasing when the stored token went back: a restart from an older
-- snapshot, a failover to a replica that missed writes. The clock is read
-- once per call: a batch script's tokens are of different resources, or
-- above the last one anyway.
--
-- The clock's string is built from TIME's reply and compared with last as
-- a string, so the common case formats and parses no number (a strtod of a
-- token costs Redis more than the whole compare). Every stored token is a
-- decimal integer without leading zeros (this string, or string.format's
-- '%.0f'), so a shorter one, or one of the same length that sorts lower,
-- is the smaller number. Lua compares strings with strcoll, under Redis'
-- LC_COLLATE: digits collate in numeric order in the C locale and in
-- glibc's. The one last that is not a token, a pool's highest free score
-- (pool_mark_free), Redis prints as an integer below 2^52; miniredis
-- prints one ending in eight zeros as "1.7e+15", which then loses to the
-- clock even when above it: at worst a member ordered before one released
-- earlier, never a token.
if not now_s then
  local t = redis.call('TIME')
  local us = t[2]
  if #us < 6 then
    us = string.sub('00000' .. us, -6)
  end
  now_s = t[1] .. us
end
if last and (#last > #now_s or (#last == #now_s and last >= now_s)) then
  n = tonumber(last) + 1
  tok = string.format('%.0f', n)
else
  tok, n = now_s, now_s
end
