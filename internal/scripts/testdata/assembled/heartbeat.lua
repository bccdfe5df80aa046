local R_BUSY, R_LEASE_GONE, R_EPOCH_MISSING, R_WITHDRAWN, R_GRACE, HB_RENEWED, HB_GONE, HB_RECLAIMABLE, K_LEASE, K_CHANNEL, K_EPOCH, P_HOLD_SID = 0, -1, -5, -7, -8, 1, 0, 2, "s:", "n:", "epoch", "^([^.]+)%."
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

-- heartbeat.lua (with epoch_lib.lua): renew a session lease, keep its
-- resources' keys alive, and report the holds taken away from it.
-- KEYS[1] lease {ns}:s:<sid>
-- ARGV[1] ttl ms   ARGV[2] prefix {ns}:   ARGV[3] keep ms   ARGV[4] n, the
-- number of revoked hold ids that follow   ARGV[5..4+n] revoked hold ids the
-- session has already handled   ARGV[5+n..] keys to keep alive: those of
-- holds whose expiry is due for renewal and of waits (see internal/lease)
-- Returns {1, "k" .. codes, replication id, server time ms, revoked hold
-- ids...} when renewed (see epoch_lib.lua repl_id; the session checks its
-- holds when the id changes, and logs a step of the server clock), codes holding
-- one character per key to keep: "1" when it now expires no sooner than keep
-- ms from now (or never), "0" when it does not exist, "e" when Redis
-- refused it; {0} when the lease no longer exists; {2} when it no longer
-- exists but Redis lost its data within the restart grace (the session may
-- reclaim); {-5} when the epoch marker is missing. Cost is O(1 + revoked +
-- keys): holds are valid only while their session's lease exists, so
-- renewing the lease renews them all; their keys need renewing only every
-- few heartbeats, as they are kept longer than the lease (see common.lua
-- held_ms).
-- It declares one key and runs without the migration probe (see Script):
-- while the namespace's slot migrates, Redis runs it wherever the lease is,
-- so holds outlive a slot move longer than the TTL. A key to keep that is
-- on the other node then answers "e" (or "0"): the session ends a hold
-- whose keys it cannot keep before they could expire. The only other key
-- it reads without declaring it, the epoch marker, it reads once the lease
-- is gone from the node that runs it, which during a move means gone from
-- both nodes: a marker that reads as absent there only sends the client to
-- recreate it (a probed script, which waits for the move to end).
-- epoch_lib.lua: helpers of the scripts that open, renew, reclaim and
-- verify a session (see scripts.go); not a script of its own.

-- epoch_grace returns the restart grace (ms, a number) recorded in epoch
-- marker value v ("<until>|<grace>", or "<until>|<grace>|<shards>" in a
-- shard of a sharded namespace), or nil when none is recorded.
local function epoch_grace(v)
  local g = string.match(v or '', '^%d+|(%d+)')
  return g and tonumber(g)
end

-- epoch_shards returns the shard count recorded in epoch marker value v
-- (a number): 1 for a marker without one, which is an unsharded
-- namespace's (see docs/design.md, "A namespace across a Cluster").
local function epoch_shards(v)
  local n = string.match(v or '', '^%d+|%d+|(%d+)$')
  return n and tonumber(n) or 1
end

-- repl_id returns the replication id of the server running the script
-- (master_replid of INFO replication): it changes when a replica is
-- promoted and when a server restarts, so a session that sees it change
-- checks that Redis still records its holds (see verify.lua). "" when the
-- server does not tell (an ACL user without +info, miniredis).
local function repl_id()
  local info = redis.pcall('INFO', 'replication')
  if type(info) == 'string' then
    return string.match(info, 'master_replid:(%w+)') or ''
  end
  return ''
end
if redis.call('PEXPIRE', KEYS[1], ARGV[1]) == 0 then
  local grace = grace_left(ARGV[2])
  if grace < 0 then
    return {R_EPOCH_MISSING}
  elseif grace > 0 then
    return {HB_RECLAIMABLE}
  end
  return {HB_GONE}
end
local n = tonumber(ARGV[4]) or 0
local codes = {}
for i = 5 + n, #ARGV do
  local c = redis.pcall('PEXPIRE', ARGV[i], ARGV[3], 'GT')
  if c == 0 then
    -- Unless missing (-2), it already expires later, or never (-1).
    c = redis.pcall('PTTL', ARGV[i])
    if c ~= -2 and type(c) == 'number' then
      c = 1
    end
  end
  codes[#codes + 1] = (c == 1 and '1') or (c == -2 and '0') or 'e'
end
-- The codes as a string, also when empty or all digits (a reply string,
-- never a number).
local out = {HB_RENEWED, 'k' .. table.concat(codes), repl_id(), now_ms()}
local r = redis.call('HGET', KEYS[1], 'r')
if r then
  local acked = {}
  for i = 5, 4 + n do
    acked[ARGV[i]] = true
  end
  local left = ''
  for hid in string.gmatch(r, '[^|]+') do
    if not acked[hid] then
      out[#out + 1] = hid
      left = left .. '|' .. hid
    end
  end
  if left == '' then
    redis.call('HDEL', KEYS[1], 'r')
  elseif left ~= r then
    redis.call('HSET', KEYS[1], 'r', left)
  end
end
return out
