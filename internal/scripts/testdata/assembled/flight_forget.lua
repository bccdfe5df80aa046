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
local st = m and m_decode(m)
if st and st.hid and st.tok then
  redis.call('HSET', KEYS[1], 'f', st.tok)
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
if had > 0 then
  return 1
end
return 0
