-- mutex_acquire_fast.lua: the fast path of a mutex acquire attempt, as
-- statement text (no function of its own: every function is a closure
-- Redis creates on every call, see scripts.go), inlined where it runs: by
-- mutex_acquire.lua at its top level before its helpers, and by
-- mutex_acquire_batch.lua in its loop over the attempts, its returns
-- turned into "r = ..." (see expand in assemble.go). It reads the mutex
-- string (see mutex_value.lua) with anchored matches, as it runs on every
-- lock.
-- It reads the caller's lease (key lk) only before it grants or queues,
-- unless the includer has read it for it (ok true; mutex_acquire_batch.lua
-- reads it once for all its attempts): the lease must exist with no grace
-- pending (g = "0", see check_caller) and hid must not be withdrawn, else
-- the full path decides. A try (queue neither "1" nor "2") that finds the
-- mutex held by a live session answers busy without it, writing nothing
-- (where the full path would answer that the caller's lease is gone, that
-- a restart grace runs, that hid was withdrawn or that the epoch marker is
-- missing). It uses the includer's names: ok (nil until the lease is
-- read), lk, m (the mutex key), hid, aq (a string whose first character
-- is "1" to queue when busy, "2" to queue a hold id sent for the first
-- time, which is in no queue yet: no LPOS looks for it; anything else not
-- to queue), p (the prefix, or nil), held and tail (held_ms and
-- "|<ld>|<i>"; nil, in mutex_acquire.lua, to read them from its ARGV[2]
-- when needed).
-- It returns the reply (as mutex_acquire.lua's), each return the last
-- thing its path does, and falls through, having changed nothing, for
-- what the full path must decide: a holder whose lease is gone, a lock
-- delay, waiters before the caller, a queue left without its mutex, a
-- retried grant, a hash of an older layout.
local v = redis.pcall('GET', m) -- an error (a hash of an older layout) takes the full path
local last, wait, qa
if not v then
  -- No mutex: never used, or expired, which a held mutex or a running
  -- lock delay never is (see mutex_value.lua). Grant, with a token from
  -- the clock alone (see common.lua idle_ms), unless a queue is left: a
  -- queue can outlive its mutex (a lock delay keeps the mutex only until
  -- it ends, which a waiter's heartbeat may not renew in time), and the
  -- full path serves its live waiters first.
  p = p or string.match(m, '^{[^}]*}:')
  if redis.call('EXISTS', p .. K_QUEUE .. 'm:' .. string.sub(m, #p + 3)) == 0 then
    last = false
  end
elseif type(v) == 'string' then
  -- No holder, no lock delay running, nobody waiting: grant, if the mutex
  -- has a token. (Anchored matches: each string function called costs
  -- Redis about 1k instructions, more than a short match.)
  last = string.match(v, '^|(%d+)|%d*|%d*||$')
  if not last then
    local holder, sid = string.match(v, '^(([^.|]+)%.[^|]*)|')
    if holder and holder ~= hid then
      -- Held by a live session: busy, the same reply as busy() in
      -- common.lua; queued first when asked. (sid_of and prefix_of
      -- spelled out: as helpers in fastpath.lua they would cost every
      -- lock+release a closure each, see docs/performance.md.)
      p = p or string.match(m, '^{[^}]*}:')
      wait = redis.call('PTTL', p .. K_LEASE .. sid)
      if wait > 0 then
        qa = string.sub(aq, 1, 1)
      else
        wait = nil -- a holder whose lease is gone: the full path's
      end
    end
  end
end
if wait and qa ~= '1' and qa ~= '2' then
  return {R_BUSY, wait, -1} -- a try: no lease needed, nothing written
elseif last ~= nil or wait then
  -- A grant (last) or a queue entry (wait) needs the caller's lease, read
  -- here unless the includer has (ok).
  if ok == nil then
    local l = redis.call('HMGET', lk, 'g', 'x:' .. hid)
    ok = l[1] == '0' and not l[2]
  end
  if ok and wait then
    local q = p .. K_QUEUE .. 'm:' .. string.sub(m, #p + 3)
    local pos = qa == '1' and redis.call('LPOS', q, hid)
    if not pos then
      pos = redis.call('RPUSH', q, hid) - 1
      if pos == 0 then
        -- A new queue expires unless its waiters' heartbeats keep it.
        if not held then
          held = string.match(ARGV[2], '^..(%d+)')
        end
        redis.call('PEXPIRE', q, held)
      end
      if string.sub(v, -1) == '|' then
        redis.call('SET', m, v .. '1', 'KEEPTTL') -- the waiter mark (see mutex_value.lua)
      end
    end
    return {R_BUSY, wait, pos}
  elseif ok then
    -- Grant: the mutex string of a new holder, kept held_ms (see
    -- common.lua; the holder's heartbeat keeps it). SET also drops the
    -- expiry of an idle mutex.
    if not tail then
      held, tail = string.match(ARGV[2], '^..(%d+)(|.*)$') -- one call, not three
    end
    local tok, n
    --@inline new_token.lua
    redis.call('SET', m, hid .. '|' .. tok .. tail .. '||', 'PX', held)
    return n -- a grant: its bare token (see parseAcquire)
  end
end
