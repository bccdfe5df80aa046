-- pool_acquire_fast.lua: the fast path of pool_acquire.lua and what it
-- takes of the operations on one pool member (see pool_core.lua). It goes
-- before that fast path and in pool_acquire_batch.lua, so it uses nothing
-- but new_token.lua (inlined) and fastpath.lua's now_s: no helper of
-- common.lua exists there yet. Each function here is a closure Redis
-- creates on every call of a script that has it, so a script's fast path
-- has only the ones it runs: pool_release_fast.lua has the release's.

-- pool_free_one returns the least recently released free member, or nil.
local function pool_free_one(b)
  local k = redis.call('ZRANGE', b .. 'f', '0', '0')
  return k[1]
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

