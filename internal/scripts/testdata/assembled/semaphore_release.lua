local REL_FREED = 1
-- fastpath.lua: what the fast paths of scripts with a "--@helpers" line use;
-- first in those scripts and in the batch scripts only (see scripts.go,
-- batch.go), so it must stay small.

-- now_s: the server's clock in µs as a string, read at most once per call
-- by new_token.lua (inlined where a token is taken).
local now_s
-- semaphore_release.lua: return the permits of a hold id, or withdraw it from
-- the queue; then serve the waiters that now fit.
-- KEYS[1] meta   KEYS[2] holders   KEYS[3] queue (see semaphore_lib.lua)
-- ARGV[1] prefix {ns}:   ARGV[2] hold id   ARGV[3] "1" for sharded pub/sub
-- ARGV[4] name   ARGV[5] n requested   ARGV[6] "1" to withdraw the hold id
-- for good (see withdraw in common.lua)
-- Returns 1 when it was held and is released, 2 when it was only queued, 0
-- when neither: idempotent.
-- semaphore_fast.lua: the fast paths of semaphore_acquire.lua and
-- semaphore_release.lua, included by them before their helpers (see
-- scripts.go) and by their batch scripts (see batch.go), which run them
-- for several calls of one session at once. Each returns a reply, or nil
-- when the full path must decide; nil means nothing was changed.

-- sem_acquire_fast grants n permits (string n_s) to hid as sem_grant would,
-- when that takes nothing else: the stored limit is the caller's, hid holds
-- nothing yet, the permits fit without purging dead holders, the semaphore
-- has a token and no waiter mark (nobody waits, see semaphore_lib.lua). The caller checked hid's lease: it exists
-- with no grace pending (g = "0", see check_caller) and hid is not
-- withdrawn; ttl and ld are the lease's fields.
local function sem_acquire_fast(meta, holders, hid, n_s, limit, ttl, ld)
  local st = redis.call('HMGET', meta, 'limit', 'used', 'tok', 'set', 'q')
  if st[1] ~= limit or not st[3] or st[5] then
    return nil
  end
  -- used: the permits in use after the grant; the string n_s when none
  -- are in use now (redis.call formats a number argument, which costs
  -- Redis more than the rest of this test, see docs/performance.md).
  local lim, used = tonumber(st[1]), n_s
  if st[2] and st[2] ~= '0' then
    used = tonumber(st[2]) + tonumber(n_s)
    if used > lim then
      return nil
    end
  elseif tonumber(n_s) > lim then
    return nil
  end
  local last, tok, n = st[3]
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
  -- The value records the lock delay, if any, as sem_grant does. HSETNX
  -- writes nothing when hid holds permits already (a retried grant, which
  -- the full path answers).
  local v = n_s .. ':' .. tok
  if ld and ld ~= '0' then
    v = v .. ':' .. ld
  end
  if redis.call('HSETNX', holders, hid, v) == 0 then
    return nil
  end
  -- expiry_ms.lua: idle_ms and held_ms (see common.lua) of a grantee, as
  -- statement text inlined by the fast paths that grant (--@inline, see
  -- assemble.go), where the helpers do not exist. The includer names ttl and
  -- ld, the grantee's lease fields (strings; ld "0" without a lock delay);
  -- idle is 2 * ttl, held 2 * ttl + ld, both strings, each number formatted
  -- once: redis.call formats a number argument anew on every call
  -- (docs/performance.md), and without a lock delay held is idle.
  local idle = tostring(2 * ttl)
  local held = idle
  if ld ~= '0' then
    held = tostring(2 * ttl + ld)
  end
  redis.call('HSET', meta, 'tok', tok, 'i', idle, 'used', used)
  -- Keep both keys at least held_ms, never less (sem_keep in
  -- semaphore_lib.lua, spelled out: the helpers do not exist yet). meta
  -- has an expiry here (it had a token, so a grant or a release gave it
  -- one), unless an operator set the limit: it keeps none then.
  if redis.call('PEXPIRE', holders, held, 'NX') == 0 then
    redis.call('PEXPIRE', holders, held, 'GT')
  end
  if not st[4] then
    redis.call('PEXPIRE', meta, held, 'GT')
  end
  return n -- a grant: its bare token (see parseAcquire)
end

-- sem_release_fast returns the n permits (string n_s, as granted) of hid
-- when that takes nothing else: hid holds them, no waiter mark (nobody
-- waits: sem_serve would grant nothing), and no lock delay is recorded (one might be
-- running when the release leaves the semaphore idle, which sem_idle sees
-- to). "used" counts exactly the permits of the recorded holders when no
-- lock delay is recorded (see semaphore_lib.lua), so it tells whether the
-- release left the semaphore idle.
local function sem_release_fast(meta, holders, hid, n_s)
  local m = redis.call('HMGET', meta, 'i', 'set', 'delay', 'q')
  if m[4] or (m[3] and not m[2]) or redis.call('HDEL', holders, hid) == 0 then
    return nil
  end
  if redis.call('HINCRBY', meta, 'used', '-' .. n_s) <= 0 and m[1] and not m[2] then
    -- Idle now: kept 'i' ms (see common.lua), or for good when an
    -- operator set the limit.
    redis.call('PEXPIRE', meta, m[1])
  end
  return REL_FREED
end
local p, hid, meta, holders, q = ARGV[1], ARGV[2], KEYS[1], KEYS[2], KEYS[3]

-- Fast path, before the helpers exist (see scripts.go): see
-- sem_release_fast in semaphore_fast.lua.
if ARGV[6] ~= '1' then
  local r = sem_release_fast(meta, holders, hid, ARGV[5])
  if r then
    return r
  end
end

local R_BUSY, R_LEASE_GONE, R_EPOCH_MISSING, R_WITHDRAWN, R_GRACE, REL_NOT_FOUND, REL_DEQUEUED, K_LEASE, K_CHANNEL, K_EPOCH, P_HOLD_SID = 0, -1, -5, -7, -8, 0, 2, "s:", "n:", "epoch", "^([^.]+)%."
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

-- semaphore_lib.lua: helpers for the semaphore scripts, included after common.lua.
-- A semaphore is three keys:
--   meta    {ns}:sem:<name>     hash: limit, used (permits of recorded holders and of
--                               running lock delays), tok (last token), i (idle expiry ms),
--                               set ("1" when an operator set the limit), delay (below),
--                               q (the waiter mark, below)
--   holders {ns}:semh:<name>    hash: hold id -> "<n>:<token>", or "<n>:<token>:<ld>"
--                               when the holder's session has a lock delay of ld ms
--                               (a missing ld is 0: reclaim.lua writes none)
--   queue   {ns}:q:sem:<name>   list of "<hold id>#<n>", FIFO
-- "used" may count holders whose lease is gone; sem_purge drops them, and runs
-- only when a request does not fit, so a grant that fits is O(1).
--
-- The waiter mark: meta's field q is "1" while the queue may hold an entry.
-- The one script that queues (semaphore_acquire.lua, through busy) sets it
-- with its entry; sem_serve clears it when it finds the queue empty. So no
-- mark means nobody waits, and the fast paths (semaphore_fast.lua) read it
-- with the meta fields they read anyway instead of asking LLEN. A mark
-- over an empty queue only sends a call down the full path, which clears
-- it. (Writes of a release older than the mark queue without it: a fast
-- path may then overtake those waiters until a full path serves them.)
--
-- Lock delay: sem_purge turns a dead holder recorded with a lock delay into
-- an entry "<end>:<n>" of meta's field delay ("|"-separated; end is server
-- ms, the purge's time plus the holder's lock delay): its n permits stay
-- counted in used until a purge after end drops the entry. The delay
-- starts when a purge notices the loss, as for every kind (the lease is
-- gone by then, so the lock delay is the one recorded at the grant). A
-- release, and a purge in reclaim.lua (during a restart grace, when a dead
-- holder may still reclaim its permits), start none. meta is kept at least
-- until the last delay ends (sem_purge, sem_idle).

local function sem_n(entry)
  return tonumber(string.match(entry, '#(%d+)$'))
end

local function sem_hid(entry)
  return string.match(entry, '^([^#]+)')
end

-- sem_holder parses a holders value: permits, token and lock delay (ms,
-- 0 when none was recorded).
local function sem_holder(v)
  local n, tok, ld = string.match(v, '^(%d+):(%d+):?(%d*)$')
  return tonumber(n), tonumber(tok), tonumber(ld) or 0
end

-- sem_delays returns the entries of meta's field delay (string d, or
-- false) whose lock delay has not ended, as "<end>:<n>" strings, their
-- permits, and the latest end (server ms, 0 when none).
local function sem_delays(d)
  local kept, n, last = {}, 0, 0
  if d then
    local now = now_ms()
    for e, k in string.gmatch(d, '(%d+):(%d+)') do
      local t = tonumber(e)
      if t > now then
        kept[#kept + 1] = e .. ':' .. k
        n = n + tonumber(k)
        last = math.max(last, t)
      end
    end
  end
  return kept, n, last
end

-- sem_purge drops holders whose lease is gone and returns the recomputed
-- use: the live holders' permits and those of running lock delays (ended
-- ones are dropped). With delay true a dead holder recorded with a lock
-- delay starts it now (see above); reclaim.lua calls it without. m is
-- meta's fields {delay, set} when the caller read them already.
local function sem_purge(p, meta, holders, delay, m)
  m = m or redis.call('HMGET', meta, 'delay', 'set')
  local kept, used = sem_delays(m[1])
  local longest = 0
  local all = redis.call('HGETALL', holders)
  for i = 1, #all, 2 do
    local n, _, ld = sem_holder(all[i + 1])
    if alive(p, all[i]) then
      used = used + n
    else
      redis.call('HDEL', holders, all[i])
      if delay and ld > 0 then
        kept[#kept + 1] = string.format('%.0f', now_ms() + ld) .. ':' .. n
        used = used + n
        longest = math.max(longest, ld)
      end
    end
  end
  if #kept > 0 then
    redis.call('HSET', meta, 'used', used, 'delay', table.concat(kept, '|'))
  else
    redis.call('HSET', meta, 'used', used)
    if m[1] then
      redis.call('HDEL', meta, 'delay')
    end
  end
  if longest > 0 and not m[2] then
    keep_at_least(meta, longest) -- a limit an operator set keeps no expiry
  end
  return used
end

-- sem_fits reports whether n more permits fit under the limit, purging dead
-- holders first when that is what it takes.
local function sem_fits(p, meta, holders, n)
  local m = redis.call('HMGET', meta, 'limit', 'used', 'delay', 'set')
  local limit = tonumber(m[1] or '0')
  if tonumber(m[2] or '0') + n <= limit then
    return true
  end
  return sem_purge(p, meta, holders, true, {m[3], m[4]}) + n <= limit
end

-- sem_keep keeps meta and holders at least ms more (see common.lua
-- keep_at_least): what a grant does, so that the keys of a semaphore whose
-- holders all crashed expire. A limit an operator set is configuration:
-- its meta keeps no expiry.
local function sem_keep(meta, holders, ms)
  keep_at_least(holders, ms)
  if not redis.call('HGET', meta, 'set') then
    keep_at_least(meta, ms)
  end
end

-- sem_grant records n permits for hid and returns the new token; the TTL of
-- hid's session sets how long meta is kept once idle (see common.lua), and
-- its lock delay is recorded with the permits (it still applies once the
-- session's lease is gone, see sem_purge).
local function sem_grant(p, meta, holders, hid, n)
  local tok = next_token(meta, 'tok')
  local l = redis.call('HMGET', p .. K_LEASE .. sid_of(hid), 'ttl', 'ld')
  local v = n .. ':' .. string.format('%.0f', tok)
  if l[2] and l[2] ~= '0' then
    v = v .. ':' .. l[2]
  end
  redis.call('HSET', holders, hid, v)
  redis.call('HINCRBY', meta, 'used', n)
  redis.call('HSET', meta, 'i', idle_ms(l[1]))
  sem_keep(meta, holders, held_ms(l[1], l[2]))
  return tok
end

-- sem_idle lets meta expire when nobody holds a permit and nobody waits
-- (the holders hash and the queue are gone when empty), unless an operator
-- set the limit: that limit is configuration and stays until cleared. A
-- running lock delay keeps meta until it ends.
local function sem_idle(meta, holders, q)
  if redis.call('EXISTS', holders, q) == 0 then
    local m = redis.call('HMGET', meta, 'set', 'i', 'delay')
    if not m[1] then
      local _, _, last = sem_delays(m[3])
      expire_idle(meta, m[2], last > 0 and last)
    end
  end
end

-- sem_serve grants permits to the queued live waiters in order while they
-- fit. The first one that does not fit stops the walk: a large request is
-- never starved by smaller ones behind it. A head asking for more than the
-- limit (SetLimit shrank it) could never be served and would block the
-- queue for good: it is dropped and told to re-check ("x|<hid>"), and its
-- re-check fails with a limit mismatch.
local function sem_serve(p, meta, holders, q, sharded, name)
  if grace_left(p) ~= 0 then
    return -- no grants during a restart grace: waiters re-check after it
  end
  local limit = tonumber(redis.call('HGET', meta, 'limit') or '0')
  while true do
    local e = first_live(p, q)
    if not e then
      redis.call('HDEL', meta, 'q') -- nobody waits: the waiter mark goes
      return
    end
    local n = sem_n(e)
    local hid = sem_hid(e)
    if n > limit then
      redis.call('LPOP', q)
      notify(p, sharded, hid, 'x')
    elseif sem_fits(p, meta, holders, n) then
      redis.call('LPOP', q)
      local tok = sem_grant(p, meta, holders, hid, n)
      notify(p, sharded, hid, 'g', tok, name)
    else
      return
    end
  end
end

-- sem_held returns the token of hid's grant, or nil.
local function sem_held(holders, hid)
  local v = redis.call('HGET', holders, hid)
  if v then
    local _, tok = sem_holder(v)
    return tok
  end
  return nil
end

-- sem_wait returns when waiters should re-check (ms, -1 when unknown): the
-- smallest remaining lease TTL of the live holders, when the first of them
-- could expire, or the end of the first running lock delay if sooner.
local function sem_wait(p, meta, holders)
  local wait = -1
  for _, hid in ipairs(redis.call('HKEYS', holders)) do
    local t = lease_pttl(p, hid)
    if t > 0 and (wait < 0 or t < wait) then
      wait = t
    end
  end
  local d = redis.call('HGET', meta, 'delay')
  if d then
    local now = now_ms()
    for e in string.gmatch(d, '(%d+):%d+') do
      local t = tonumber(e) - now
      if t > 0 and (wait < 0 or t < wait) then
        wait = t
      end
    end
  end
  return wait
end
if ARGV[6] == '1' then
  withdraw(p, hid)
end
local v = redis.call('HGET', holders, hid)
if v then
  redis.call('HDEL', holders, hid)
  redis.call('HINCRBY', meta, 'used', -tonumber(string.match(v, '^(%d+)')))
  sem_serve(p, meta, holders, q, ARGV[3], ARGV[4])
  sem_idle(meta, holders, q)
  return REL_FREED
end
if redis.call('LREM', q, '0', hid .. '#' .. ARGV[5]) > 0 then
  sem_serve(p, meta, holders, q, ARGV[3], ARGV[4])
  sem_idle(meta, holders, q)
  return REL_DEQUEUED
end
return REL_NOT_FOUND
