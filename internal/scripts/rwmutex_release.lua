-- rwmutex_release.lua (with rwmutex_lib.lua): release a read-write mutex
-- held by a hold id, or withdraw that hold id from the queue. Releasing (or
-- withdrawing a queued writer that kept readers out) serves the queue in
-- the same call: the next writer, or all the consecutive readers at its head.
-- KEYS[1] {ns}:rw:<name>   KEYS[2] readers {ns}:rwr:<name>
-- KEYS[3] queue {ns}:q:rw:<name>   KEYS[4] the releasing session's lease
-- {ns}:s:<sid>
-- ARGV[1] hold id   ARGV[2] options "<sharded><withdraw><shared>": sharded
-- "1" for sharded pub/sub, withdraw "1" to withdraw the hold id for good
-- (see withdraw in common.lua), shared "1" for a read hold
-- Returns 1 when it was held and is released, 2 when it was only queued, 0
-- when it is neither (already released, or taken away): idempotent.
local hid, k, r, q = ARGV[1], KEYS[1], KEYS[2], KEYS[3]
local shared = string.sub(ARGV[2], 3, 3) == '1'

-- Fast paths, before the helpers exist (see scripts.go): a plain release
-- with nobody waiting, a reader's release that leaves live readers, and a
-- release that leaves nobody holding and hands over to the live waiters at
-- the head of the queue. Only without a lock delay pending ('free',
-- 'wfree': the full path computes their end). Once the hold is released,
-- anything unusual goes on with the full path below (released = true).
local released = false
if string.sub(ARGV[2], 2, 2) ~= '1' then
  local st = redis.call('HMGET', k, 'w', 'q', 'i', 'free', 'wfree', 'tok')
  --@inline rwmutex_release_idle.lua
  if shared then
    released = redis.call('HDEL', r, hid) == 1
  elseif st[1] == hid then
    redis.call('HDEL', k, 'w', 'wld')
    st[1] = false
    released = true
  end
  if released and not st[1] and not st[4] and not st[5] then
    local p = string.match(k, '^{[^}]*}:')
    -- Nobody waits when 'q' is unset (see rw_mark); a stale mark over an
    -- empty queue is cleared here.
    local waiting = st[2] and redis.call('LLEN', q) > 0
    if st[2] and not waiting then
      redis.call('HDEL', k, 'q')
    end
    local readers = shared and redis.call('HKEYS', r)
    if readers and readers[1] then
      -- Other readers hold: done when one of them is live and nobody
      -- waits, or a live writer waits first (it waits for the readers).
      -- Dead readers are the full path's (their lock delay starts there).
      if redis.call('EXISTS', p .. K_LEASE .. string.match(readers[1], P_HOLD_SID)) == 1 then
        if not waiting then
          return REL_FREED
        end
        local e = redis.call('LINDEX', q, '0')
        local w = string.match(e, '^([^.]+)%..*|w$')
        if w and redis.call('EXISTS', p .. K_LEASE .. w) == 1 then
          return REL_FREED
        end
      end
    elseif not waiting then
      if st[3] then
        redis.call('PEXPIRE', k, st[3]) -- idle: kept 'i' ms (see common.lua)
      end
      return REL_FREED
    elseif redis.call('HGET', KEYS[4], 'g') == '0' then
      -- Nobody holds and waiters queue: the releaser's lease says no
      -- restart grace is pending (see check_caller). Serve the queue as
      -- rw_serve does (rwmutex_serve.lua), dead waiters dropped on the
      -- way; once it is empty, the waiter mark goes and, when nobody was
      -- granted, the mutex is idle: kept 'i' ms (see common.lua).
      local self, readers, delay_w, last = nil, false, 0, st[6]
      local sharded, name = string.sub(ARGV[2], 1, 1), string.sub(k, #p + 4)
      local mine, granted, emptied = nil, 0, false
      --@inline rwmutex_serve.lua
      if emptied then
        redis.call('HDEL', k, 'q')
        if granted == 0 and st[3] then
          redis.call('PEXPIRE', k, st[3])
        end
      end
      return REL_FREED
    end
  end
end

--@helpers
--@include rwmutex_lib.lua
local sharded = string.sub(ARGV[2], 1, 1)
local p = prefix_of(k)
local name = string.sub(k, #p + 4)
if released then
  rw_serve(p, k, r, q, sharded, name, nil)
  rw_idle(p, k, r, q)
  rw_mark(k, q, nil)
  return REL_FREED
end
if string.sub(ARGV[2], 2, 2) == '1' then
  withdraw(p, hid)
end
local out = REL_NOT_FOUND
if shared then
  if redis.call('HDEL', r, hid) == 1 then
    out = REL_FREED
  end
elseif redis.call('HGET', k, 'w') == hid then
  redis.call('HDEL', k, 'w', 'wld')
  out = REL_FREED
end
if out == REL_NOT_FOUND and redis.call('LREM', q, '0', rw_entry(hid, shared)) > 0 then
  out = REL_DEQUEUED
end
if out ~= REL_NOT_FOUND then
  rw_serve(p, k, r, q, sharded, name, nil)
  rw_idle(p, k, r, q)
  rw_mark(k, q, nil)
end
return out
