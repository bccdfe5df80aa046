-- rwmutex_inspect.lua: describe a read-write mutex (read-only).
-- KEYS[1] {ns}:rw:<name>   KEYS[2] readers {ns}:rwr:<name>
-- KEYS[3] queue {ns}:q:rw:<name>
-- Returns {last token, number of holders H, number of waiters W, then H
-- groups {hold id, "r" or "w", token, lease pttl ms, owner} (the writer
-- first), then W groups {hold id, "r" or "w", owner} in queue order}. Holds
-- and waiters of sessions whose lease is gone are left out.
local k, r, q = KEYS[1], KEYS[2], KEYS[3]
local p = prefix_of(k)
local tok = tonumber(redis.call('HGET', k, 'tok') or '0')
local function owner(hid)
  return redis.call('HGET', p .. K_LEASE .. sid_of(hid), 'owner') or ''
end
local holders, waiters = {}, {}
local w = redis.call('HGET', k, 'w')
if w and alive(p, w) then
  for _, x in ipairs({w, 'w', tok, lease_pttl(p, w), owner(w)}) do
    holders[#holders + 1] = x
  end
end
local all = redis.call('HGETALL', r)
for i = 1, #all, 2 do
  if alive(p, all[i]) then
    local t = tonumber(string.match(all[i + 1], ':(%d+)$'))
    for _, x in ipairs({all[i], 'r', t, lease_pttl(p, all[i]), owner(all[i])}) do
      holders[#holders + 1] = x
    end
  end
end
for _, e in ipairs(redis.call('LRANGE', q, '0', '-1')) do
  local hid, mode = string.match(e, '^(.+)|([rw])$')
  if alive(p, hid) then
    for _, x in ipairs({hid, mode, owner(hid)}) do
      waiters[#waiters + 1] = x
    end
  end
end
local out = {tok, #holders / 5, #waiters / 3}
for _, x in ipairs(holders) do
  out[#out + 1] = x
end
for _, x in ipairs(waiters) do
  out[#out + 1] = x
end
return out
