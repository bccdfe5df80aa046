local REL_FREED, K_LEASE, K_CHANNEL, P_HOLD_SID = 1, "s:", "n:", "^([^.]+)%."
-- fastpath.lua: what the fast paths of scripts with a "--@helpers" line use;
-- first in those scripts and in the batch scripts only (see scripts.go,
-- batch.go), so it must stay small.

-- now_s: the server's clock in µs as a string, read at most once per call
-- by new_token.lua (inlined where a token is taken).
local now_s
-- rwmutex_release.lua (with rwmutex_lib.lua): release a read-write mutex
-- held by a hold id, or withdraw that hold id from the queue. Releasing (or
-- withdrawing a queued writer that kept readers out) serves the queue in
-- the same call: the next writer, or all the consecutive readers at its head.
-- KEYS[1] {ns}:rw:<name>   KEYS[2] readers {ns}:rwr:<name>
-- KEYS[3] queue {ns}:q:rw:<name>   KEYS[4] the releasing session's lease
-- {ns}:s:<sid>
-- ARGV[1] hold id   ARGV[2] options "<sharded><withdraw><shared>": sharded
-- "1" for sharded pub/sub, withdraw "1" to withdraw the hold id for good
-- (see withdraw in common.lua), shared "1" for a read hold
-- Returns 1 when it was held and is released, 2 when it was only queued, 0
-- when it is neither (already released, or taken away): idempotent.
local hid, k, r, q = ARGV[1], KEYS[1], KEYS[2], KEYS[3]
local shared = string.sub(ARGV[2], 3, 3) == '1'

-- Fast paths, before the helpers exist (see scripts.go): a plain release
-- with nobody waiting, a reader's release that leaves live readers, and a
-- release that leaves nobody holding and hands over to the live waiters at
-- the head of the queue. Only without a lock delay pending ('free',
-- 'wfree': the full path computes their end). Once the hold is released,
-- anything unusual goes on with the full path below (released = true).
local released = false
if string.sub(ARGV[2], 2, 2) ~= '1' then
  local st = redis.call('HMGET', k, 'w', 'q', 'i', 'free', 'wfree', 'tok')
  -- rwmutex_release_idle.lua: the fast path of a writer's release that
  -- leaves the read-write mutex idle, as statement text inlined where it runs
  -- (--@inline, see assemble.go): first in rwmutex_release.lua's fast
  -- paths, and in rwmutex_release_batch.lua's loop over the releases.
  -- The includer sets k (the mutex hash), hid, shared (true for a read
  -- hold) and st, k's fields w, q, i, free, wfree as HMGET returns them.
  -- When hid is k's writer, nobody waits (no waiter mark q, see rw_mark) and
  -- no lock delay runs, it releases and returns REL_FREED, the mutex kept
  -- 'i' ms once idle (see common.lua); else it goes on past its end, having
  -- changed nothing.
  if not shared and st[1] == hid and not st[2] and not st[4] and not st[5] then
    redis.call('HDEL', k, 'w', 'wld')
    if st[3] then
      redis.call('PEXPIRE', k, st[3])
    end
    return REL_FREED
  end
  if shared then
    released = redis.call('HDEL', r, hid) == 1
  elseif st[1] == hid then
    redis.call('HDEL', k, 'w', 'wld')
    st[1] = false
    released = true
  end
  if released and not st[1] and not st[4] and not st[5] then
    local p = string.match(k, '^{[^}]*}:')
    -- Nobody waits when 'q' is unset (see rw_mark); a stale mark over an
    -- empty queue is cleared here.
    local waiting = st[2] and redis.call('LLEN', q) > 0
    if st[2] and not waiting then
      redis.call('HDEL', k, 'q')
    end
    local readers = shared and redis.call('HKEYS', r)
    if readers and readers[1] then
      -- Other readers hold: done when one of them is live and nobody
      -- waits, or a live writer waits first (it waits for the readers).
      -- Dead readers are the full path's (their lock delay starts there).
      if redis.call('EXISTS', p .. K_LEASE .. string.match(readers[1], P_HOLD_SID)) == 1 then
        if not waiting then
          return REL_FREED
        end
        local e = redis.call('LINDEX', q, '0')
        local w = string.match(e, '^([^.]+)%..*|w$')
        if w and redis.call('EXISTS', p .. K_LEASE .. w) == 1 then
          return REL_FREED
        end
      end
    elseif not waiting then
      if st[3] then
        redis.call('PEXPIRE', k, st[3]) -- idle: kept 'i' ms (see common.lua)
      end
      return REL_FREED
    elseif redis.call('HGET', KEYS[4], 'g') == '0' then
      -- Nobody holds and waiters queue: the releaser's lease says no
      -- restart grace is pending (see check_caller). Serve the queue as
      -- rw_serve does (rwmutex_serve.lua), dead waiters dropped on the
      -- way; once it is empty, the waiter mark goes and, when nobody was
      -- granted, the mutex is idle: kept 'i' ms (see common.lua).
      local self, readers, delay_w, last = nil, false, 0, st[6]
      local sharded, name = string.sub(ARGV[2], 1, 1), string.sub(k, #p + 4)
      local mine, granted, emptied = nil, 0, false
      -- rwmutex_serve.lua: how a read-write mutex's queue is served, the one
      -- home of its order, as statement text inlined where it runs (--@inline,
      -- see assemble.go): by rw_serve (rwmutex_lib.lua) on the full paths, and
      -- by the closure-free hand-off of rwmutex_release.lua's fast path.
      -- The head of queue q is granted in order, as far as it can be now:
      -- readers while no writer holds (consecutive readers all in one go), a
      -- writer only when nobody holds and no lost reader's lock delay runs; it
      -- stops at the first entry it cannot grant, so a queued writer keeps later
      -- readers out. Dead waiters (their lease, which always has 'ld', is gone)
      -- are dropped. Each grant writes what a grant writes (the holder, the
      -- token, 'i', the expiries at least held_ms, see common.lua) and is
      -- announced with the grant message (grant_message.lua), except self's.
      -- The includer has checked that no restart grace is pending, that no
      -- writer holds and that no lock delay keeps everyone out. It sets p, k, r,
      -- q, sharded ("1" for sharded pub/sub), name, self (the caller's own
      -- entry, or nil), readers (whether a live reader holds), delay_w (the ms
      -- of a lost reader's lock delay left, which keeps writers out) and last
      -- (k's stored token, or false), and declares mine (self's token, a number,
      -- when granted), granted (0: how many it granted) and emptied (whether it
      -- found the queue empty).
      local tok, n
      while true do
        local e = redis.call('LINDEX', q, '0')
        if not e then
          emptied = true
          break
        end
        local to, mode = string.match(e, '^(.+)|([rw])$')
        local sid = string.match(to, P_HOLD_SID)
        local l = redis.call('HMGET', p .. K_LEASE .. sid, 'ld', 'ttl')
        if not l[1] then
          redis.call('LPOP', q) -- a dead waiter
        elseif mode == 'w' and (readers or delay_w > 0) then
          break
        else
          redis.call('LPOP', q)
          if tok then
            n = n + 1
            tok = string.format('%.0f', n)
          else
            -- new_token.lua: the next fencing token after last (a stored token, or
            -- false): max(last + 1, server time in µs), the rule of next_token in
            -- common.lua, as statement text inlined where a fast path takes a token
            -- (--@inline, see assemble.go), not a function: Redis would create the
            -- closure on every call of every script that has it, about 1.2k
            -- instructions, most of them for calls that take no token (a release with
            -- no hand-off). The includer names last and declares tok and n; now_s is
            -- fastpath.lua's. tok is the token as a string, n as what a reply carries:
            -- the same string when the clock wins (the client parses either; see
            -- parseAcquire), a number otherwise. The clock is what keeps tokens
            -- increasing when the stored token went back: a restart from an older
            -- snapshot, a failover to a replica that missed writes. The clock is read
            -- once per call: a batch script's tokens are of different resources, or
            -- above the last one anyway.
            --
            -- The clock's string is built from TIME's reply and compared with last as
            -- a string, so the common case formats and parses no number (a strtod of a
            -- token costs Redis more than the whole compare). Every stored token is a
            -- decimal integer without leading zeros (this string, or string.format's
            -- '%.0f'), so a shorter one, or one of the same length that sorts lower,
            -- is the smaller number. Lua compares strings with strcoll, under Redis'
            -- LC_COLLATE: digits collate in numeric order in the C locale and in
            -- glibc's. The one last that is not a token, a pool's highest free score
            -- (pool_mark_free), Redis prints as an integer below 2^52; miniredis
            -- prints one ending in eight zeros as "1.7e+15", which then loses to the
            -- clock even when above it: at worst a member ordered before one released
            -- earlier, never a token.
            if not now_s then
              local t = redis.call('TIME')
              local us = t[2]
              if #us < 6 then
                us = string.sub('00000' .. us, -6)
              end
              now_s = t[1] .. us
            end
            if last and (#last > #now_s or (#last == #now_s and last >= now_s)) then
              n = tonumber(last) + 1
              tok = string.format('%.0f', n)
            else
              tok, n = now_s, now_s
            end
          end
          local held = 2 * l[2] + l[1]
          if mode == 'w' then
            redis.call('HSET', k, 'w', to, 'wld', l[1], 'tok', tok, 'i', 2 * l[2])
          else
            redis.call('HSET', r, to, l[1] .. ':' .. tok)
            redis.call('HSET', k, 'tok', tok, 'i', 2 * l[2])
            if redis.call('PEXPIRE', r, held, 'NX') == 0 then
              redis.call('PEXPIRE', r, held, 'GT')
            end
          end
          if redis.call('PEXPIRE', k, held, 'NX') == 0 then
            redis.call('PEXPIRE', k, held, 'GT')
          end
          granted = granted + 1
          if e == self then
            mine = n
          else
            local res = name
            -- grant_message.lua: the grant message "g|<hid>|<token>|<resource>", the
            -- one encoder of it (internal/lease decodes it): statement text inlined
            -- where a grant is published, by notify (common.lua) and by the
            -- closure-free hand-offs of mutex_release_fast.lua and rwmutex_release.lua.
            -- The includer names the grantee's hold id to, the token tok (a string)
            -- and the resource res; msg is the message.
            local msg = 'g|' .. to .. '|' .. tok .. '|' .. res
            redis.call(sharded == '1' and 'SPUBLISH' or 'PUBLISH', p .. K_CHANNEL .. sid, msg)
          end
          if mode == 'w' then
            break
          end
          readers = true
        end
      end
      if emptied then
        redis.call('HDEL', k, 'q')
        if granted == 0 and st[3] then
          redis.call('PEXPIRE', k, st[3])
        end
      end
      return REL_FREED
    end
  end
end

local R_BUSY, R_LEASE_GONE, R_EPOCH_MISSING, R_WITHDRAWN, R_GRACE, REL_NOT_FOUND, REL_DEQUEUED, K_EPOCH = 0, -1, -5, -7, -8, 0, 2, "epoch"
-- common.lua: helpers that go first in every other script (see join in
-- scripts.go); not a script of its own.
-- p is the namespace key prefix "{ns}:". Hold ids look like "<sid>.<n>", so the
-- session that owns a hold (and whose lease keeps it valid) is part of its id.
-- Every key built here starts with p and so shares the namespace hash slot.

local function sid_of(hid)
  return string.match(hid, P_HOLD_SID)
end

-- prefix_of returns the prefix "{ns}:" of key k (a namespace has no braces).
local function prefix_of(k)
  return string.match(k, '^{[^}]*}:')
end

-- alive reports whether the lease of the session owning hold id hid exists.
local function alive(p, hid)
  return redis.call('EXISTS', p .. K_LEASE .. sid_of(hid)) == 1
end

-- lease_pttl returns the remaining TTL (ms) of hid's session lease, at
-- least 1 while it exists (Redis reads PTTL 0 in a key's last millisecond,
-- when it still exists: 0 must not read as gone), or a negative value.
local function lease_pttl(p, hid)
  local t = redis.call('PTTL', p .. K_LEASE .. sid_of(hid))
  if t == 0 then
    return 1
  end
  return t
end

-- now_us returns the server time in microseconds, read once per script.
local cached_now_us
local function now_us()
  if not cached_now_us then
    local t = redis.call('TIME')
    cached_now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  return cached_now_us
end

-- next_token stores and returns max(last + 1, server time in microseconds) in
-- field f of hash k: strictly increasing per resource, also after Redis lost
-- the hash or went back to an older copy of it, as long as the server clock
-- does not step back. (new_token.lua is the same rule.)
local function next_token(k, f)
  local last = tonumber(redis.call('HGET', k, f) or '0')
  local tok = math.max(last + 1, now_us())
  redis.call('HSET', k, f, string.format('%.0f', tok))
  return tok
end

-- publish sends msg on channel ch: SPUBLISH when sharded is "1" (Redis
-- Cluster), PUBLISH otherwise.
local function publish(sharded, ch, msg)
  redis.call(sharded == '1' and 'SPUBLISH' or 'PUBLISH', ch, msg)
end

-- notify publishes on the notification channel of to's session the
-- message of kind: the grant message (grant_message.lua) when hold id to
-- was granted token tok (a number) of resource res ('g'), "r|<to>" when it
-- was taken away ('r'), "x|<to>" when its pool member was removed while it
-- waited ('x'). These are the messages internal/lease decodes.
local function notify(p, sharded, to, kind, tok, res)
  local ch = p .. K_CHANNEL .. sid_of(to)
  if kind == 'g' then
    tok = string.format('%.0f', tok)
    -- grant_message.lua: the grant message "g|<hid>|<token>|<resource>", the
    -- one encoder of it (internal/lease decodes it): statement text inlined
    -- where a grant is published, by notify (common.lua) and by the
    -- closure-free hand-offs of mutex_release_fast.lua and rwmutex_release.lua.
    -- The includer names the grantee's hold id to, the token tok (a string)
    -- and the resource res; msg is the message.
    local msg = 'g|' .. to .. '|' .. tok .. '|' .. res
    publish(sharded, ch, msg)
    return
  end
  publish(sharded, ch, kind .. '|' .. to)
end

-- revoke records that hold hid was taken away from its (live) session: the
-- session's next heartbeat reports it, and a notification tells it at once.
-- The record is field 'r' of the session's lease hash, "|<hid>" per hold:
-- it lives exactly as long as the lease, and the heartbeat reads it from
-- the one key it declares (see heartbeat.lua).
local function revoke(p, sharded, hid)
  local lease = p .. K_LEASE .. sid_of(hid)
  if redis.call('EXISTS', lease) == 1 then
    redis.call('HSET', lease, 'r', (redis.call('HGET', lease, 'r') or '') .. '|' .. hid)
    notify(p, sharded, hid, 'r')
  end
end

local function now_ms()
  return math.floor(now_us() / 1000)
end

-- grace_left reads the epoch marker {ns}:epoch, "<until>|<grace>": the
-- server time (ms) until which grants are refused after Redis lost its
-- data, and the namespace's restart grace (ms; absent on a marker that no
-- session has recorded it in yet, see session_open.lua). It returns -1
-- when the marker is missing (the data was lost: the client recreates the
-- marker and retries), the ms of grace left, or 0. v is the marker's value
-- when the caller has read it already.
local function grace_left(p, v)
  v = v or redis.call('GET', p .. K_EPOCH)
  if not v then
    return -1
  end
  local until_ms = string.match(v, '^%d+')
  if until_ms == '0' then
    return 0 -- marked intact with no grace at all: no need for the clock
  end
  local left = tonumber(until_ms) - now_ms()
  if left > 0 then
    return left
  end
  return 0
end

-- check_caller runs first in every acquire script; queue is "1" when the
-- caller asked to wait. It returns the reply to give at once, or nil when
-- the caller may go on, and the grace left (see grace_left): {-5} when the
-- epoch marker is missing; {-7} when the hold id was withdrawn; {-1} when
-- the caller's lease is gone; when it is gone during a restart grace (the
-- caller's session may still reclaim it), {0, grace, -1} to come back after
-- the grace, or {-8, grace} when the caller does not wait (see busy).
--
-- The lease's field 'g' is "0" once no restart grace is pending: set when
-- the lease is created outside a grace, or here once the grace is over. A
-- lease with g = "0" proves the epoch marker exists and no grace is left
-- (losing the marker means losing the data, and the lease with it; a grace
-- only starts when the marker is recreated), so a fast path may skip the
-- marker when it finds g = "0" in a lease of the namespace: the caller's,
-- or one it reads anyway (a mutex hand-off reads the first waiter's).
local function check_caller(p, hid, queue)
  local grace = grace_left(p)
  if grace < 0 then
    return {R_EPOCH_MISSING}, grace
  end
  local key = p .. K_LEASE .. sid_of(hid)
  local lease = redis.call('HMGET', key, 'ttl', 'x:' .. hid, 'g')
  if lease[2] then
    return {R_WITHDRAWN}, grace -- withdrawn (see withdraw): a late or repeated attempt
  end
  if not lease[1] then
    if grace > 0 then
      if queue ~= '1' then
        return {R_GRACE, grace}, grace
      end
      return {R_BUSY, grace, -1}, grace
    end
    return {R_LEASE_GONE}, grace
  end
  if grace == 0 and lease[3] ~= '0' then
    redis.call('HSET', key, 'g', '0')
  end
  return nil, grace
end

-- withdraw marks hold id hid as never to be granted or queued again: the
-- client gave up on it while one of its acquire attempts may still be on the
-- way (delayed in the network, or sent again on a new connection) and would
-- otherwise grant a resource nobody waits for. The marker is a field of the
-- session's lease hash, so it lives exactly as long as the hold id can.
local function withdraw(p, hid)
  local lease = p .. K_LEASE .. sid_of(hid)
  if redis.call('EXISTS', lease) == 1 then
    redis.call('HSET', lease, 'x:' .. hid, '1')
  end
end

-- held_ms returns how long a grant keeps the keys of a resource at least
-- (ms): 2 * ttl + ld, the TTL and lock delay of the grantee's session (ms,
-- strings, or false). Its heartbeat then keeps them 3 * ttl + ld (see
-- heartbeat.lua): a crashed holder's keys are gone at most 2 * ttl after
-- its lease, and a lock delay it leaves still applies.
local function held_ms(ttl, ld)
  return 2 * tonumber(ttl or '10000') + tonumber(ld or '0')
end

-- held_ms_of is held_ms for hold id hid's session.
local function held_ms_of(p, hid)
  local l = redis.call('HMGET', p .. K_LEASE .. sid_of(hid), 'ttl', 'ld')
  return held_ms(l[1], l[2])
end

-- keep_at_least makes key k live at least ms more, never less than it
-- would have: a key without an expiry gets one (every key passed here
-- expires once nobody holds or waits for it).
local function keep_at_least(k, ms)
  local s = string.format('%.0f', ms)
  if redis.call('PEXPIRE', k, s, 'NX') == 0 then
    redis.call('PEXPIRE', k, s, 'GT')
  end
end

-- busy is the reply of an acquire that did not grant: {0, wait ms, queue
-- position}. With queue "1" the caller's entry joins the FIFO queue q, once
-- (a re-check keeps its place); pos is the reply of LPOS when the caller
-- already asked (false: not queued), nil otherwise. Without queueing the
-- position is -1, and during a restart grace (grace, from grace_left, > 0)
-- the reply is {-8, grace ms} instead: the caller is told that no grant is
-- possible before the grace ends, not that the resource is busy.
local function busy(q, entry, wait, queue, grace, pos)
  if queue ~= '1' then
    if grace > 0 then
      return {R_GRACE, grace}
    end
    return {R_BUSY, wait, -1}
  end
  if pos == nil then
    pos = redis.call('LPOS', q, entry)
  end
  if not pos then
    pos = redis.call('RPUSH', q, entry) - 1
    if pos == 0 then
      -- A new queue: it expires unless its waiters' heartbeats keep it.
      redis.call('PEXPIRE', q, string.format('%.0f', held_ms_of(prefix_of(q), entry)))
    end
  end
  return {R_BUSY, wait, pos}
end

-- first_live drops dead sessions' entries from the head of waiter queue q and
-- returns the first live hold id (left in the queue), or nil.
local function first_live(p, q)
  while true do
    local h = redis.call('LINDEX', q, '0')
    if not h then
      return nil
    end
    if alive(p, h) then
      return h
    end
    redis.call('LPOP', q)
  end
end

-- Idle resources expire. A resource hash nobody holds or waits for is kept
-- 'i' ms (twice the TTL of the session last granted it, stored at the grant)
-- and then deleted by Redis: lock-per-entity names do not fill Redis. What
-- it held was the last token, and a lock delay still running ('free'), which
-- keeps it at least until then. Tokens stay increasing across the expiry: a
-- new grant takes the server time in µs, which has moved on by far more than
-- the grants of the last 'i' ms could have added (see next_token).
--
-- Held resources expire too, so that a holder that crashed leaves nothing
-- behind: a grant keeps the resource's keys at least held_ms (twice the
-- grantee's TTL plus its lock delay), and the holder's heartbeat keeps them
-- alive for as long as it holds them (see heartbeat.lua); the session
-- cancels a hold whose keys it could not keep alive before they could
-- expire (internal/lease, keyUntil). A write that does not grant never
-- shortens a held resource's expiry (KEEPTTL, keep_at_least).

-- idle_ms returns how long an idle resource granted to a session with lease
-- TTL ttl (ms, a string, or false) is kept: 2 * ttl, or 20 s when unknown.
local function idle_ms(ttl)
  return string.format('%.0f', 2 * tonumber(ttl or '10000'))
end

-- expire_idle lets idle resource hash k expire: after i ms (a string, or
-- false when no grant recorded it: then k is kept), and not before free (the
-- end of a lock delay, server ms, or false).
local function expire_idle(k, i, free)
  if not i then
    return
  end
  local keep = tonumber(i)
  if free then
    keep = math.max(keep, tonumber(free) - now_ms())
  end
  redis.call('PEXPIRE', k, string.format('%.0f', keep))
end

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
-- (fastpath.lua is above)

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
  -- rwmutex_serve.lua: how a read-write mutex's queue is served, the one
  -- home of its order, as statement text inlined where it runs (--@inline,
  -- see assemble.go): by rw_serve (rwmutex_lib.lua) on the full paths, and
  -- by the closure-free hand-off of rwmutex_release.lua's fast path.
  -- The head of queue q is granted in order, as far as it can be now:
  -- readers while no writer holds (consecutive readers all in one go), a
  -- writer only when nobody holds and no lost reader's lock delay runs; it
  -- stops at the first entry it cannot grant, so a queued writer keeps later
  -- readers out. Dead waiters (their lease, which always has 'ld', is gone)
  -- are dropped. Each grant writes what a grant writes (the holder, the
  -- token, 'i', the expiries at least held_ms, see common.lua) and is
  -- announced with the grant message (grant_message.lua), except self's.
  -- The includer has checked that no restart grace is pending, that no
  -- writer holds and that no lock delay keeps everyone out. It sets p, k, r,
  -- q, sharded ("1" for sharded pub/sub), name, self (the caller's own
  -- entry, or nil), readers (whether a live reader holds), delay_w (the ms
  -- of a lost reader's lock delay left, which keeps writers out) and last
  -- (k's stored token, or false), and declares mine (self's token, a number,
  -- when granted), granted (0: how many it granted) and emptied (whether it
  -- found the queue empty).
  local tok, n
  while true do
    local e = redis.call('LINDEX', q, '0')
    if not e then
      emptied = true
      break
    end
    local to, mode = string.match(e, '^(.+)|([rw])$')
    local sid = string.match(to, P_HOLD_SID)
    local l = redis.call('HMGET', p .. K_LEASE .. sid, 'ld', 'ttl')
    if not l[1] then
      redis.call('LPOP', q) -- a dead waiter
    elseif mode == 'w' and (readers or delay_w > 0) then
      break
    else
      redis.call('LPOP', q)
      if tok then
        n = n + 1
        tok = string.format('%.0f', n)
      else
        -- new_token.lua: the next fencing token after last (a stored token, or
        -- false): max(last + 1, server time in µs), the rule of next_token in
        -- common.lua, as statement text inlined where a fast path takes a token
        -- (--@inline, see assemble.go), not a function: Redis would create the
        -- closure on every call of every script that has it, about 1.2k
        -- instructions, most of them for calls that take no token (a release with
        -- no hand-off). The includer names last and declares tok and n; now_s is
        -- fastpath.lua's. tok is the token as a string, n as what a reply carries:
        -- the same string when the clock wins (the client parses either; see
        -- parseAcquire), a number otherwise. The clock is what keeps tokens
        -- increasing when the stored token went back: a restart from an older
        -- snapshot, a failover to a replica that missed writes. The clock is read
        -- once per call: a batch script's tokens are of different resources, or
        -- above the last one anyway.
        --
        -- The clock's string is built from TIME's reply and compared with last as
        -- a string, so the common case formats and parses no number (a strtod of a
        -- token costs Redis more than the whole compare). Every stored token is a
        -- decimal integer without leading zeros (this string, or string.format's
        -- '%.0f'), so a shorter one, or one of the same length that sorts lower,
        -- is the smaller number. Lua compares strings with strcoll, under Redis'
        -- LC_COLLATE: digits collate in numeric order in the C locale and in
        -- glibc's. The one last that is not a token, a pool's highest free score
        -- (pool_mark_free), Redis prints as an integer below 2^52; miniredis
        -- prints one ending in eight zeros as "1.7e+15", which then loses to the
        -- clock even when above it: at worst a member ordered before one released
        -- earlier, never a token.
        if not now_s then
          local t = redis.call('TIME')
          local us = t[2]
          if #us < 6 then
            us = string.sub('00000' .. us, -6)
          end
          now_s = t[1] .. us
        end
        if last and (#last > #now_s or (#last == #now_s and last >= now_s)) then
          n = tonumber(last) + 1
          tok = string.format('%.0f', n)
        else
          tok, n = now_s, now_s
        end
      end
      local held = 2 * l[2] + l[1]
      if mode == 'w' then
        redis.call('HSET', k, 'w', to, 'wld', l[1], 'tok', tok, 'i', 2 * l[2])
      else
        redis.call('HSET', r, to, l[1] .. ':' .. tok)
        redis.call('HSET', k, 'tok', tok, 'i', 2 * l[2])
        if redis.call('PEXPIRE', r, held, 'NX') == 0 then
          redis.call('PEXPIRE', r, held, 'GT')
        end
      end
      if redis.call('PEXPIRE', k, held, 'NX') == 0 then
        redis.call('PEXPIRE', k, held, 'GT')
      end
      granted = granted + 1
      if e == self then
        mine = n
      else
        local res = name
        -- grant_message.lua: the grant message "g|<hid>|<token>|<resource>", the
        -- one encoder of it (internal/lease decodes it): statement text inlined
        -- where a grant is published, by notify (common.lua) and by the
        -- closure-free hand-offs of mutex_release_fast.lua and rwmutex_release.lua.
        -- The includer names the grantee's hold id to, the token tok (a string)
        -- and the resource res; msg is the message.
        local msg = 'g|' .. to .. '|' .. tok .. '|' .. res
        redis.call(sharded == '1' and 'SPUBLISH' or 'PUBLISH', p .. K_CHANNEL .. sid, msg)
      end
      if mode == 'w' then
        break
      end
      readers = true
    end
  end
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
local sharded = string.sub(ARGV[2], 1, 1)
local p = prefix_of(k)
local name = string.sub(k, #p + 4)
if released then
  rw_serve(p, k, r, q, sharded, name, nil)
  rw_idle(p, k, r, q)
  rw_mark(k, q, nil)
  return REL_FREED
end
if string.sub(ARGV[2], 2, 2) == '1' then
  withdraw(p, hid)
end
local out = REL_NOT_FOUND
if shared then
  if redis.call('HDEL', r, hid) == 1 then
    out = REL_FREED
  end
elseif redis.call('HGET', k, 'w') == hid then
  redis.call('HDEL', k, 'w', 'wld')
  out = REL_FREED
end
if out == REL_NOT_FOUND and redis.call('LREM', q, '0', rw_entry(hid, shared)) > 0 then
  out = REL_DEQUEUED
end
if out ~= REL_NOT_FOUND then
  rw_serve(p, k, r, q, sharded, name, nil)
  rw_idle(p, k, r, q)
  rw_mark(k, q, nil)
end
return out
