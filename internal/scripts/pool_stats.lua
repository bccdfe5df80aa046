-- pool_stats.lua: describe a pool (read-only).
-- KEYS as in pool_acquire.lua.   ARGV[1] prefix {ns}:   ARGV[2] base "{ns}:pool:<name>:"
-- Returns {live waiters, free member 1, ..., "", held member 1, hold id 1,
-- token 1, owner 1, ...}. Members held by a session whose lease is gone are
-- reported as free, unless a lock delay keeps them (see pool_lib.lua):
-- running, or to start when a reap notices the loss ("~ld" in the lost
-- session's index). Those are reported as held by the lost hold id, with
-- owner "" (the lease that recorded it is gone): not free, not granted.
--@include pool_core.lua
--@helpers
--@include pool_lib.lua
local p, q, b = ARGV[1], KEYS[1], ARGV[2]
local out = {0}
for _, e in ipairs(redis.call('LRANGE', q, '0', '-1')) do
  if alive(p, e) then
    out[1] = out[1] + 1
  end
end
local held = {}
local all = redis.call('HGETALL', b .. 'h')
-- delayed reports whether lost hold hid's member k is kept by a lock delay.
local function delayed(k, hid)
  if redis.call('ZSCORE', b .. 'd', k) then
    return pool_delay_left(b, k) > 0
  end
  local idx = redis.call('HMGET', b .. K_POOL_INDEX .. sid_of(hid), hid, '~ld')
  return idx[1] == k and tonumber(idx[2] or '0') > 0
end
for i = 1, #all, 2 do
  local live = alive(p, all[i + 1])
  if live or delayed(all[i], all[i + 1]) then
    held[#held + 1] = all[i]
    held[#held + 1] = all[i + 1]
    held[#held + 1] = tonumber(redis.call('HGET', b .. 't', all[i]) or '0')
    held[#held + 1] = live and redis.call('HGET', p .. K_LEASE .. sid_of(all[i + 1]), 'owner') or ''
  else
    out[#out + 1] = all[i]
  end
end
for _, k in ipairs(redis.call('ZRANGE', b .. 'f', '0', '-1')) do
  out[#out + 1] = k
end
out[#out + 1] = ''
for _, v in ipairs(held) do
  out[#out + 1] = v
end
return out
