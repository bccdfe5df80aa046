local R_SLOW, REL_FREED = -9, 1
-- fastpath.lua: what the fast paths of scripts with a "--@helpers" line use;
-- first in those scripts and in the batch scripts only (see scripts.go,
-- batch.go), so it must stay small.

-- new_token returns the next fencing token after last (a stored token, or
-- false): max(last + 1, server time in µs), the rule of next_token in
-- common.lua, as a string, and as what a reply carries: the same string
-- when the clock wins (the client parses either; see parseGrant), a
-- number otherwise. The clock is what keeps tokens increasing when the
-- stored token went back: a restart from an older snapshot, a failover to
-- a replica that missed writes. The clock is read once per call: a batch
-- script's tokens are of different resources, or above the last one
-- anyway.
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
-- rwmutex_release_batch.lua: the fast path of rwmutex_release.lua for a
-- writer's release that leaves the mutex idle (rwmutex_release_idle.lua),
-- for several writers' releases of one session at once (see batch.go):
-- one call for all of them. Readers' releases go one call each (see
-- kind.go), as they check the readers left.
-- KEYS[1..n] the mutexes {ns}:rw:<name>, one per release
-- ARGV[1..n] the hold ids, all of one session's write holds
-- Returns one reply per release, in order: REL_FREED, or R_SLOW for a
-- release the fast path does not cover (not held by that hold id,
-- waiters to serve, a lock delay): the client then sends
-- rwmutex_release.lua for that one alone. A release answered R_SLOW
-- changed nothing.
local out = {}
for i = 1, #ARGV do
  local k, hid, shared = KEYS[i], ARGV[i], false
  local st = redis.call('HMGET', k, 'w', 'q', 'i', 'free', 'wfree')
  local reply
  -- rwmutex_release_idle.lua: the fast path of a writer's release that
  -- leaves the read-write mutex idle, as statement text inlined where it runs
  -- (--@inline, see assemble.go): first in rwmutex_release.lua's fast
  -- paths, and in rwmutex_release_batch.lua's loop over the releases.
  -- The includer sets k (the mutex hash), hid, shared (true for a read
  -- hold) and st, k's fields w, q, i, free, wfree as HMGET returns them.
  -- When hid is k's writer, nobody waits (no waiter mark q, see rw_mark) and
  -- no lock delay runs, it releases and returns REL_FREED, the mutex kept
  -- 'i' ms once idle (see common.lua); else it goes on past its end, having
  -- changed nothing.
  if not shared and st[1] == hid and not st[2] and not st[4] and not st[5] then
    redis.call('HDEL', k, 'w', 'wld')
    if st[3] then
      redis.call('PEXPIRE', k, st[3])
    end
    reply = REL_FREED
  end
  out[i] = reply or R_SLOW
end
return out
