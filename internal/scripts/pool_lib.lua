-- pool_lib.lua: helpers for the pool scripts, prepended after common.lua.
-- A pool is these keys (b = "{ns}:pool:<name>:"):
--   free   b.."f"        zset: free member -> time (ms) it became free; the
--                        lowest score is the least recently released
--   held   b.."h"        hash: held member -> hold id
--   tok    b.."t"        hash: member -> last token (kept while not a member)
--   sess   b.."s"        hash: session id -> number of members it holds
--   per session b.."k:"..sid   set of the members that session holds
--   queue  {ns}:q:pool:<name>   list of "<hold id>" (any member) or
--                        "<hold id>@<member>" (that member), FIFO
-- Members held by a session whose lease is gone are reaped (back to free)
-- when a request finds nothing free: the cost is O(holding sessions), not
-- O(members).

local function pool_free_one(b)
  local k = redis.call('ZRANGE', b .. 'f', 0, 0)
  return k[1]
end

local function pool_is_free(b, key)
  return redis.call('ZSCORE', b .. 'f', key) ~= false
end

local function pool_is_member(b, key)
  return pool_is_free(b, key) or redis.call('HEXISTS', b .. 'h', key) == 1
end

local function pool_grant(b, key, hid)
  local sid = sid_of(hid)
  redis.call('ZREM', b .. 'f', key)
  redis.call('HSET', b .. 'h', key, hid)
  redis.call('HINCRBY', b .. 's', sid, 1)
  redis.call('SADD', b .. 'k:' .. sid, key)
  local last = tonumber(redis.call('HGET', b .. 't', key) or '0')
  local tok = math.max(last + 1, now_us())
  redis.call('HSET', b .. 't', key, string.format('%.0f', tok))
  return tok
end

-- pool_unhold forgets that key is held (by hid); it does not make it free.
local function pool_unhold(b, key, hid)
  local sid = sid_of(hid)
  redis.call('HDEL', b .. 'h', key)
  redis.call('SREM', b .. 'k:' .. sid, key)
  if redis.call('HINCRBY', b .. 's', sid, -1) <= 0 then
    redis.call('HDEL', b .. 's', sid)
  end
end

-- pool_held_by returns the member hid holds, or nil.
local function pool_held_by(b, hid)
  for _, k in ipairs(redis.call('SMEMBERS', b .. 'k:' .. sid_of(hid))) do
    if redis.call('HGET', b .. 'h', k) == hid then
      return k
    end
  end
  return nil
end

-- pool_reap returns the members of sessions whose lease is gone to the free set.
local function pool_reap(p, b)
  local n = 0
  for _, sid in ipairs(redis.call('HKEYS', b .. 's')) do
    if redis.call('EXISTS', p .. 's:' .. sid) == 0 then
      local set = b .. 'k:' .. sid
      for _, k in ipairs(redis.call('SMEMBERS', set)) do
        local h = redis.call('HGET', b .. 'h', k)
        if h and sid_of(h) == sid then
          redis.call('HDEL', b .. 'h', k)
          redis.call('ZADD', b .. 'f', now_ms(), k)
          n = n + 1
        end
      end
      redis.call('DEL', set)
      redis.call('HDEL', b .. 's', sid)
    end
  end
  return n
end

-- pool_wait returns the smallest remaining lease TTL among the holding sessions.
local function pool_wait(p, b)
  local wait = -1
  for _, sid in ipairs(redis.call('HKEYS', b .. 's')) do
    local t = redis.call('PTTL', p .. 's:' .. sid)
    if t > 0 and (wait < 0 or t < wait) then
      wait = t
    end
  end
  return wait
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
local function pool_serve(p, b, q, sharded, name)
  local reaped = false
  local entries = redis.call('LRANGE', q, 0, -1)
  for _, e in ipairs(entries) do
    if not alive(p, e) then
      redis.call('LREM', q, 1, e)
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
            redis.call('LREM', q, 1, e)
            notify(p, sharded, hid, 'x|' .. hid)
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
        redis.call('LREM', q, 1, e)
        local tok = pool_grant(b, key, hid)
        notify(p, sharded, hid, 'g|' .. hid .. '|' .. string.format('%.0f', tok) .. '|' .. key)
      end
    end
  end
end
