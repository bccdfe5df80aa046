-- mutex_reset.lua: force-release a mutex (operator action). The holder's
-- session is told the hold was taken away; the first live waiter gets it.
-- KEYS[1] mutex {ns}:m:<name>   KEYS[2] queue {ns}:q:m:<name>
-- ARGV[1] prefix {ns}:   ARGV[2] "1" for sharded pub/sub   ARGV[3] mutex name
-- Returns the hold id that was reset, or "" when the mutex was free.
--@include mutex_lib.lua
local p, m, q = ARGV[1], KEYS[1], KEYS[2]
local st = m_load(m)
local cur = st.hid
st.hid, st.ld, st.free = false, false, false
if cur and alive(p, cur) then
  revoke(p, ARGV[2], cur)
else
  cur = ''
end
m_handoff(p, st, q, ARGV[2], ARGV[3])
if st.exists then
  m_save(m, q, st)
end
return cur
