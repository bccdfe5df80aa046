-- mutex_release.lua: release the mutex held by a hold id, or withdraw that hold
-- id from the waiter queue. Releasing hands the mutex to the first live waiter.
-- KEYS[1] mutex {ns}:m:<name>; the queue {ns}:q:m:<name>, the releasing
-- session's lease {ns}:s:<sid> (to withdraw) and the first waiter's (to
-- hand over) are built here when needed (each
-- declared key costs Redis work on every call; all are in the namespace's
-- slot, and on Redis Cluster the migration probe refuses the script while
-- the slot moves, see Script.keysFor)
-- ARGV[1] hold id   ARGV[2] options "<sharded><withdraw>": sharded "1" for
-- sharded pub/sub, withdraw "1" to withdraw the hold id for good (see
-- withdraw in common.lua)
-- Returns 1 when it was held and is released, 2 when it was only queued, 0
-- when it is neither (already released, or taken away): idempotent.
local hid, m, sh = ARGV[1], KEYS[1], ARGV[2]

-- The fast paths, before the helpers exist (see scripts.go): see
-- mutex_release_fast.lua, which returns when it released.
if string.sub(sh, 2, 2) ~= '1' then
  local p
  --@inline mutex_release_fast.lua
end

--@helpers
--@include mutex_lib.lua
local p = prefix_of(m)
local sharded, name = string.sub(sh, 1, 1), string.sub(m, #p + 3)
local q = p .. K_QUEUE .. 'm:' .. name
if string.sub(sh, 2, 2) == '1' then
  withdraw(p, hid)
end
local st = m_load(m)
if st.hid == hid then
  if string.sub(sh, 2, 2) == '1' then
    -- A late first attempt (queue "2", see mutex_acquire.lua) that ran
    -- after its retry queued hid may have queued it a second time: the
    -- client withdraws every hold whose acquire had an unknown outcome,
    -- so that entry goes here, before the hand-off could find it.
    redis.call('LREM', q, '0', hid)
  end
  st.hid = false
  m_handoff(p, st, q, sharded, name)
  m_save(m, q, st)
  return REL_FREED
end
if redis.call('LREM', q, '0', hid) > 0 then
  if st.exists then
    m_save(m, q, st) -- the waiter mark, and maybe the idle expiry
  end
  return REL_DEQUEUED
end
if st.changed then
  m_save(m, q, st) -- an older layout's hash, converted
end
return REL_NOT_FOUND
