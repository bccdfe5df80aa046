-- mutex_acquire.lua: grant the mutex if it is free and nobody waits before the
-- caller, else queue the caller FIFO (when asked to wait).
-- KEYS[1] mutex {ns}:m:<name>   KEYS[2] the caller's lease {ns}:s:<sid>;
-- the queue {ns}:q:m:<name> is built here when needed (see
-- mutex_release.lua: each declared key costs Redis work on every call)
-- ARGV[1] hold id   ARGV[2] options "<queue><sharded><held>|<ld>|<i>":
-- queue "1" to queue when busy, sharded "1" for sharded pub/sub, then the
-- caller's session's held_ms, lock delay and idle time in ms (see
-- common.lua; packed, and formatted by the client: every argument costs
-- Redis a string on every call, and every number the script formats or
-- parses costs it a printf or a strtod, and this script runs for every
-- lock)
-- Returns {1, token} when granted (also when already granted to this hold id,
-- so a retry after a lost reply is safe); {0, wait ms, queue position or -1}
-- when not; {-8, grace ms} when not, during a restart grace, to a caller that
-- does not queue; {-1} when the caller's own lease is gone; {-5} when the
-- epoch marker is missing (see common.lua grace_left).
-- A free mutex with live waiters is handed to the first of them here, so a
-- newcomer never overtakes a queue whose previous holder died.
local hid, m = ARGV[1], KEYS[1]

-- Fast paths, before the helpers exist (see scripts.go), when the caller's
-- lease exists with no grace pending (g = "0", see check_caller) and hid is
-- not withdrawn. The mutex string is parsed inline (see mutex_lib.lua);
-- anything else takes the full path below, which reads everything again.
local lease = redis.call('HMGET', KEYS[2], 'g', 'x:' .. hid)
if lease[1] == '0' and not lease[2] then
  local v = redis.pcall('GET', m) -- an error (a hash of an older layout) takes the full path
  if not v then
    -- No mutex: never used, or expired, which a held mutex or a running
    -- lock delay never is (see mutex_lib.lua). Grant, with a token from
    -- the clock alone (see common.lua idle_ms), unless a queue is left: a
    -- queue can outlive its mutex (a lock delay keeps the mutex only until
    -- it ends, which a waiter's heartbeat may not renew in time), and the
    -- full path serves its live waiters first.
    local p = string.match(m, '^{[^}]*}:')
    if redis.call('EXISTS', p .. K_QUEUE .. 'm:' .. string.sub(m, #p + 3)) == 0 then
      local tok, n = new_token(false)
      local bar = string.find(ARGV[2], '|', 3, true)
      redis.call('SET', m, hid .. '|' .. tok .. string.sub(ARGV[2], bar) .. '||', 'PX', string.sub(ARGV[2], 3, bar - 1))
      return {R_GRANTED, n}
    end
  elseif type(v) == 'string' then
    -- Read with plain finds, not a pattern with six captures: this runs
    -- on every lock (see mutex_lib.lua for the fields).
    local e = string.find(v, '|', 1, true)
    if e == 1 and string.sub(v, -2) == '||' then
      -- No holder, no lock delay running, nobody waiting: grant, if the
      -- mutex has a token. SET also drops the expiry of an idle mutex.
      local last = string.sub(v, 2, string.find(v, '|', 2, true) - 1)
      if last ~= '' then
        local tok, n = new_token(last)
        -- Kept held_ms (see common.lua); the holder's heartbeat keeps it.
        local bar = string.find(ARGV[2], '|', 3, true)
        redis.call('SET', m, hid .. '|' .. tok .. string.sub(ARGV[2], bar) .. '||', 'PX', string.sub(ARGV[2], 3, bar - 1))
        return {R_GRANTED, n}
      end
    end
    local holder = string.sub(v, 1, e - 1)
    if holder ~= '' and holder ~= hid then
      -- Held by a live session: busy, the same reply as busy() in common.lua.
      -- (Spelled out, like sid_of and prefix_of here and in the release: as
      -- helpers in fastpath.lua they cost each lock+release 3k more Redis
      -- instructions, measured with callgrind.)
      local p = string.match(m, '^{[^}]*}:')
      local wait = redis.call('PTTL', p .. K_LEASE .. string.match(holder, '^([^.]+)%.'))
      if wait > 0 then
        if string.sub(ARGV[2], 1, 1) ~= '1' then
          return {R_BUSY, wait, -1}
        end
        local q = p .. K_QUEUE .. 'm:' .. string.sub(m, #p + 3)
        local pos = redis.call('LPOS', q, hid)
        if not pos then
          pos = redis.call('RPUSH', q, hid) - 1
          if pos == 0 then
            -- A new queue expires unless its waiters' heartbeats keep it.
            redis.call('PEXPIRE', q, string.sub(ARGV[2], 3, string.find(ARGV[2], '|', 3, true) - 1))
          end
          if string.sub(v, -1) == '|' then
            redis.call('SET', m, v .. '1', 'KEEPTTL') -- the waiter mark (see mutex_lib.lua)
          end
        end
        return {R_BUSY, wait, pos}
      end
    end
  end
end

--@helpers
--@include mutex_lib.lua
local p = prefix_of(m)
local queue, sharded = string.sub(ARGV[2], 1, 1), string.sub(ARGV[2], 2, 2)
local name = string.sub(m, #p + 3)
local q = p .. K_QUEUE .. 'm:' .. name
local stop, grace = check_caller(p, hid, queue)
if stop then
  return stop
end
local st = m_load(m)
if st.hid == hid then
  return {R_GRANTED, tonumber(st.tok)}
end
local free, wait = m_free(p, st)
if free and grace > 0 then
  free, wait = false, grace
end
if free then
  local nxt = first_live(p, q)
  if not nxt or nxt == hid then
    if nxt then
      redis.call('LPOP', q)
    end
    local tok = m_grant(p, st, hid)
    m_save(m, q, st)
    return {R_GRANTED, tok}
  end
  m_handoff(p, st, q, sharded, name)
  wait = lease_pttl(p, nxt)
  st.changed = true
end
local reply = busy(q, hid, wait, queue, grace)
if queue == '1' then
  -- Queued: the waiter mark, and an idle time for a mutex created here (a
  -- waiter during a restart grace), so that it can expire.
  st.w, st.changed = true, true
  if not st.i then
    st.i = idle_ms(redis.call('HGET', p .. K_LEASE .. sid_of(hid), 'ttl'))
  end
end
if st.changed then
  m_save(m, q, st)
end
return reply
