-- pool_core.lua: the operations on one pool member (see pool_lib.lua for
-- the keys), and the fast paths of pool_acquire.lua and pool_release.lua
-- built from them. It goes before the fast paths of the pool scripts (see
-- scripts.go) and in their batch scripts (see batch.go), so it uses
-- nothing but new_token.lua (inlined) and fastpath.lua's now_s: no helper
-- of common.lua exists there yet.

-- pool_free_one returns the least recently released free member, or nil.
local function pool_free_one(b)
  local k = redis.call('ZRANGE', b .. 'f', '0', '0')
  return k[1]
end

-- pool_mark_free makes key free as the most recently released member: its
-- score is max(server time in µs, highest score + 1), new_token.lua's rule.
local function pool_mark_free(b, key)
  local top = redis.call('ZRANGE', b .. 'f', '-1', '-1', 'WITHSCORES')
  local last, tok, n = top[2]
  --@inline new_token.lua
  redis.call('ZADD', b .. 'f', tok, key)
end

local function pool_is_free(b, key)
  return redis.call('ZSCORE', b .. 'f', key) ~= false
end

-- pool_take makes hid, of session sid, the holder of member key, which the
-- caller has taken out of the free set and entered in sid's index, and
-- returns its token, max(last + 1, server time in µs) (new_token.lua).
local function pool_take(b, key, hid, sid)
  redis.call('HSET', b .. 'h', key, hid)
  redis.call('HINCRBY', b .. 's', sid, '1')
  local last, tok, n = redis.call('HGET', b .. 't', key)
  --@inline new_token.lua
  redis.call('HSET', b .. 't', key, tok)
  return n
end

-- pool_grant makes hid the holder of free member key and returns its
-- token (pool_take). hid's session's lock delay ld (read from its lease
-- when nil) is recorded in its index (see "~ld"): it still applies once
-- that session's lease is gone.
local function pool_grant(p, b, key, hid, ld)
  local sid = string.match(hid, P_HOLD_SID)
  if ld == nil then
    ld = redis.call('HGET', p .. K_LEASE .. sid, 'ld')
  end
  redis.call('ZREM', b .. 'f', key)
  if ld and ld ~= '0' then
    redis.call('HSET', b .. K_POOL_INDEX .. sid, hid, key, '~ld', ld)
  else
    redis.call('HSET', b .. K_POOL_INDEX .. sid, hid, key)
  end
  return pool_take(b, key, hid, sid)
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

-- pool_acquire_fast grants hid a free member (any: the least recently
-- released; or want) when that takes nothing else: nobody waits, hid has
-- no entry in its session's index (it holds nothing yet), and a member is
-- free without reaping dead holders. The caller checked hid's lease: it
-- exists with no grace pending (g = "0", see check_caller) and hid is not
-- withdrawn; ld is its lock delay. It returns the reply, or nil, having
-- changed nothing, for the full path.
-- It does pool_grant's work with one command less when the session has no
-- lock delay: HSETNX writes hid's index entry only when hid has none,
-- which is pool_held_by's question (an entry means a retried grant, or a
-- stale entry whose member hid no longer holds: both the full path's).
local function pool_acquire_fast(q, b, hid, want, ld)
  if redis.call('LLEN', q) ~= 0 then
    return nil
  end
  local k
  if want == '' then
    k = pool_free_one(b)
  elseif pool_is_free(b, want) then
    k = want
  end
  if not k then
    return nil
  end
  local sid = string.match(hid, P_HOLD_SID)
  local idx = b .. K_POOL_INDEX .. sid
  if redis.call('HSETNX', idx, hid, k) == 0 then
    return nil
  end
  redis.call('ZREM', b .. 'f', k)
  if ld and ld ~= '0' then
    redis.call('HSET', idx, '~ld', ld)
  end
  return {R_GRANTED, pool_take(b, k, hid, sid), k}
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
