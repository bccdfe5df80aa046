-- pool_release.lua: release the member a hold id holds (it becomes the most
-- recently released), or withdraw the hold id from the queue; then serve waiters.
-- KEYS / ARGV[1..6] as in pool_acquire.lua, but ARGV[3] is "1" to withdraw
-- the hold id for good (see withdraw in common.lua).
-- ARGV[7] member requested, "" for any (to find the queue entry)
-- Returns 1 when it was held and is released, 2 when it was only queued, 0
-- when neither: idempotent.
--@include pool_release_fast.lua
local p, hid, q, b = ARGV[1], ARGV[2], KEYS[1], ARGV[6]

-- Fast path, before the helpers exist (see scripts.go): see
-- pool_release_fast.lua.
if ARGV[3] ~= '1' then
  local r = pool_release_fast(q, b, hid)
  if r then
    return r
  end
end

--@helpers
--@include pool_core.lua
--@include pool_lib.lua
if ARGV[3] == '1' then
  withdraw(p, hid)
end
local k = pool_held_by(b, hid)
if k then
  pool_unhold(b, k, hid)
  pool_mark_free(b, k)
  pool_serve(p, b, q, ARGV[4], ARGV[5])
  return REL_FREED
end
local entry = hid
if ARGV[7] ~= '' then
  entry = hid .. '@' .. ARGV[7]
end
if redis.call('LREM', q, '0', entry) > 0 then
  return REL_DEQUEUED
end
return REL_NOT_FOUND
