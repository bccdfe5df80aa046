-- rwmutex_lib.lua: helpers for the read-write mutex scripts, included after
-- common.lua (and by reclaim.lua). A read-write mutex is three keys:
--   k  {ns}:rw:<name>     hash: w (writer hold id), wld (the writer's lock
--                         delay, ms), tok (last token), i (idle ms), free (end
--                         of a lock delay that keeps everyone out, ms), wfree
--                         (end of one that keeps writers out, ms), q (waiter
--                         mark, see rw_mark)
--   r  {ns}:rwr:<name>    hash: reader hold id -> "<lock delay ms>:<token>"
--   q  {ns}:q:rw:<name>   list of "<hold id>|r" and "<hold id>|w", FIFO
-- A reader or writer is valid while it is recorded and its session's lease
-- exists (see common.lua); dead ones are cleared when a script meets them,
-- and their lock delay starts then: a lost writer's keeps everyone out, a
-- lost reader's keeps writers out (readers never conflicted with it).
--@include fastpath.lua

-- rw_entry returns the queue entry of hold id hid.
local function rw_entry(hid, shared)
  return hid .. (shared and '|r' or '|w')
end

-- rw_writer returns the live writer's hold id, or nil; a writer whose lease
-- is gone is cleared, starting its lock delay.
local function rw_writer(p, k)
  local v = redis.call('HMGET', k, 'w', 'wld')
  if not v[1] then
    return nil
  end
  if alive(p, v[1]) then
    return v[1]
  end
  local ld = tonumber(v[2] or '0')
  if ld > 0 then
    redis.call('HSET', k, 'free', string.format('%.0f', now_ms() + ld))
    keep_at_least(k, ld)
  end
  redis.call('HDEL', k, 'w', 'wld')
  return nil
end

-- rw_reader returns a live reader's hold id, or nil; readers whose lease is
-- gone are removed on the way, starting their lock delay for writers.
local function rw_reader(p, k, r)
  local all = redis.call('HGETALL', r)
  local wfree = 0
  local live = nil
  for i = 1, #all, 2 do
    if alive(p, all[i]) then
      live = all[i]
      break
    end
    local ld = tonumber(string.match(all[i + 1], '^(%d+):') or '0')
    if ld > 0 then
      wfree = math.max(wfree, now_ms() + ld)
    end
    redis.call('HDEL', r, all[i])
  end
  if wfree > 0 and wfree > tonumber(redis.call('HGET', k, 'wfree') or '0') then
    redis.call('HSET', k, 'wfree', string.format('%.0f', wfree))
    keep_at_least(k, wfree - now_ms())
  end
  return live
end

-- rw_left returns the ms left until server time until_ms (a string, or
-- false), 0 when it is past; a past one is removed from field f of k.
local function rw_left(k, f, until_ms)
  if not until_ms then
    return 0
  end
  local left = tonumber(until_ms) - now_ms()
  if left > 0 then
    return left
  end
  redis.call('HDEL', k, f)
  return 0
end

-- rw_delay returns the ms left of the lock delays of k: the one that keeps
-- everyone out, and the longest one that keeps writers out (0 when none).
local function rw_delay(k)
  local v = redis.call('HMGET', k, 'free', 'wfree')
  local all = rw_left(k, 'free', v[1])
  return all, math.max(all, rw_left(k, 'wfree', v[2]))
end

-- rw_record_grant stores what every grant stores in k: how long k is kept
-- once idle (twice the TTL of hid's session). It returns hid's session's
-- lock delay (ms, a string) and held_ms (see common.lua), how long the
-- grant keeps the keys at least.
local function rw_record_grant(p, k, hid)
  local l = redis.call('HMGET', p .. K_LEASE .. sid_of(hid), 'ld', 'ttl')
  redis.call('HSET', k, 'i', idle_ms(l[2]))
  return l[1] or '0', held_ms(l[2], l[1])
end

-- rw_grant grants k to hid, shared or exclusive, and returns the new token:
-- one counter for readers and writers, so every grant's token exceeds every
-- earlier one on the name.
local function rw_grant(p, k, r, hid, shared)
  local ld, held = rw_record_grant(p, k, hid)
  local tok = next_token(k, 'tok')
  if shared then
    redis.call('HSET', r, hid, ld .. ':' .. string.format('%.0f', tok))
    keep_at_least(r, held)
  else
    redis.call('HSET', k, 'w', hid, 'wld', ld)
  end
  keep_at_least(k, held)
  return tok
end

-- rw_serve serves queue q (rwmutex_serve.lua: the order, the grants, the
-- messages) when nothing stands in the way: a restart grace, a live
-- writer, a lost writer's lock delay. It returns self's token (the
-- caller's own entry, or nil; self is not notified) or nil, and how many it
-- granted.
local function rw_serve(p, k, r, q, sharded, name, self)
  if redis.call('LLEN', q) == 0 then
    return nil, 0
  end
  if grace_left(p) ~= 0 then
    return nil, 0
  end
  if rw_writer(p, k) then
    return nil, 0
  end
  local readers = rw_reader(p, k, r) ~= nil -- first: a dead reader's lock delay starts
  local delay_all, delay_w = rw_delay(k)
  if delay_all > 0 then
    return nil, 0
  end
  local last = redis.call('HGET', k, 'tok')
  local mine, granted, emptied = nil, 0, false
  --@inline rwmutex_serve.lua
  return mine, granted
end

-- rw_idle lets k expire when nobody holds it and nobody waits (the readers
-- hash and the queue are gone when empty; a dead reader left in the hash is
-- cleared first).
local function rw_idle(p, k, r, q)
  if redis.call('HEXISTS', k, 'w') == 1 or redis.call('LLEN', q) > 0 then
    return
  end
  if redis.call('EXISTS', r) == 1 and rw_reader(p, k, r) then
    return
  end
  local v = redis.call('HMGET', k, 'i', 'free', 'wfree')
  local free = math.max(tonumber(v[2] or '0'), tonumber(v[3] or '0'))
  if free == 0 then
    free = false
  end
  expire_idle(k, v[1], free)
end

-- rw_mark keeps the waiter mark 'q' of k in step with queue q: set while q
-- holds an entry, cleared once it is empty. The fast paths of the acquire
-- and release scripts trust the mark instead of reading the queue, so every
-- script that may have changed q or recreated k's token ends with rw_mark
-- when it takes the full path (the fast paths set the mark with their RPUSH
-- and clear it when they find q empty). A stale mark only sends a call down
-- the full path. The mark lives in k next to 'tok', and the fast paths need
-- 'tok': if k expires with waiters queued, mark and token vanish together.
-- A k created here (waiters queued while k is gone, as during a restart
-- grace) gets an idle time of ttl (the caller's lease TTL in ms, or nil),
-- so that it can expire.
local function rw_mark(k, q, ttl)
  if redis.call('LLEN', q) == 0 then
    redis.call('HDEL', k, 'q')
    return
  end
  redis.call('HSET', k, 'q', '1')
  if redis.call('HEXISTS', k, 'i') == 0 then
    redis.call('HSET', k, 'i', idle_ms(ttl))
    keep_at_least(k, tonumber(idle_ms(ttl)))
  end
end

-- rw_wait returns a hint (ms) of how long until k may change hands: the
-- remaining lease TTL of the live writer or of a live reader, a lock delay
-- left, or 1000 when none is known. Waiters use it only for their fallback
-- re-check.
local function rw_wait(p, k, r)
  local w = rw_writer(p, k)
  if w then
    return lease_pttl(p, w)
  end
  local rd = rw_reader(p, k, r)
  if rd then
    return lease_pttl(p, rd)
  end
  local _, wd = rw_delay(k)
  if wd > 0 then
    return wd
  end
  return 1000
end

-- rw_reclaim recreates, after Redis lost its data, hold hid of session
-- lease (shared or not) on k and r with token tok, unless a live session
-- holds it in a conflicting way. ttl and ld are the session's, in ms
-- (strings). It reports whether hid holds it now.
local function rw_reclaim(p, k, r, hid, tok, shared, ttl, ld)
  local ok = false
  local w = redis.call('HGET', k, 'w')
  if shared then
    if redis.call('HEXISTS', r, hid) == 1 then
      ok = true
    elseif not (w and alive(p, w)) then
      redis.call('HDEL', k, 'w', 'wld')
      redis.call('HSET', r, hid, ld .. ':' .. string.format('%.0f', tok))
      ok = true
    end
  elseif w == hid then
    ok = true
  elseif not (w and alive(p, w)) and not rw_reader(p, k, r) then
    redis.call('HSET', k, 'w', hid, 'wld', ld)
    ok = true
  end
  if ok then
    redis.call('HSET', k, 'i', string.format('%.0f', 2 * tonumber(ttl)))
    keep_at_least(k, held_ms(ttl, ld))
    if shared then
      keep_at_least(r, held_ms(ttl, ld))
    end
  end
  if tok > tonumber(redis.call('HGET', k, 'tok') or '0') then
    redis.call('HSET', k, 'tok', string.format('%.0f', tok))
  end
  rw_mark(k, p .. 'q:rw:' .. string.sub(k, #p + 4), ttl)
  return ok
end
