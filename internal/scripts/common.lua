-- common.lua: helpers prepended to every other script; not a script of its own.
-- p is the namespace key prefix "{ns}:". Hold ids look like "<sid>.<n>", so the
-- session that owns a hold (and whose lease keeps it valid) is part of its id.
-- Every key built here starts with p and so shares the namespace hash slot.

local function sid_of(hid)
  return string.match(hid, '^([^.]+)%.')
end

-- alive reports whether the lease of the session owning hold id hid exists.
local function alive(p, hid)
  return redis.call('EXISTS', p .. 's:' .. sid_of(hid)) == 1
end

-- lease_pttl returns the remaining TTL (ms) of hid's session lease, or a negative value.
local function lease_pttl(p, hid)
  return redis.call('PTTL', p .. 's:' .. sid_of(hid))
end

local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- next_token stores and returns max(last + 1, server time in microseconds) in
-- field f of hash k: strictly increasing per resource, also after Redis lost
-- the hash, as long as the server clock does not step back.
local function next_token(k, f)
  local last = tonumber(redis.call('HGET', k, f) or '0')
  local tok = math.max(last + 1, now_us())
  redis.call('HSET', k, f, string.format('%.0f', tok))
  return tok
end

-- notify publishes msg on the notification channel of hid's session.
local function notify(p, sharded, hid, msg)
  local ch = p .. 'n:' .. sid_of(hid)
  if sharded == '1' then
    redis.call('SPUBLISH', ch, msg)
  else
    redis.call('PUBLISH', ch, msg)
  end
end

-- revoke records that hold hid was taken away from its (live) session: the
-- session's next heartbeat reports it, and a notification tells it at once.
local function revoke(p, sharded, hid)
  local sid = sid_of(hid)
  local lease = p .. 's:' .. sid
  local ttl = redis.call('PTTL', lease)
  if ttl > 0 then
    local r = p .. 'r:' .. sid
    redis.call('SADD', r, hid)
    redis.call('PEXPIRE', r, ttl)
    notify(p, sharded, hid, 'r|' .. hid)
  end
end

local function now_ms()
  return math.floor(now_us() / 1000)
end

-- grace_left reads the epoch marker {ns}:epoch, whose value is the server
-- time (ms) until which grants are refused after Redis lost its data. It
-- returns -1 when the marker is missing (the data was lost: the client
-- recreates the marker and retries), the ms of grace left, or 0.
local function grace_left(p)
  local until_ms = redis.call('GET', p .. 'epoch')
  if not until_ms then
    return -1
  end
  local left = tonumber(until_ms) - now_ms()
  if left > 0 then
    return left
  end
  return 0
end

-- check_caller runs first in every acquire script. It returns the reply to
-- give at once, or nil when the caller may go on, and the grace left (see
-- grace_left): {-5} when the epoch marker is missing; {-1} when the caller's
-- lease is gone; {0, grace, -1} when it is gone during a restart grace (the
-- caller's session may still reclaim it: come back after the grace).
local function check_caller(p, hid)
  local grace = grace_left(p)
  if grace < 0 then
    return {-5}, grace
  end
  if not alive(p, hid) then
    if grace > 0 then
      return {0, grace, -1}, grace
    end
    return {-1}, grace
  end
  return nil, grace
end

-- first_live drops dead sessions' entries from the head of waiter queue q and
-- returns the first live hold id (left in the queue), or nil.
local function first_live(p, q)
  while true do
    local h = redis.call('LINDEX', q, 0)
    if not h then
      return nil
    end
    if alive(p, h) then
      return h
    end
    redis.call('LPOP', q)
  end
end

-- single_grant makes hid the holder of single-holder resource hash k (mutex,
-- election) and returns its new token. The holder session's lock delay is
-- copied so that it still applies after that session's lease is gone.
local function single_grant(p, k, hid)
  local tok = next_token(k, 'tok')
  local ld = redis.call('HGET', p .. 's:' .. sid_of(hid), 'ld')
  redis.call('HSET', k, 'hid', hid)
  if ld and ld ~= '0' then
    redis.call('HSET', k, 'ld', ld)
  else
    redis.call('HDEL', k, 'ld')
  end
  return tok
end

-- single_handoff grants free resource k to the first live waiter of queue q,
-- if any, and notifies it with "g|<hid>|<token>|<resource>". Returns that
-- hold id or nil.
local function single_handoff(p, k, q, sharded, resource)
  if grace_left(p) ~= 0 then
    return nil -- no grants during a restart grace: waiters re-check after it
  end
  local nxt = first_live(p, q)
  if not nxt then
    return nil
  end
  redis.call('LPOP', q)
  local tok = single_grant(p, k, nxt)
  notify(p, sharded, nxt, 'g|' .. nxt .. '|' .. string.format('%.0f', tok) .. '|' .. resource)
  return nxt
end

-- single_free reports whether single-holder resource k has no live holder and
-- no lock delay pending; a holder whose lease is gone is cleared, starting its
-- lock delay. The second result is the time to wait (ms) when it is not free.
local function single_free(p, k)
  local cur = redis.call('HGET', k, 'hid')
  if cur then
    if alive(p, cur) then
      return false, lease_pttl(p, cur), cur
    end
    local ld = tonumber(redis.call('HGET', k, 'ld') or '0')
    redis.call('HDEL', k, 'hid', 'ld')
    if ld > 0 then
      redis.call('HSET', k, 'free', now_ms() + ld)
    end
  end
  local free = tonumber(redis.call('HGET', k, 'free') or '0')
  if free > 0 then
    local wait = free - now_ms()
    if wait > 0 then
      return false, wait, nil
    end
    redis.call('HDEL', k, 'free')
  end
  return true, 0, nil
end
