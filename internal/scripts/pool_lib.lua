-- pool_lib.lua: helpers for the pool scripts, included after common.lua.
-- A pool is these keys (b = "{ns}:pool:<name>:"):
--   free   b.."f"        zset: free member -> release order: 0 for members
--                        never used, else max(server time in µs, highest score
--                        + 1), so the lowest score is the least recently
--                        released even among releases within one millisecond
--   held   b.."h"        hash: held member -> hold id
--   tok    b.."t"        hash: member -> last token (kept while not a member)
--   sess   b.."s"        hash: session id -> number of members it holds
--   per session b.."i:"..sid   hash: hold id -> the member it holds, so that
--                        finding a hold's member is O(1) however many the
--                        session holds; and "~ld" -> the session's lock delay
--                        (ms) when it has one (a hold id always has a ".")
--   delay  b.."d"        zset: member -> end (server ms) of the lock delay of
--                        a lost holder, which stays in held until then
--   queue  {ns}:q:pool:<name>   list of "<hold id>" (any member) or
--                        "<hold id>@<member>" (that member), FIFO
-- Members held by a session whose lease is gone are reaped (back to free)
-- when a request finds nothing free: the cost is O(holding sessions), not
-- O(members). A session with a lock delay leaves its members held (not
-- free, not granted) for that delay from the reap, and the first reap
-- after it ends frees them (see pool_reap). A release or a removal frees
-- or drops a member at once; reclaim.lua records "~ld" as pool_grant does.
-- The per-session hashes and the delay zset are not passed in KEYS (their
-- names depend on the holders, or they are new): like every key here they
-- carry the namespace hash tag, so they live in the same cluster slot.
-- The operations on one member (grant, release, free) are in pool_core.lua
-- and the fast paths' files it includes (see its header).

local function pool_is_member(b, key)
  return pool_is_free(b, key) or redis.call('HEXISTS', b .. 'h', key) == 1
end

-- pool_reap returns the members of sessions whose lease is gone to the
-- free set, and the number it freed. A session with a lock delay ("~ld" in
-- its index) leaves its members held under their lost hold ids, listed in
-- the delay zset until now + that delay; members whose delay has ended are
-- freed here (unless a reclaim took them meanwhile).
local function pool_reap(p, b)
  local n = 0
  local ended = redis.call('ZRANGE', b .. 'd', '-inf', string.format('%.0f', now_ms()), 'BYSCORE')
  for _, k in ipairs(ended) do
    redis.call('ZREM', b .. 'd', k)
    local h = redis.call('HGET', b .. 'h', k)
    if h and not alive(p, h) then
      redis.call('HDEL', b .. 'h', k)
      pool_mark_free(b, k)
      n = n + 1
    end
  end
  for _, sid in ipairs(redis.call('HKEYS', b .. 's')) do
    if redis.call('EXISTS', p .. K_LEASE .. sid) == 0 then
      local idx = b .. K_POOL_INDEX .. sid
      local held = redis.call('HGETALL', idx)
      local ld = 0
      for i = 1, #held, 2 do
        if held[i] == '~ld' then
          ld = tonumber(held[i + 1])
        end
      end
      for i = 1, #held, 2 do
        local k = held[i + 1]
        if held[i] ~= '~ld' and redis.call('HGET', b .. 'h', k) == held[i] then
          if ld > 0 then
            redis.call('ZADD', b .. 'd', string.format('%.0f', now_ms() + ld), k)
          else
            redis.call('HDEL', b .. 'h', k)
            pool_mark_free(b, k)
            n = n + 1
          end
        end
      end
      redis.call('DEL', idx)
      redis.call('HDEL', b .. 's', sid)
    end
  end
  return n
end

-- pool_delay_left returns how long member k's lock delay still runs (ms),
-- or -1 when it is not in one.
local function pool_delay_left(b, k)
  local e = redis.call('ZSCORE', b .. 'd', k)
  if e then
    local t = tonumber(e) - now_ms()
    if t > 0 then
      return t
    end
  end
  return -1
end

-- pool_wait returns when waiters for any member should re-check (ms, -1
-- when unknown): the smallest remaining lease TTL among the holding
-- sessions, or the end of the first lock delay if sooner.
local function pool_wait(p, b)
  local wait = -1
  for _, sid in ipairs(redis.call('HKEYS', b .. 's')) do
    local t = redis.call('PTTL', p .. K_LEASE .. sid)
    if t > 0 and (wait < 0 or t < wait) then
      wait = t
    end
  end
  local first = redis.call('ZRANGE', b .. 'd', '0', '0', 'WITHSCORES')
  if first[2] then
    local t = tonumber(first[2]) - now_ms()
    if t > 0 and (wait < 0 or t < wait) then
      wait = t
    end
  end
  return wait
end

-- pool_member_wait returns when a waiter for member k should re-check (ms,
-- -1 when unknown): when its holder's lease could expire, or when its lock
-- delay ends.
local function pool_member_wait(p, b, k)
  local h = redis.call('HGET', b .. 'h', k)
  if not h then
    return -1
  end
  local t = lease_pttl(p, h)
  if t > 0 then
    return t
  end
  return pool_delay_left(b, k)
end

local function pool_entry_parts(e)
  local hid, key = string.match(e, '^([^@]+)@(.*)$')
  if hid then
    return hid, key
  end
  return e, nil
end

-- pool_serve grants free members to queued live waiters in order: a waiter
-- for any member takes the least recently released one, a waiter for one
-- member takes it if it is free. Dead members are reaped at most once.
-- Returns the number of grants.
local function pool_serve(p, b, q, sharded, name)
  if grace_left(p) ~= 0 then
    return 0 -- no grants during a restart grace: waiters re-check after it
  end
  local reaped, granted = false, 0
  local entries = redis.call('LRANGE', q, '0', '-1')
  for _, e in ipairs(entries) do
    if not alive(p, e) then
      redis.call('LREM', q, '1', e)
    else
      local hid, key = pool_entry_parts(e)
      if key then
        if not pool_is_free(b, key) and not reaped then
          pool_reap(p, b)
          reaped = true
        end
        if not pool_is_free(b, key) then
          if not pool_is_member(b, key) then
            -- No longer a member: tell the waiter to re-check (it then fails).
            redis.call('LREM', q, '1', e)
            notify(p, sharded, hid, 'x')
          end
          key = nil
        end
      else
        key = pool_free_one(b)
        if not key and not reaped then
          pool_reap(p, b)
          reaped = true
          key = pool_free_one(b)
        end
      end
      if key then
        redis.call('LREM', q, '1', e)
        local tok = pool_grant(p, b, key, hid)
        notify(p, sharded, hid, 'g', tok, key)
        granted = granted + 1
      end
    end
  end
  return granted
end
