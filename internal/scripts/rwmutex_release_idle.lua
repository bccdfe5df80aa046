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
  return REL_FREED
end
