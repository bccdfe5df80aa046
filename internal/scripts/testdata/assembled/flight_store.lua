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
-- mutex_value.lua: the mutex string, included by mutex_lib.lua and
-- mutex_inspect.lua.
--
-- A mutex is one string key {ns}:m:<name>, not a hash, so that a grant is a
-- single SET (which also drops an idle expiry) and a release a single SET
-- with PX: "<hid>|<tok>|<ld>|<i>|<free>|<w>", fields empty when unset:
--   hid   the holder's hold id
--   tok   the last token granted
--   ld    the holder's lock delay (ms), copied at the grant
--   i     how long the mutex is kept once idle (ms; twice the TTL of the
--         session it was last granted to, see common.lua idle_ms)
--   free  the end (server ms) of a lock delay started by a lost holder
--   w     "1" while the queue {ns}:q:m:<name> may hold an entry: set by the
--         script that queues, cleared by the first write that finds the
--         queue empty; the fast paths trust it instead of asking LLEN
-- The key always expires: a grant keeps it held_ms (see common.lua), and
-- the holder's heartbeat keeps it while held; writes that do not grant keep
-- its expiry while it has a holder, and once it has none it is kept 'i' ms
-- (and at least until a lock delay ends) after each write, waiters'
-- heartbeats keeping it while they wait (see m_save).
-- m_decode and m_encode below are the codec of the full paths
-- (mutex_lib.lua) and of mutex_inspect.lua. The fast paths
-- (mutex_acquire_fast.lua, mutex_release_fast.lua, shared by the single
-- and the batch scripts) run before any function exists and read and
-- build the string with anchored matches and concatenation instead: a
-- function there is a closure created on every call (its cost is in
-- docs/performance.md, "callgrind"), which the fast paths exist to avoid. TestBatchScriptsMatchSingle, TestMutexWaiterMark and
-- TestMutexOlderLayout keep the two in step.

-- m_decode returns the fields of mutex string v as a table, false where
-- a field is empty, w a boolean.
local function m_decode(v)
  local hid, tok, ld, i, free, w = string.match(v, '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)$')
  local function f(x)
    return x ~= '' and x
  end
  return {hid = f(hid), tok = f(tok), ld = f(ld), i = f(i), free = f(free), w = w == '1'}
end

-- m_encode returns the mutex string of st (fields as m_decode returns them).
local function m_encode(st)
  return (st.hid or '') .. '|' .. (st.tok or '') .. '|' .. (st.ld or '') .. '|' .. (st.i or '') .. '|' ..
    (st.free or '') .. '|' .. (st.w and '1' or '')
end
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
