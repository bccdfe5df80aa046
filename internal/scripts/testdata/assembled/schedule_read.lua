local R_BUSY, R_LEASE_GONE, R_EPOCH_MISSING, R_WITHDRAWN, R_GRACE, K_LEASE, K_CHANNEL, K_EPOCH, P_HOLD_SID = 0, -1, -5, -7, -8, "s:", "n:", "epoch", "^([^.]+)%."
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

-- schedule_read.lua: read a scheduled job's record, its history and who
-- runs it now.
-- KEYS[1] job record {ns}:job:<name>   KEYS[2] job history {ns}:jobh:<name>
-- (see schedule_claim.lua)   KEYS[3] the job's mutex {ns}:m:schedule:<name>
-- Returns {record as HGETALL, history as HGETALL, hold id holding the
-- mutex with a live lease or ""}.
-- mutex_value.lua: the mutex string, included by mutex_lib.lua and
-- mutex_inspect.lua.
--
-- A mutex is one string key {ns}:m:<name>, not a hash, so that a grant is a
-- single SET (which also drops an idle expiry) and a release a single SET
-- with PX: "<hid>|<tok>|<ld>|<i>|<free>|<w>", fields empty when unset:
--   hid   the holder's hold id
--   tok   the last token granted
--   ld    the holder's lock delay (ms), copied at the grant
--   i     how long the mutex is kept once idle (ms; twice the TTL of the
--         session it was last granted to, see common.lua idle_ms)
--   free  the end (server ms) of a lock delay started by a lost holder
--   w     "1" while the queue {ns}:q:m:<name> may hold an entry: set by the
--         script that queues, cleared by the first write that finds the
--         queue empty; the fast paths trust it instead of asking LLEN
-- The key always expires: a grant keeps it held_ms (see common.lua), and
-- the holder's heartbeat keeps it while held; writes that do not grant keep
-- its expiry while it has a holder, and once it has none it is kept 'i' ms
-- (and at least until a lock delay ends) after each write, waiters'
-- heartbeats keeping it while they wait (see m_save).
-- m_decode and m_encode below are the codec of the full paths
-- (mutex_lib.lua) and of mutex_inspect.lua. The fast paths
-- (mutex_acquire_fast.lua, mutex_release_fast.lua, shared by the single
-- and the batch scripts) run before any function exists and read and
-- build the string with anchored matches and concatenation instead: a
-- function there is a closure created on every call (its cost is in
-- docs/performance.md, "callgrind"), which the fast paths exist to avoid. TestBatchScriptsMatchSingle, TestMutexWaiterMark and
-- TestMutexOlderLayout keep the two in step.

-- m_decode returns the fields of mutex string v as a table, false where
-- a field is empty, w a boolean.
local function m_decode(v)
  local hid, tok, ld, i, free, w = string.match(v, '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)$')
  local function f(x)
    return x ~= '' and x
  end
  return {hid = f(hid), tok = f(tok), ld = f(ld), i = f(i), free = f(free), w = w == '1'}
end

-- m_encode returns the mutex string of st (fields as m_decode returns them).
local function m_encode(st)
  return (st.hid or '') .. '|' .. (st.tok or '') .. '|' .. (st.ld or '') .. '|' .. (st.i or '') .. '|' ..
    (st.free or '') .. '|' .. (st.w and '1' or '')
end
local m = redis.call('GET', KEYS[3])
local hid = m and m_decode(m).hid or ''
if hid ~= '' and redis.call('EXISTS', prefix_of(KEYS[1]) .. K_LEASE .. (sid_of(hid) or '')) == 0 then
  hid = ''
end
return {redis.call('HGETALL', KEYS[1]), redis.call('HGETALL', KEYS[2]), hid}
