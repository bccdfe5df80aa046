local R_SLOW, REL_FREED, K_POOL_INDEX, P_HOLD_SID = -9, 1, "i:", "^([^.]+)%."
-- fastpath.lua: what the fast paths of scripts with a "--@helpers" line use;
-- first in those scripts and in the batch scripts only (see scripts.go,
-- batch.go), so it must stay small.

-- now_s: the server's clock in µs as a string, read at most once per call
-- by new_token.lua (inlined where a token is taken).
local now_s
-- pool_release_batch.lua: the fast path of pool_release.lua
-- (pool_release_fast.lua) for several releases of one session
-- at once (see batch.go).
-- KEYS per release: its pool's queue {ns}:q:pool:<name>
-- ARGV per release: hold id, base "{ns}:pool:<name>:"
-- Returns one reply per release, in order: REL_FREED, or R_SLOW for one
-- the fast path does not cover (not held, waiters to serve): the client
-- then sends pool_release.lua for that one alone. A release answered
-- R_SLOW changed nothing.
-- pool_release_fast.lua: the fast path of pool_release.lua and what it
-- takes of the operations on one pool member (see pool_core.lua), under
-- the rules of pool_acquire_fast.lua: before that fast path and in
-- pool_release_batch.lua, with nothing of common.lua.

-- pool_mark_free makes key free as the most recently released member: its
-- score is max(server time in µs, highest score + 1), new_token.lua's rule.
local function pool_mark_free(b, key)
  local top = redis.call('ZRANGE', b .. 'f', '-1', '-1', 'WITHSCORES')
  local last, tok, n = top[2]
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
  redis.call('ZADD', b .. 'f', tok, key)
end

-- pool_unhold forgets that key is held (by hid); it does not make it free.
-- The session's index goes with its last member ("~ld" included).
local function pool_unhold(b, key, hid)
  local sid = string.match(hid, P_HOLD_SID)
  redis.call('HDEL', b .. 'h', key)
  if redis.call('HINCRBY', b .. 's', sid, '-1') <= 0 then
    redis.call('HDEL', b .. 's', sid)
    redis.call('HDEL', b .. K_POOL_INDEX .. sid, hid, '~ld')
  else
    redis.call('HDEL', b .. K_POOL_INDEX .. sid, hid)
  end
end

-- pool_held_by returns the member hid holds, or nil.
local function pool_held_by(b, hid)
  local k = redis.call('HGET', b .. K_POOL_INDEX .. string.match(hid, P_HOLD_SID), hid)
  if k and redis.call('HGET', b .. 'h', k) == hid then
    return k
  end
  return nil
end

-- pool_release_fast releases the member hid holds when nobody waits
-- (pool_serve would grant nothing): it returns REL_FREED, or nil, having
-- changed nothing, for the full path.
local function pool_release_fast(q, b, hid)
  if redis.call('LLEN', q) ~= 0 then
    return nil
  end
  local k = pool_held_by(b, hid)
  if not k then
    return nil
  end
  pool_unhold(b, k, hid)
  pool_mark_free(b, k)
  return REL_FREED
end
local out = {}
for i = 1, #KEYS do
  out[i] = pool_release_fast(KEYS[i], ARGV[2 * i], ARGV[2 * i - 1]) or R_SLOW
end
return out
