-- mutex_release.lua: release the mutex held by a hold id, or withdraw that hold
-- id from the waiter queue. Releasing hands the mutex to the first live waiter.
-- KEYS[1] mutex {ns}:m:<name>   KEYS[2] queue {ns}:q:m:<name>
-- KEYS[3] the releasing session's lease {ns}:s:<sid>
-- ARGV[1] hold id   ARGV[2] options "<sharded><withdraw>": sharded "1" for
-- sharded pub/sub, withdraw "1" to withdraw the hold id for good (see
-- withdraw in common.lua)
-- Returns 1 when it was held and is released, 2 when it was only queued, 0
-- when it is neither (already released, or taken away): idempotent.
local hid, m, q = ARGV[1], KEYS[1], KEYS[2]
local withdrawing = string.sub(ARGV[2], 2, 2) == '1'

-- Fast paths, before the helpers exist (see scripts.go): a plain release
-- with nobody waiting, or with a live first waiter to hand over to.
local released = false
local held = not withdrawing and redis.call('HMGET', m, 'hid', 'i', 'w')
if held and held[1] == hid then
  -- Nobody waits when 'w' is unset (see mutex_queued); a stale 'w' over an
  -- empty queue is cleared here.
  if not held[3] or redis.call('LLEN', q) == 0 then
    redis.call('HDEL', m, 'hid', 'w') -- 'ld' only matters while 'hid' is set
    if held[2] then
      redis.call('PEXPIRE', m, held[2]) -- idle: kept 'i' ms (see common.lua)
    end
    return REL_FREED
  end
  redis.call('HDEL', m, 'hid')
  released = true
  -- The releaser's lease says no restart grace is pending (see
  -- check_caller); the first waiter's lease exists (it always has 'ld').
  -- Then hand over as single_handoff would.
  if redis.call('HGET', KEYS[3], 'g') == '0' then
    local p = string.match(m, '^{[^}]*}:')
    local nxt = redis.call('LINDEX', q, 0)
    local sid = string.match(nxt, '^([^.]+)%.')
    local l = redis.call('HMGET', p .. K_LEASE .. sid, 'ld', 'ttl')
    if l[1] then
      redis.call('LPOP', q)
      local tok = new_token(redis.call('HGET', m, 'tok'))
      redis.call('HSET', m, 'hid', nxt, 'tok', tok, 'ld', l[1], 'i', 2 * l[2])
      local msg = 'g|' .. nxt .. '|' .. tok .. '|' .. string.sub(m, #p + 3)
      redis.call(string.sub(ARGV[2], 1, 1) == '1' and 'SPUBLISH' or 'PUBLISH', p .. K_CHANNEL .. sid, msg)
      return REL_FREED
    end
  end
end

--@helpers
local p = prefix_of(m)
local sharded, name = string.sub(ARGV[2], 1, 1), string.sub(m, #p + 3)
if released then
  single_handoff(p, m, q, sharded, name)
  single_idle(m, q)
  return REL_FREED
end
if withdrawing then
  withdraw(p, hid)
end
if redis.call('HGET', m, 'hid') == hid then
  redis.call('HDEL', m, 'hid')
  single_handoff(p, m, q, sharded, name)
  single_idle(m, q)
  return REL_FREED
end
if redis.call('LREM', q, 0, hid) > 0 then
  single_idle(m, q)
  return REL_DEQUEUED
end
return REL_NOT_FOUND
