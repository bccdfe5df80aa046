-- mutex_inspect.lua: describe a mutex (read-only).
-- KEYS[1] mutex {ns}:m:<name>   KEYS[2] queue {ns}:q:m:<name>
-- ARGV[1] prefix {ns}:
-- Returns {holder hold id or "", token, holder lease pttl ms, holder owner,
-- live waiters}. The token is the last one granted, also when free.
local p, m, q = ARGV[1], KEYS[1], KEYS[2]
local cur = redis.call('HGET', m, 'hid')
local tok = tonumber(redis.call('HGET', m, 'tok') or '0')
local pttl, owner = -2, ''
if cur and alive(p, cur) then
  pttl = lease_pttl(p, cur)
  owner = redis.call('HGET', p .. K_LEASE .. sid_of(cur), 'owner') or ''
else
  cur = ''
end
local waiters = 0
for _, h in ipairs(redis.call('LRANGE', q, 0, -1)) do
  if alive(p, h) then
    waiters = waiters + 1
  end
end
return {cur, tok, pttl, owner, waiters}
