-- mutex_release.lua: release the mutex held by a hold id, or withdraw that hold
-- id from the waiter queue. Releasing hands the mutex to the first live waiter.
-- KEYS[1] mutex {ns}:m:<name>; the queue {ns}:q:m:<name> and the
-- releasing session's lease {ns}:s:<sid> are built here when needed (each
-- declared key costs Redis work on every call; all are in the namespace's
-- slot, and on Redis Cluster the migration probe refuses the script while
-- the slot moves, see Script.keysFor)
-- ARGV[1] hold id   ARGV[2] options "<sharded><withdraw>": sharded "1" for
-- sharded pub/sub, withdraw "1" to withdraw the hold id for good (see
-- withdraw in common.lua)
-- Returns 1 when it was held and is released, 2 when it was only queued, 0
-- when it is neither (already released, or taken away): idempotent.
local hid, m = ARGV[1], KEYS[1]
local withdrawing = string.sub(ARGV[2], 2, 2) == '1'

-- Fast paths, before the helpers exist (see scripts.go): a plain release
-- with nobody waiting, or with a live first waiter to hand over to. The
-- mutex string is parsed and built inline (see mutex_lib.lua).
local v = not withdrawing and redis.pcall('GET', m) -- an error (an older layout's hash) takes the full path
if type(v) == 'string' and string.sub(v, 1, #hid + 1) == hid .. '|' then
  -- Held by hid. rest is "|<tok>|<ld>|<i>|<free>|<w>": read with plain
  -- finds and one anchored match, as this runs on every release.
  local rest = string.sub(v, #hid + 1)
  local tail = string.sub(rest, -2)
  if tail == '||' then
    -- No lock delay, nobody waits: idle now, kept 'i' ms (see common.lua).
    local i = string.match(rest, '^|[^|]*|[^|]*|(%d+)||$')
    if i then
      redis.call('SET', m, rest, 'PX', i)
      return REL_FREED
    end
  elseif tail == '|1' then
    -- Waiters, no lock delay. The releaser's lease says no restart grace is
    -- pending (see check_caller); the first waiter's lease exists (it
    -- always has 'ld'). Then hand over as m_handoff would.
    local p = string.match(m, '^{[^}]*}:')
    local q = p .. K_QUEUE .. 'm:' .. string.sub(m, #p + 3)
    local nxt = redis.call('HGET', p .. K_LEASE .. string.match(hid, '^([^.]+)%.'), 'g') == '0' and redis.call('LINDEX', q, 0)
    if nxt then
      local sid = string.match(nxt, '^([^.]+)%.')
      local l = redis.call('HMGET', p .. K_LEASE .. sid, 'ld', 'ttl')
      if l[1] then
        redis.call('LPOP', q)
        local tok = new_token(string.sub(rest, 2, string.find(rest, '|', 2, true) - 1))
        redis.call('SET', m, nxt .. '|' .. tok .. '|' .. l[1] .. '|' .. 2 * l[2] .. '||1', 'PX', 2 * l[2] + l[1])
        local msg = 'g|' .. nxt .. '|' .. tok .. '|' .. string.sub(m, #p + 3)
        redis.call(string.sub(ARGV[2], 1, 1) == '1' and 'SPUBLISH' or 'PUBLISH', p .. K_CHANNEL .. sid, msg)
        return REL_FREED
      end
    end
  end
end

--@helpers
--@include mutex_lib.lua
local p = prefix_of(m)
local sharded, name = string.sub(ARGV[2], 1, 1), string.sub(m, #p + 3)
local q = p .. K_QUEUE .. 'm:' .. name
if withdrawing then
  withdraw(p, hid)
end
local st = m_load(m)
if st.hid == hid then
  st.hid = false
  m_handoff(p, st, q, sharded, name)
  m_save(m, q, st)
  return REL_FREED
end
if redis.call('LREM', q, 0, hid) > 0 then
  if st.exists then
    m_save(m, q, st) -- the waiter mark, and maybe the idle expiry
  end
  return REL_DEQUEUED
end
if st.changed then
  m_save(m, q, st) -- an older layout's hash, converted
end
return REL_NOT_FOUND
