local R_SLOW, REL_FREED = -9, 1
-- fastpath.lua: what the fast paths of scripts with a "--@helpers" line use;
-- first in those scripts and in the batch scripts only (see scripts.go,
-- batch.go), so it must stay small.

-- now_s: the server's clock in µs as a string, read at most once per call
-- by new_token.lua (inlined where a token is taken).
local now_s
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
