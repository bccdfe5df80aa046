-- mutex_lib.lua: the mutex's state, included (after common.lua) by the
-- scripts that read or write a mutex.
--
-- The mutex string and its codec: see mutex_value.lua.
--@include mutex_value.lua

-- m_load reads mutex m. A hash there is a mutex written by a leasehold
-- release before this layout: it is read field by field and replaced by
-- the string at the next save (its waiter mark is assumed set).
local function m_load(m)
  local v = redis.pcall('GET', m)
  if type(v) == 'table' and v.err then
    local h = redis.call('HMGET', m, 'hid', 'tok', 'ld', 'i', 'free')
    redis.call('DEL', m)
    return {exists = true, changed = true, hid = h[1], tok = h[2], ld = h[3], i = h[4], free = h[5], w = true}
  end
  if not v then
    return {}
  end
  local st = m_decode(v)
  st.exists = true
  return st
end

-- m_save writes state st to mutex m (queue q). A grant (st.held, set by
-- m_grant) keeps it held_ms; any other write keeps the expiry while it has
-- a holder, else sets it to 'i' ms (20 s when no grant recorded 'i') and
-- not before a lock delay ends. A waiter mark over an empty queue is
-- cleared first.
local function m_save(m, q, st)
  if st.w and redis.call('LLEN', q) == 0 then
    st.w = false
  end
  local v = m_encode(st)
  if st.held then
    redis.call('SET', m, v, 'PX', string.format('%.0f', st.held))
    return
  end
  if st.hid and st.exists then
    redis.call('SET', m, v, 'KEEPTTL')
    return
  end
  local keep = tonumber(st.i or idle_ms(false))
  if st.free then
    keep = math.max(keep, tonumber(st.free) - now_ms())
  end
  redis.call('SET', m, v, 'PX', string.format('%.0f', keep))
end

-- m_grant makes hid the holder in st and returns its new token. hid's
-- session's lock delay is copied so that it still applies after that
-- session's lease is gone, and its TTL sets how long the mutex is kept once
-- idle.
local function m_grant(p, st, hid)
  local l = redis.call('HMGET', p .. K_LEASE .. sid_of(hid), 'ld', 'ttl')
  local tok = math.max(tonumber(st.tok or '0') + 1, now_us())
  st.hid, st.tok, st.ld, st.i = hid, string.format('%.0f', tok), l[1] or '0', idle_ms(l[2])
  st.free, st.held = false, held_ms(l[2], l[1])
  return tok
end

-- m_handoff grants the mutex in st (free) to the first live waiter of queue
-- q, if any, and notifies it with "g|<hid>|<token>|<name>". Returns that
-- hold id or nil. The caller saves st.
local function m_handoff(p, st, q, sharded, name)
  if not st.w then
    return nil -- the common case: nobody waits (see w above)
  end
  if grace_left(p) ~= 0 then
    return nil -- no grants during a restart grace: waiters re-check after it
  end
  local nxt = first_live(p, q)
  if not nxt then
    return nil
  end
  redis.call('LPOP', q)
  local tok = m_grant(p, st, nxt)
  notify(p, sharded, nxt, 'g', tok, name)
  return nxt
end

-- m_free reports whether the mutex in st has no live holder and no lock
-- delay pending; a holder whose lease is gone is cleared, starting its lock
-- delay (st changes; the caller saves it). The second result is the time to
-- wait (ms) when it is not free, at least 1 (see lease_pttl).
local function m_free(p, st)
  if st.hid then
    if alive(p, st.hid) then
      return false, lease_pttl(p, st.hid)
    end
    local ld = tonumber(st.ld or '0')
    if ld > 0 then
      st.free = string.format('%.0f', now_ms() + ld)
    end
    st.hid, st.changed = false, true
  end
  if st.free then
    local wait = tonumber(st.free) - now_ms()
    if wait > 0 then
      return false, wait
    end
    st.free, st.changed = false, true
  end
  return true, 0
end
