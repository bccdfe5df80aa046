-- semaphore_lib.lua: helpers for the semaphore scripts, prepended after common.lua.
-- A semaphore is three keys:
--   meta    {ns}:sem:<name>     hash: limit, used (permits of recorded holders), tok (last token),
--                               i (idle expiry ms), set ("1" when an operator set the limit)
--   holders {ns}:semh:<name>    hash: hold id -> "<n>:<token>"
--   queue   {ns}:q:sem:<name>   list of "<hold id>#<n>", FIFO
-- "used" may count holders whose lease is gone; sem_purge drops them, and runs
-- only when a request does not fit, so a grant that fits is O(1).

local function sem_n(entry)
  return tonumber(string.match(entry, '#(%d+)$'))
end

local function sem_hid(entry)
  return string.match(entry, '^([^#]+)')
end

local function sem_used(meta)
  return tonumber(redis.call('HGET', meta, 'used') or '0')
end

-- sem_purge drops holders whose lease is gone and returns the recomputed use.
local function sem_purge(p, meta, holders)
  local used = 0
  local all = redis.call('HGETALL', holders)
  for i = 1, #all, 2 do
    if alive(p, all[i]) then
      used = used + tonumber(string.match(all[i + 1], '^(%d+)'))
    else
      redis.call('HDEL', holders, all[i])
    end
  end
  redis.call('HSET', meta, 'used', used)
  return used
end

-- sem_fits reports whether n more permits fit under the limit, purging dead
-- holders first when that is what it takes.
local function sem_fits(p, meta, holders, n)
  local limit = tonumber(redis.call('HGET', meta, 'limit') or '0')
  if sem_used(meta) + n <= limit then
    return true
  end
  return sem_purge(p, meta, holders) + n <= limit
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
-- hid's session sets how long meta is kept once idle (see common.lua).
local function sem_grant(p, meta, holders, hid, n)
  local tok = next_token(meta, 'tok')
  redis.call('HSET', holders, hid, n .. ':' .. string.format('%.0f', tok))
  redis.call('HINCRBY', meta, 'used', n)
  local l = redis.call('HMGET', p .. K_LEASE .. sid_of(hid), 'ttl', 'ld')
  redis.call('HSET', meta, 'i', idle_ms(l[1]))
  sem_keep(meta, holders, held_ms(l[1], l[2]))
  return tok
end

-- sem_idle lets meta expire when nobody holds a permit and nobody waits
-- (the holders hash and the queue are gone when empty), unless an operator
-- set the limit: that limit is configuration and stays until cleared.
local function sem_idle(meta, holders, q)
  if redis.call('EXISTS', holders, q) == 0 and not redis.call('HGET', meta, 'set') then
    expire_idle(meta, redis.call('HGET', meta, 'i'), false)
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
      return
    end
    local n = sem_n(e)
    local hid = sem_hid(e)
    if n > limit then
      redis.call('LPOP', q)
      notify(p, sharded, hid, 'x|' .. hid)
    elseif sem_fits(p, meta, holders, n) then
      redis.call('LPOP', q)
      local tok = sem_grant(p, meta, holders, hid, n)
      notify(p, sharded, hid, 'g|' .. hid .. '|' .. string.format('%.0f', tok) .. '|' .. name)
    else
      return
    end
  end
end

-- sem_held returns the token of hid's grant, or nil.
local function sem_held(holders, hid)
  local v = redis.call('HGET', holders, hid)
  if v then
    return tonumber(string.match(v, ':(%d+)$'))
  end
  return nil
end

-- sem_wait returns the smallest remaining lease TTL of the live holders: when
-- the first of them could expire, so waiters re-check then.
local function sem_wait(p, holders)
  local wait = -1
  for _, hid in ipairs(redis.call('HKEYS', holders)) do
    local t = lease_pttl(p, hid)
    if t > 0 and (wait < 0 or t < wait) then
      wait = t
    end
  end
  return wait
end
