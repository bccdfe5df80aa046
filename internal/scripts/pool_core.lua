-- pool_core.lua: the operations on one pool member (see pool_lib.lua for
-- the keys): those of the fast paths, pool_acquire_fast.lua and
-- pool_release_fast.lua, and pool_grant. The single pool scripts include
-- their own fast path's file before it and this after "--@helpers"; the
-- other pool scripts include this, before their helpers too. It uses
-- nothing but new_token.lua (inlined) and fastpath.lua's now_s.
--@include pool_acquire_fast.lua
--@include pool_release_fast.lua

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
