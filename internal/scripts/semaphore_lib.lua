-- semaphore_lib.lua: helpers for the semaphore scripts, included after common.lua.
-- A semaphore is three keys:
--   meta    {ns}:sem:<name>     hash: limit, used (permits of recorded holders and of
--                               running lock delays), tok (last token), i (idle expiry ms),
--                               set ("1" when an operator set the limit), delay (below),
--                               q (the waiter mark, below)
--   holders {ns}:semh:<name>    hash: hold id -> "<n>:<token>", or "<n>:<token>:<ld>"
--                               when the holder's session has a lock delay of ld ms
--                               (a missing ld is 0: reclaim.lua writes none)
--   queue   {ns}:q:sem:<name>   list of "<hold id>#<n>", FIFO
-- "used" may count holders whose lease is gone; sem_purge drops them, and runs
-- only when a request does not fit, so a grant that fits is O(1).
--
-- The waiter mark: meta's field q is "1" while the queue may hold an entry.
-- The one script that queues (semaphore_acquire.lua, through busy) sets it
-- with its entry; sem_serve clears it when it finds the queue empty. So no
-- mark means nobody waits, and the fast paths (semaphore_fast.lua) read it
-- with the meta fields they read anyway instead of asking LLEN. A mark
-- over an empty queue only sends a call down the full path, which clears
-- it. (Writes of a release older than the mark queue without it: a fast
-- path may then overtake those waiters until a full path serves them.)
--
-- Lock delay: sem_purge turns a dead holder recorded with a lock delay into
-- an entry "<end>:<n>" of meta's field delay ("|"-separated; end is server
-- ms, the purge's time plus the holder's lock delay): its n permits stay
-- counted in used until a purge after end drops the entry. The delay
-- starts when a purge notices the loss, as for every kind (the lease is
-- gone by then, so the lock delay is the one recorded at the grant). A
-- release, and a purge in reclaim.lua (during a restart grace, when a dead
-- holder may still reclaim its permits), start none. meta is kept at least
-- until the last delay ends (sem_purge, sem_idle).

local function sem_n(entry)
  return tonumber(string.match(entry, '#(%d+)$'))
end

local function sem_hid(entry)
  return string.match(entry, '^([^#]+)')
end

-- sem_holder parses a holders value: permits, token and lock delay (ms,
-- 0 when none was recorded).
local function sem_holder(v)
  local n, tok, ld = string.match(v, '^(%d+):(%d+):?(%d*)$')
  return tonumber(n), tonumber(tok), tonumber(ld) or 0
end

-- sem_delays returns the entries of meta's field delay (string d, or
-- false) whose lock delay has not ended, as "<end>:<n>" strings, their
-- permits, and the latest end (server ms, 0 when none).
local function sem_delays(d)
  local kept, n, last = {}, 0, 0
  if d then
    local now = now_ms()
    for e, k in string.gmatch(d, '(%d+):(%d+)') do
      local t = tonumber(e)
      if t > now then
        kept[#kept + 1] = e .. ':' .. k
        n = n + tonumber(k)
        last = math.max(last, t)
      end
    end
  end
  return kept, n, last
end

-- sem_purge drops holders whose lease is gone and returns the recomputed
-- use: the live holders' permits and those of running lock delays (ended
-- ones are dropped). With delay true a dead holder recorded with a lock
-- delay starts it now (see above); reclaim.lua calls it without. m is
-- meta's fields {delay, set} when the caller read them already.
local function sem_purge(p, meta, holders, delay, m)
  m = m or redis.call('HMGET', meta, 'delay', 'set')
  local kept, used = sem_delays(m[1])
  local longest = 0
  local all = redis.call('HGETALL', holders)
  for i = 1, #all, 2 do
    local n, _, ld = sem_holder(all[i + 1])
    if alive(p, all[i]) then
      used = used + n
    else
      redis.call('HDEL', holders, all[i])
      if delay and ld > 0 then
        kept[#kept + 1] = string.format('%.0f', now_ms() + ld) .. ':' .. n
        used = used + n
        longest = math.max(longest, ld)
      end
    end
  end
  if #kept > 0 then
    redis.call('HSET', meta, 'used', used, 'delay', table.concat(kept, '|'))
  else
    redis.call('HSET', meta, 'used', used)
    if m[1] then
      redis.call('HDEL', meta, 'delay')
    end
  end
  if longest > 0 and not m[2] then
    keep_at_least(meta, longest) -- a limit an operator set keeps no expiry
  end
  return used
end

-- sem_fits reports whether n more permits fit under the limit, purging dead
-- holders first when that is what it takes.
local function sem_fits(p, meta, holders, n)
  local m = redis.call('HMGET', meta, 'limit', 'used', 'delay', 'set')
  local limit = tonumber(m[1] or '0')
  if tonumber(m[2] or '0') + n <= limit then
    return true
  end
  return sem_purge(p, meta, holders, true, {m[3], m[4]}) + n <= limit
end

-- sem_keep keeps meta and holders at least ms more (see common.lua
-- keep_at_least): what a grant does, so that the keys of a semaphore whose
-- holders all crashed expire. A limit an operator set is configuration:
-- its meta keeps no expiry.
local function sem_keep(meta, holders, ms)
  keep_at_least(holders, ms)
  if not redis.call('HGET', meta, 'set') then
    keep_at_least(meta, ms)
  end
end

-- sem_grant records n permits for hid and returns the new token; the TTL of
-- hid's session sets how long meta is kept once idle (see common.lua), and
-- its lock delay is recorded with the permits (it still applies once the
-- session's lease is gone, see sem_purge).
local function sem_grant(p, meta, holders, hid, n)
  local tok = next_token(meta, 'tok')
  local l = redis.call('HMGET', p .. K_LEASE .. sid_of(hid), 'ttl', 'ld')
  local v = n .. ':' .. string.format('%.0f', tok)
  if l[2] and l[2] ~= '0' then
    v = v .. ':' .. l[2]
  end
  redis.call('HSET', holders, hid, v)
  redis.call('HINCRBY', meta, 'used', n)
  redis.call('HSET', meta, 'i', idle_ms(l[1]))
  sem_keep(meta, holders, held_ms(l[1], l[2]))
  return tok
end

-- sem_idle lets meta expire when nobody holds a permit and nobody waits
-- (the holders hash and the queue are gone when empty), unless an operator
-- set the limit: that limit is configuration and stays until cleared. A
-- running lock delay keeps meta until it ends.
local function sem_idle(meta, holders, q)
  if redis.call('EXISTS', holders, q) == 0 then
    local m = redis.call('HMGET', meta, 'set', 'i', 'delay')
    if not m[1] then
      local _, _, last = sem_delays(m[3])
      expire_idle(meta, m[2], last > 0 and last)
    end
  end
end

-- sem_serve grants permits to the queued live waiters in order while they
-- fit. The first one that does not fit stops the walk: a large request is
-- never starved by smaller ones behind it. A head asking for more than the
-- limit (SetLimit shrank it) could never be served and would block the
-- queue for good: it is dropped and told to re-check ("x|<hid>"), and its
-- re-check fails with a limit mismatch.
local function sem_serve(p, meta, holders, q, sharded, name)
  if grace_left(p) ~= 0 then
    return -- no grants during a restart grace: waiters re-check after it
  end
  local limit = tonumber(redis.call('HGET', meta, 'limit') or '0')
  while true do
    local e = first_live(p, q)
    if not e then
      redis.call('HDEL', meta, 'q') -- nobody waits: the waiter mark goes
      return
    end
    local n = sem_n(e)
    local hid = sem_hid(e)
    if n > limit then
      redis.call('LPOP', q)
      notify(p, sharded, hid, 'x')
    elseif sem_fits(p, meta, holders, n) then
      redis.call('LPOP', q)
      local tok = sem_grant(p, meta, holders, hid, n)
      notify(p, sharded, hid, 'g', tok, name)
    else
      return
    end
  end
end

-- sem_held returns the token of hid's grant, or nil.
local function sem_held(holders, hid)
  local v = redis.call('HGET', holders, hid)
  if v then
    local _, tok = sem_holder(v)
    return tok
  end
  return nil
end

-- sem_wait returns when waiters should re-check (ms, -1 when unknown): the
-- smallest remaining lease TTL of the live holders, when the first of them
-- could expire, or the end of the first running lock delay if sooner.
local function sem_wait(p, meta, holders)
  local wait = -1
  for _, hid in ipairs(redis.call('HKEYS', holders)) do
    local t = lease_pttl(p, hid)
    if t > 0 and (wait < 0 or t < wait) then
      wait = t
    end
  end
  local d = redis.call('HGET', meta, 'delay')
  if d then
    local now = now_ms()
    for e in string.gmatch(d, '(%d+):%d+') do
      local t = tonumber(e) - now
      if t > 0 and (wait < 0 or t < wait) then
        wait = t
      end
    end
  end
  return wait
end
