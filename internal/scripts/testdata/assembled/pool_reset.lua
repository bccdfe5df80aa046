local R_GRANTED, REL_FREED, K_LEASE, K_POOL_INDEX, P_HOLD_SID = 1, 1, "s:", "i:", "^([^.]+)%."
-- fastpath.lua: what the fast paths of scripts with a "--@helpers" line use;
-- first in those scripts and in the batch scripts only (see scripts.go,
-- batch.go), so it must stay small.

-- now_s: the server's clock in µs as a string, read at most once per call
-- by new_token.lua (inlined where a token is taken).
local now_s
-- pool_reset.lua (with pool_lib.lua): force-release every held member of a
-- pool (operator action). The live holders' sessions are told their holds
-- were taken away; every held member, a lost holder's in its lock delay
-- too, goes back to the free set as by a release; the queue is then served.
-- KEYS as in pool_acquire.lua.
-- ARGV[1] prefix {ns}:   ARGV[2] "1" for sharded pub/sub   ARGV[3] pool name
-- ARGV[4] base "{ns}:pool:<name>:"
-- Returns the number of live holds taken away. With no member held it
-- changes nothing.
-- pool_core.lua: the operations on one pool member (see pool_lib.lua for
-- the keys): those of the fast paths, pool_acquire_fast.lua and
-- pool_release_fast.lua, and pool_grant. The single pool scripts include
-- their own fast path's file before it and this after "--@helpers"; the
-- other pool scripts include this, before their helpers too. It uses
-- nothing but new_token.lua (inlined) and fastpath.lua's now_s.
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

-- pool_release_fast.lua: the fast path of pool_release.lua and what it
-- takes of the operations on one pool member (see pool_core.lua), under
-- the rules of pool_acquire_fast.lua: before that fast path and in
-- pool_release_batch.lua, with nothing of common.lua.

-- pool_mark_free makes key free as the most recently released member: its
-- score is max(server time in µs, highest score + 1), new_token.lua's rule.
local function pool_mark_free(b, key)
  local top = redis.call('ZRANGE', b .. 'f', '-1', '-1', 'WITHSCORES')
  local last, tok, n = top[2]
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
local R_BUSY, R_LEASE_GONE, R_EPOCH_MISSING, R_WITHDRAWN, R_GRACE, K_CHANNEL, K_EPOCH = 0, -1, -5, -7, -8, "n:", "epoch"
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

-- pool_lib.lua: helpers for the pool scripts, included after common.lua.
-- A pool is these keys (b = "{ns}:pool:<name>:"):
--   free   b.."f"        zset: free member -> release order: 0 for members
--                        never used, else max(server time in µs, highest score
--                        + 1), so the lowest score is the least recently
--                        released even among releases within one millisecond
--   held   b.."h"        hash: held member -> hold id
--   tok    b.."t"        hash: member -> last token (kept while not a member)
--   sess   b.."s"        hash: session id -> number of members it holds
--   per session b.."i:"..sid   hash: hold id -> the member it holds, so that
--                        finding a hold's member is O(1) however many the
--                        session holds; and "~ld" -> the session's lock delay
--                        (ms) when it has one (a hold id always has a ".")
--   delay  b.."d"        zset: member -> end (server ms) of the lock delay of
--                        a lost holder, which stays in held until then
--   queue  {ns}:q:pool:<name>   list of "<hold id>" (any member) or
--                        "<hold id>@<member>" (that member), FIFO
-- Members held by a session whose lease is gone are reaped (back to free)
-- when a request finds nothing free: the cost is O(holding sessions), not
-- O(members). A session with a lock delay leaves its members held (not
-- free, not granted) for that delay from the reap, and the first reap
-- after it ends frees them (see pool_reap). A release or a removal frees
-- or drops a member at once; reclaim.lua records "~ld" as pool_grant does.
-- The per-session hashes and the delay zset are not passed in KEYS (their
-- names depend on the holders, or they are new): like every key here they
-- carry the namespace hash tag, so they live in the same cluster slot.
-- The operations on one member (grant, release, free) are in pool_core.lua
-- and the fast paths' files it includes (see its header).

local function pool_is_member(b, key)
  return pool_is_free(b, key) or redis.call('HEXISTS', b .. 'h', key) == 1
end

-- pool_reap returns the members of sessions whose lease is gone to the
-- free set, and the number it freed. A session with a lock delay ("~ld" in
-- its index) leaves its members held under their lost hold ids, listed in
-- the delay zset until now + that delay; members whose delay has ended are
-- freed here (unless a reclaim took them meanwhile).
local function pool_reap(p, b)
  local n = 0
  local ended = redis.call('ZRANGE', b .. 'd', '-inf', string.format('%.0f', now_ms()), 'BYSCORE')
  for _, k in ipairs(ended) do
    redis.call('ZREM', b .. 'd', k)
    local h = redis.call('HGET', b .. 'h', k)
    if h and not alive(p, h) then
      redis.call('HDEL', b .. 'h', k)
      pool_mark_free(b, k)
      n = n + 1
    end
  end
  for _, sid in ipairs(redis.call('HKEYS', b .. 's')) do
    if redis.call('EXISTS', p .. K_LEASE .. sid) == 0 then
      local idx = b .. K_POOL_INDEX .. sid
      local held = redis.call('HGETALL', idx)
      local ld = 0
      for i = 1, #held, 2 do
        if held[i] == '~ld' then
          ld = tonumber(held[i + 1])
        end
      end
      for i = 1, #held, 2 do
        local k = held[i + 1]
        if held[i] ~= '~ld' and redis.call('HGET', b .. 'h', k) == held[i] then
          if ld > 0 then
            redis.call('ZADD', b .. 'd', string.format('%.0f', now_ms() + ld), k)
          else
            redis.call('HDEL', b .. 'h', k)
            pool_mark_free(b, k)
            n = n + 1
          end
        end
      end
      redis.call('DEL', idx)
      redis.call('HDEL', b .. 's', sid)
    end
  end
  return n
end

-- pool_delay_left returns how long member k's lock delay still runs (ms),
-- or -1 when it is not in one.
local function pool_delay_left(b, k)
  local e = redis.call('ZSCORE', b .. 'd', k)
  if e then
    local t = tonumber(e) - now_ms()
    if t > 0 then
      return t
    end
  end
  return -1
end

-- pool_wait returns when waiters for any member should re-check (ms, -1
-- when unknown): the smallest remaining lease TTL among the holding
-- sessions, or the end of the first lock delay if sooner.
local function pool_wait(p, b)
  local wait = -1
  for _, sid in ipairs(redis.call('HKEYS', b .. 's')) do
    local t = redis.call('PTTL', p .. K_LEASE .. sid)
    if t > 0 and (wait < 0 or t < wait) then
      wait = t
    end
  end
  local first = redis.call('ZRANGE', b .. 'd', '0', '0', 'WITHSCORES')
  if first[2] then
    local t = tonumber(first[2]) - now_ms()
    if t > 0 and (wait < 0 or t < wait) then
      wait = t
    end
  end
  return wait
end

-- pool_member_wait returns when a waiter for member k should re-check (ms,
-- -1 when unknown): when its holder's lease could expire, or when its lock
-- delay ends.
local function pool_member_wait(p, b, k)
  local h = redis.call('HGET', b .. 'h', k)
  if not h then
    return -1
  end
  local t = lease_pttl(p, h)
  if t > 0 then
    return t
  end
  return pool_delay_left(b, k)
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
-- Returns the number of grants.
local function pool_serve(p, b, q, sharded, name)
  if grace_left(p) ~= 0 then
    return 0 -- no grants during a restart grace: waiters re-check after it
  end
  local reaped, granted = false, 0
  local entries = redis.call('LRANGE', q, '0', '-1')
  for _, e in ipairs(entries) do
    if not alive(p, e) then
      redis.call('LREM', q, '1', e)
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
            redis.call('LREM', q, '1', e)
            notify(p, sharded, hid, 'x')
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
        redis.call('LREM', q, '1', e)
        local tok = pool_grant(p, b, key, hid)
        notify(p, sharded, hid, 'g', tok, key)
        granted = granted + 1
      end
    end
  end
  return granted
end
local p, q, b = ARGV[1], KEYS[1], ARGV[4]
local held = redis.call('HGETALL', b .. 'h')
if #held == 0 then
  return 0
end
local n = 0
for i = 1, #held, 2 do
  local k, h = held[i], held[i + 1]
  pool_unhold(b, k, h)
  if alive(p, h) then
    revoke(p, ARGV[2], h)
    n = n + 1
  end
  pool_mark_free(b, k)
end
redis.call('DEL', b .. 'd')
pool_serve(p, b, q, ARGV[2], ARGV[3])
return n
