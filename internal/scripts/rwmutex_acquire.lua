-- rwmutex_acquire.lua (with rwmutex_lib.lua): grant a read-write mutex,
-- shared or exclusive, if that is possible now and nobody waits before the
-- caller, else queue the caller FIFO (when asked to wait).
-- KEYS[1] {ns}:rw:<name>   KEYS[2] readers {ns}:rwr:<name>
-- KEYS[3] queue {ns}:q:rw:<name>   KEYS[4] the caller's lease {ns}:s:<sid>
-- ARGV[1] hold id   ARGV[2] options "<queue><sharded><shared>": queue "1"
-- to queue when busy, sharded "1" for sharded pub/sub, shared "1" for a
-- read (shared) hold, "0" for a write (exclusive) one
-- Returns the bare token when its fast path grants (see parseAcquire), {1,
-- token} when the full path does (also when already granted to this hold
-- id, so a retry after a lost reply is safe); {0, wait ms, queue position or
-- -1} when not; {-8, grace ms} when not, during a restart grace, to a caller
-- that does not queue; {-1} when the caller's own lease is gone; {-5} when
-- the epoch marker is missing; {-7} when the hold id was withdrawn.
-- Waiters that can be granted (after a holder died, or a queued writer
-- withdrew) are served here first, so a newcomer never overtakes them.
local hid, k, r, q = ARGV[1], KEYS[1], KEYS[2], KEYS[3]
local shared = string.sub(ARGV[2], 3, 3) == '1'

-- The fast path, before the helpers exist (see scripts.go), when the
-- caller's lease exists with no grace pending (g = "0", see check_caller)
-- and hid is not withdrawn: see rwmutex_acquire_fast.lua, which returns
-- its reply. Anything else takes the full path below, which reads
-- everything again.
local lease = redis.call('HMGET', KEYS[4], 'g', 'x:' .. hid, 'ttl', 'ld')
if lease[1] == '0' and not lease[2] then
  local rd, aq, ttl, ld = r, ARGV[2], lease[3], lease[4]
  --@inline rwmutex_acquire_fast.lua
end

--@helpers
--@include rwmutex_lib.lua
local queue, sharded = string.sub(ARGV[2], 1, 1), string.sub(ARGV[2], 2, 2)
local p = prefix_of(k)
local name = string.sub(k, #p + 4)
local stop, grace = check_caller(p, hid, queue)
if stop then
  return stop
end
if shared then
  local v = redis.call('HGET', r, hid)
  if v then
    return {R_GRANTED, tonumber(string.match(v, ':(%d+)$'))}
  end
elseif redis.call('HGET', k, 'w') == hid then
  return {R_GRANTED, tonumber(redis.call('HGET', k, 'tok'))}
end
-- Every exit below keeps the waiter mark in step with the queue (rw_mark).
local function done(reply)
  rw_mark(k, q, lease[3])
  return reply
end
local entry = rw_entry(hid, shared)
if redis.call('LPOS', q, entry) then
  -- A re-check of a queued caller: serve the queue, the caller may be next.
  local tok = rw_serve(p, k, r, q, sharded, name, entry)
  if tok then
    return done({1, tok})
  end
  return done(busy(q, entry, grace > 0 and grace or rw_wait(p, k, r), queue, grace))
end
rw_serve(p, k, r, q, sharded, name, nil)
local wait = 0
if grace > 0 then
  wait = grace
else
  local w = rw_writer(p, k)
  local rd = not w and not shared and rw_reader(p, k, r)
  -- A live holder's wait is at least 1 ms (see lease_pttl): 0 means free here.
  if w then
    wait = lease_pttl(p, w)
  elseif rd then
    wait = lease_pttl(p, rd)
  else
    local all, wd = rw_delay(k) -- after rw_reader: a dead reader's delay starts there
    if shared and all > 0 then
      wait = all
    elseif not shared and wd > 0 then
      wait = wd
    elseif redis.call('LLEN', q) > 0 then
      wait = rw_wait(p, k, r) -- someone waits before the caller
    end
  end
  if wait == 0 then
    return done({1, rw_grant(p, k, r, hid, shared)})
  end
end
if queue ~= '1' then
  rw_idle(p, k, r, q) -- dead holders cleared, maybe nobody left
end
return done(busy(q, entry, wait, queue, grace))
