-- flight_forget.lua: drop the cached outcome of one flight key. A
-- computation running now (the mutex is held) cannot store its outcome
-- afterwards: the entry keeps only the mutex's last token in field f, for
-- keep ms, and flight_store.lua refuses tokens up to it.
-- KEYS[1] flight entry {ns}:f:<group>:<key>
-- KEYS[2] the key's mutex {ns}:m:flight:<group>:<key>
-- ARGV[1] keep ms
-- Returns 1 when an outcome was dropped, 0 when there was none.
local had = redis.call('HEXISTS', KEYS[1], 'v') + redis.call('HEXISTS', KEYS[1], 'e')
redis.call('DEL', KEYS[1])
--@include mutex_value.lua
local m = redis.call('GET', KEYS[2])
local st = m and m_decode(m)
if st and st.hid and st.tok then
  redis.call('HSET', KEYS[1], 'f', st.tok)
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
if had > 0 then
  return 1
end
return 0
