-- flight_store.lua: store the outcome of a computation, fenced: only the
-- current holder of the flight key's mutex, with a live lease and a token no
-- lower than any outcome stored before, may store.
-- KEYS[1] flight entry {ns}:f:<group>:<key>
-- KEYS[2] the key's mutex {ns}:m:flight:<group>:<key>
-- KEYS[3] the storing session's lease {ns}:s:<sid>
-- ARGV[1] hold id   ARGV[2] the hold's token   ARGV[3] "v" (a value) or "e"
-- (an error message)   ARGV[4] the value or message   ARGV[5] fresh ms (how
-- long the outcome is served from the cache; 0: only to callers that waited
-- for it)   ARGV[6] keep ms (how long the entry is kept at least)
-- Returns 1 when stored; 0 when the caller no longer holds the mutex (its
-- lease is gone, or the mutex is another hold's); -1 when an outcome with a
-- higher token is stored already; -2 when the entry was forgotten (Forget)
-- after this hold was granted. Nothing is written unless it returns 1.
local e, hid = KEYS[1], ARGV[1]
--@include mutex_value.lua
local m = redis.call('GET', KEYS[2])
if not m or m_decode(m).hid ~= hid or redis.call('EXISTS', KEYS[3]) == 0 then
  return 0
end
local tok = tonumber(ARGV[2])
local st = redis.call('HMGET', e, 'vt', 'et', 'f')
if tok < math.max(tonumber(st[1] or '0'), tonumber(st[2] or '0')) then
  return -1
end
if st[3] and tok <= tonumber(st[3]) then
  return -2
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local until_ms = string.format('%.0f', now + tonumber(ARGV[5]))
if ARGV[3] == 'v' then
  redis.call('HSET', e, 'v', ARGV[4], 'vt', ARGV[2], 'vx', until_ms)
  redis.call('HDEL', e, 'e', 'et', 'ex', 'f') -- older than this value
else
  redis.call('HSET', e, 'e', ARGV[4], 'et', ARGV[2], 'ex', until_ms)
  redis.call('HDEL', e, 'f')
end
local keep = tonumber(ARGV[6])
if redis.call('PTTL', e) < keep then
  redis.call('PEXPIRE', e, ARGV[6])
end
return 1
