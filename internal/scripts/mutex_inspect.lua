-- mutex_inspect.lua: describe a mutex (read-only).
-- KEYS[1] mutex {ns}:m:<name>   KEYS[2] queue {ns}:q:m:<name>
-- ARGV[1] prefix {ns}:
-- Returns {holder hold id or "", token, holder lease pttl ms, holder owner,
-- live waiters}. The token is the last one granted, also when free.
--@include mutex_value.lua
local p, m, q = ARGV[1], KEYS[1], KEYS[2]
-- The mutex string (see mutex_value.lua), or an older layout's hash.
local cur, tok
local v = redis.pcall('GET', m)
if type(v) == 'table' and v.err then
  local h = redis.call('HMGET', m, 'hid', 'tok')
  cur, tok = h[1], h[2]
elseif v then
  local st = m_decode(v)
  cur, tok = st.hid, st.tok
end
tok = tonumber(tok or '0')
local pttl, owner = -2, ''
if cur and alive(p, cur) then
  pttl = lease_pttl(p, cur)
  owner = redis.call('HGET', p .. K_LEASE .. sid_of(cur), 'owner') or ''
else
  cur = ''
end
local waiters = 0
for _, h in ipairs(redis.call('LRANGE', q, '0', '-1')) do
  if alive(p, h) then
    waiters = waiters + 1
  end
end
return {cur, tok, pttl, owner, waiters}
