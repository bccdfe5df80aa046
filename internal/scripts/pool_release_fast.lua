-- pool_release_fast.lua: the fast path of pool_release.lua and what it
-- takes of the operations on one pool member (see pool_core.lua), under
-- the rules of pool_acquire_fast.lua: before that fast path and in
-- pool_release_batch.lua, with nothing of common.lua.

-- pool_mark_free makes key free as the most recently released member: its
-- score is max(server time in µs, highest score + 1), new_token.lua's rule.
local function pool_mark_free(b, key)
  local top = redis.call('ZRANGE', b .. 'f', '-1', '-1', 'WITHSCORES')
  local last, tok, n = top[2]
  --@inline new_token.lua
  redis.call('ZADD', b .. 'f', tok, key)
end

-- pool_unhold forgets that key is held (by hid); it does not make it free.
-- The session's index goes with its last member ("~ld" included).
local function pool_unhold(b, key, hid)
  local sid = string.match(hid, P_HOLD_SID)
  redis.call('HDEL', b .. 'h', key)
  if redis.call('HINCRBY', b .. 's', sid, '-1') <= 0 then
    redis.call('HDEL', b .. 's', sid)
    redis.call('HDEL', b .. K_POOL_INDEX .. sid, hid, '~ld')
  else
    redis.call('HDEL', b .. K_POOL_INDEX .. sid, hid)
  end
end

-- pool_held_by returns the member hid holds, or nil.
local function pool_held_by(b, hid)
  local k = redis.call('HGET', b .. K_POOL_INDEX .. string.match(hid, P_HOLD_SID), hid)
  if k and redis.call('HGET', b .. 'h', k) == hid then
    return k
  end
  return nil
end

-- pool_release_fast releases the member hid holds when nobody waits
-- (pool_serve would grant nothing): it returns REL_FREED, or nil, having
-- changed nothing, for the full path.
local function pool_release_fast(q, b, hid)
  if redis.call('LLEN', q) ~= 0 then
    return nil
  end
  local k = pool_held_by(b, hid)
  if not k then
    return nil
  end
  pool_unhold(b, k, hid)
  pool_mark_free(b, k)
  return REL_FREED
end
