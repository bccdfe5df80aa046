-- pool_acquire.lua: claim a free member (any, or the one named) if nobody
-- queued before the caller wants it, else queue the caller FIFO (when asked to wait).
-- KEYS[1] queue {ns}:q:pool:<name>: the one key named (for cluster
-- routing); the script builds the pool's others from ARGV[6] (see
-- pool_lib.lua), in the same slot. Each key or argument passed costs Redis
-- a Lua string per call (docs/performance.md).
-- ARGV[1] prefix {ns}:   ARGV[2] hold id   ARGV[3] "1" to queue when busy
-- ARGV[4] "1" for sharded pub/sub   ARGV[5] pool name   ARGV[6] base "{ns}:pool:<name>:"
-- ARGV[7] member wanted, "" for any
-- Returns {1, token, member} when granted (idempotent per hold id); {0, wait
-- ms, position or -1} when not; {-8, grace ms} when not, during a restart
-- grace, to a caller that does not queue; {-1} when the caller's lease is
-- gone; {-3} when the member wanted is not in the pool (the caller's queue
-- entry for it, if any, is dropped); {-5} when the epoch marker is missing
-- (see common.lua).
--@include pool_acquire_fast.lua
local p, hid, q, b, want = ARGV[1], ARGV[2], KEYS[1], ARGV[6], ARGV[7]

-- Fast path, before the helpers exist (see scripts.go): see
-- pool_acquire_fast.lua.
local lease = redis.call('HMGET', p .. K_LEASE .. string.match(hid, P_HOLD_SID), 'g', 'x:' .. hid, 'ld')
if lease[1] == '0' and not lease[2] then
  local r = pool_acquire_fast(q, b, hid, want, lease[3])
  if r then
    return r
  end
end

--@helpers
--@include pool_core.lua
--@include pool_lib.lua
local stop, grace = check_caller(p, hid, ARGV[3])
if stop then
  return stop
end
local k = pool_held_by(b, hid)
if k then
  return {R_GRANTED, tonumber(redis.call('HGET', b .. 't', k)), k}
end
if want ~= '' and not pool_is_member(b, want) then
  -- A waiter whose member was removed leaves the queue as it fails.
  redis.call('LREM', q, '0', hid .. '@' .. want)
  return {R_NOT_MEMBER}
end
-- Serving the queue may grant the caller (a re-check of a queued entry).
if pool_serve(p, b, q, ARGV[4], ARGV[5]) > 0 then
  k = pool_held_by(b, hid)
  if k then
    return {R_GRANTED, tonumber(redis.call('HGET', b .. 't', k)), k}
  end
end
local entry = hid
if want ~= '' then
  entry = hid .. '@' .. want
end
-- After pool_serve, a member still free is wanted by nobody queued.
local pos = redis.call('LPOS', q, entry)
if not pos and grace == 0 then
  if want == '' then
    k = pool_free_one(b)
  elseif pool_is_free(b, want) then
    k = want
  end
  if not k and pool_reap(p, b) > 0 then
    pool_serve(p, b, q, ARGV[4], ARGV[5])
    if want == '' then
      k = pool_free_one(b)
    elseif pool_is_free(b, want) then
      k = want
    end
  end
  if k then
    return {R_GRANTED, pool_grant(p, b, k, hid), k}
  end
end
local wait
if grace > 0 then
  wait = grace
elseif want ~= '' then
  wait = pool_member_wait(p, b, want)
else
  wait = pool_wait(p, b)
end
return busy(q, entry, wait, ARGV[3], grace, pos)
