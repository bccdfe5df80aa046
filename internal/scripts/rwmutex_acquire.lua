-- rwmutex_acquire.lua (with rwmutex_lib.lua): grant a read-write mutex,
-- shared or exclusive, if that is possible now and nobody waits before the
-- caller, else queue the caller FIFO (when asked to wait).
-- KEYS[1] {ns}:rw:<name>   KEYS[2] readers {ns}:rwr:<name>
-- KEYS[3] queue {ns}:q:rw:<name>   KEYS[4] the caller's lease {ns}:s:<sid>
-- ARGV[1] hold id   ARGV[2] options "<queue><sharded><shared>": queue "1"
-- to queue when busy, sharded "1" for sharded pub/sub, shared "1" for a
-- read (shared) hold, "0" for a write (exclusive) one
-- Returns {1, token} when granted (also when already granted to this hold
-- id, so a retry after a lost reply is safe); {0, wait ms, queue position or
-- -1} when not; {-8, grace ms} when not, during a restart grace, to a caller
-- that does not queue; {-1} when the caller's own lease is gone; {-5} when
-- the epoch marker is missing; {-7} when the hold id was withdrawn.
-- Waiters that can be granted (after a holder died, or a queued writer
-- withdrew) are served here first, so a newcomer never overtakes them.
local hid, k, r, q = ARGV[1], KEYS[1], KEYS[2], KEYS[3]
local shared = string.sub(ARGV[2], 3, 3) == '1'

-- Fast paths, before the helpers exist (see scripts.go), when the caller's
-- lease exists with no grace pending (g = "0", see check_caller) and hid is
-- not withdrawn, and k has a token and no waiter mark (nobody waits, see
-- rw_mark). Anything else takes the full path below, which reads
-- everything again.
local lease = redis.call('HMGET', KEYS[4], 'g', 'x:' .. hid, 'ttl', 'ld')
if lease[1] == '0' and not lease[2] then
  local st = redis.call('HMGET', k, 'w', 'tok', 'q', 'free', 'wfree')
  local writer = st[1]
  if not writer and st[2] and not st[3] and not st[4] then
    -- No writer, no lock delay keeping everyone out, nobody waiting: a
    -- reader is granted unless it already is (a retry: the full path
    -- returns its token); a writer when no reader holds (dead ones too:
    -- the full path clears them) and no lost reader's lock delay runs.
    local ok
    if not shared then
      ok = not st[5] and redis.call('EXISTS', r) == 0
    end
    if shared or ok then
      local tok, n = new_token(st[2])
      local ld = lease[4] or '0'
      local held = 2 * lease[3] + ld
      if shared then
        -- HSETNX: a retry (hid already there) takes the full path, which
        -- returns its token.
        ok = redis.call('HSETNX', r, hid, ld .. ':' .. tok) == 1
      end
      if ok then
        -- Keep the keys at least held_ms, never less (see common.lua
        -- keep_at_least): readers share them, so only raise their expiry
        -- (a new readers hash has none: NX). A writer holds k alone: k
        -- has existed since a grant or an idle release gave it an expiry.
        if shared then
          redis.call('HSET', k, 'tok', tok, 'i', 2 * lease[3])
          if redis.call('PEXPIRE', r, held, 'NX') == 0 then
            redis.call('PEXPIRE', r, held, 'GT')
          end
          redis.call('PEXPIRE', k, held, 'GT')
        else
          redis.call('HSET', k, 'w', hid, 'wld', ld, 'tok', tok, 'i', 2 * lease[3])
          redis.call('PEXPIRE', k, held)
        end
        return {R_GRANTED, n}
      end
    end
  elseif writer and writer ~= hid then
    -- A writer holds: busy while its session is live, the same reply as
    -- busy() in common.lua. (Spelled out, like sid_of and prefix_of, as in
    -- mutex_acquire.lua.)
    local p = string.match(k, '^{[^}]*}:')
    local wait = redis.call('PTTL', p .. K_LEASE .. string.match(writer, '^([^.]+)%.'))
    if wait > 0 then
      if string.sub(ARGV[2], 1, 1) ~= '1' then
        return {R_BUSY, wait, -1}
      end
      local e = hid .. (shared and '|r' or '|w')
      local pos = redis.call('LPOS', q, e)
      if not pos then
        pos = redis.call('RPUSH', q, e) - 1
        if pos == 0 then
          -- A new queue expires unless its waiters' heartbeats keep it.
          redis.call('PEXPIRE', q, 2 * lease[3] + (lease[4] or '0'))
        end
        if not st[3] then
          redis.call('HSET', k, 'q', '1') -- see rw_mark; k has 'i' (a grant set it)
        end
      end
      return {R_BUSY, wait, pos}
    end
  end
end

--@helpers
--@include rwmutex_lib.lua
local queue, sharded = string.sub(ARGV[2], 1, 1), string.sub(ARGV[2], 2, 2)
local p = prefix_of(k)
local name = string.sub(k, #p + 4)
local stop, grace = check_caller(p, hid, queue)
if stop then
  return stop
end
if shared then
  local v = redis.call('HGET', r, hid)
  if v then
    return {R_GRANTED, tonumber(string.match(v, ':(%d+)$'))}
  end
elseif redis.call('HGET', k, 'w') == hid then
  return {R_GRANTED, tonumber(redis.call('HGET', k, 'tok'))}
end
-- Every exit below keeps the waiter mark in step with the queue (rw_mark).
local function done(reply)
  rw_mark(k, q, lease[3])
  return reply
end
local entry = rw_entry(hid, shared)
if redis.call('LPOS', q, entry) then
  -- A re-check of a queued caller: serve the queue, the caller may be next.
  local tok = rw_serve(p, k, r, q, sharded, name, entry)
  if tok then
    return done({1, tok})
  end
  return done(busy(q, entry, grace > 0 and grace or rw_wait(p, k, r), queue, grace))
end
rw_serve(p, k, r, q, sharded, name, nil)
local wait = 0
if grace > 0 then
  wait = grace
else
  local w = rw_writer(p, k)
  local rd = not w and not shared and rw_reader(p, k, r)
  -- A live holder's wait is at least 1 ms (see lease_pttl): 0 means free here.
  if w then
    wait = lease_pttl(p, w)
  elseif rd then
    wait = lease_pttl(p, rd)
  else
    local all, wd = rw_delay(k) -- after rw_reader: a dead reader's delay starts there
    if shared and all > 0 then
      wait = all
    elseif not shared and wd > 0 then
      wait = wd
    elseif redis.call('LLEN', q) > 0 then
      wait = rw_wait(p, k, r) -- someone waits before the caller
    end
  end
  if wait == 0 then
    return done({1, rw_grant(p, k, r, hid, shared)})
  end
end
if queue ~= '1' then
  rw_idle(p, k, r, q) -- dead holders cleared, maybe nobody left
end
return done(busy(q, entry, wait, queue, grace))
