-- semaphore_stats.lua: describe a semaphore (read-only).
-- KEYS[1] meta   KEYS[2] holders   KEYS[3] queue (see semaphore_lib.lua)
-- ARGV[1] prefix {ns}:
-- Returns {limit, live waiters, 1 when an operator set the limit else 0,
-- hid1, n1, token1, owner1, pttl1, hid2, ...} over the live holders only:
-- neither dead holders nor the permits of a lock delay (meta's field delay,
-- see semaphore_lib.lua) are listed, though the latter are not free.
--@include semaphore_lib.lua
local p = ARGV[1]
local m = redis.call('HMGET', KEYS[1], 'limit', 'set')
local out = {tonumber(m[1] or '0'), 0, m[2] and 1 or 0}
local all = redis.call('HGETALL', KEYS[2])
for i = 1, #all, 2 do
  local hid = all[i]
  if alive(p, hid) then
    local n, tok = sem_holder(all[i + 1])
    out[#out + 1] = hid
    out[#out + 1] = n
    out[#out + 1] = tok
    out[#out + 1] = redis.call('HGET', p .. K_LEASE .. sid_of(hid), 'owner') or ''
    out[#out + 1] = lease_pttl(p, hid)
  end
end
for _, e in ipairs(redis.call('LRANGE', KEYS[3], '0', '-1')) do
  if alive(p, e) then
    out[2] = out[2] + 1
  end
end
return out
