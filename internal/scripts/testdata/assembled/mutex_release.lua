local REL_FREED, K_LEASE, K_CHANNEL, K_QUEUE, P_HOLD_SID = 1, "s:", "n:", "q:", "^([^.]+)%."
-- fastpath.lua: what the fast paths of scripts with a "--@helpers" line use;
-- first in those scripts and in the batch scripts only (see scripts.go,
-- batch.go), so it must stay small.

-- now_s: the server's clock in µs as a string, read at most once per call
-- by new_token.lua (inlined where a token is taken).
local now_s
-- mutex_release.lua: release the mutex held by a hold id, or withdraw that hold
-- id from the waiter queue. Releasing hands the mutex to the first live waiter.
-- KEYS[1] mutex {ns}:m:<name>; the queue {ns}:q:m:<name>, the releasing
-- session's lease {ns}:s:<sid> (to withdraw) and the first waiter's (to
-- hand over) are built here when needed (each
-- declared key costs Redis work on every call; all are in the namespace's
-- slot, and on Redis Cluster the migration probe refuses the script while
-- the slot moves, see Script.keysFor)
-- ARGV[1] hold id   ARGV[2] options "<sharded><withdraw>": sharded "1" for
-- sharded pub/sub, withdraw "1" to withdraw the hold id for good (see
-- withdraw in common.lua)
-- Returns 1 when it was held and is released, 2 when it was only queued, 0
-- when it is neither (already released, or taken away): idempotent.
local hid, m, sh = ARGV[1], KEYS[1], ARGV[2]

-- The fast paths, before the helpers exist (see scripts.go): see
-- mutex_release_fast.lua, which returns when it released.
if string.sub(sh, 2, 2) ~= '1' then
  local p
  -- mutex_release_fast.lua: the fast paths of a mutex release, as statement
  -- text (see mutex_acquire_fast.lua), inlined by mutex_release.lua at its
  -- top level before its helpers and by mutex_release_batch.lua in its loop
  -- over the releases, its returns turned into "r = ..." (see expand in
  -- assemble.go): a release with nobody waiting, and one that hands the
  -- mutex to a live first waiter. It reads and builds the mutex string (see
  -- mutex_value.lua) with anchored matches, as it runs on every release. It
  -- uses the includer's names: m (the mutex key), hid, sh (a string whose
  -- first character is "1" for sharded pub/sub) and p (the prefix, or nil).
  -- It returns REL_FREED when it released, each return the last thing its
  -- path does, and falls through, having changed nothing, for what the full
  -- path must decide: not held by hid, a lock delay, a dead first waiter, a
  -- restart grace (or a first waiter whose lease does not say yet that it is
  -- over), a hash of an older layout.
  local v = redis.pcall('GET', m) -- an error (an older layout's hash) takes the full path
  local holder, rest
  if type(v) == 'string' then
    -- One match for the holder and the rest, "|<tok>|<ld>|<i>|<free>|<w>"
    -- (each string function called costs Redis about 1k instructions; hold
    -- ids have no "|").
    holder, rest = string.match(v, '^([^|]*)(|.*)$')
  end
  if holder == hid then
    -- Held by hid.
    local i = string.match(rest, '^|%d+|%d*|(%d+)||$')
    if i then
      -- No lock delay, nobody waits: idle now, kept 'i' ms (see common.lua).
      redis.call('SET', m, rest, 'PX', i)
      return REL_FREED
    elseif string.sub(rest, -2) == '|1' then
      -- Waiters, no lock delay: hand over to the first waiter as m_handoff
      -- would, when its lease exists (it always has 'ld') and says that no
      -- restart grace is pending. That is what g = "0" in any lease of the
      -- namespace proves (see check_caller): the waiter's, read here anyway,
      -- spares a read of the releaser's.
      p = p or string.match(m, '^{[^}]*}:')
      local res = string.sub(m, #p + 3)
      local q = p .. K_QUEUE .. 'm:' .. res
      local to = redis.call('LINDEX', q, '0')
      if to then
        local sid = string.match(to, P_HOLD_SID)
        local l = redis.call('HMGET', p .. K_LEASE .. sid, 'ld', 'ttl', 'g')
        if l[1] and l[3] == '0' then
          redis.call('LPOP', q)
          local last, tok, n = string.sub(rest, 2, string.find(rest, '|', 2, true) - 1)
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
          local ld, ttl = l[1], l[2]
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
          redis.call('SET', m, to .. '|' .. tok .. '|' .. ld .. '|' .. idle .. '||1', 'PX', held)
          -- grant_message.lua: the grant message "g|<hid>|<token>|<resource>", the
          -- one encoder of it (internal/lease decodes it): statement text inlined
          -- where a grant is published, by notify (common.lua) and by the
          -- closure-free hand-offs of mutex_release_fast.lua and rwmutex_release.lua.
          -- The includer names the grantee's hold id to, the token tok (a string)
          -- and the resource res; msg is the message.
          local msg = 'g|' .. to .. '|' .. tok .. '|' .. res
          redis.call(string.sub(sh, 1, 1) == '1' and 'SPUBLISH' or 'PUBLISH', p .. K_CHANNEL .. sid, msg)
          return REL_FREED
        end
      end
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

-- mutex_lib.lua: the mutex's state, included (after common.lua) by the
-- scripts that read or write a mutex.
--
-- The mutex string and its codec: see mutex_value.lua.
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

-- m_load reads mutex m. A hash there is a mutex written by a leasehold
-- release before this layout: it is read field by field and replaced by
-- the string at the next save (its waiter mark is assumed set).
local function m_load(m)
  local v = redis.pcall('GET', m)
  if type(v) == 'table' and v.err then
    local h = redis.call('HMGET', m, 'hid', 'tok', 'ld', 'i', 'free')
    redis.call('DEL', m)
    return {exists = true, changed = true, hid = h[1], tok = h[2], ld = h[3], i = h[4], free = h[5], w = true}
  end
  if not v then
    return {}
  end
  local st = m_decode(v)
  st.exists = true
  return st
end

-- m_save writes state st to mutex m (queue q). A grant (st.held, set by
-- m_grant) keeps it held_ms; any other write keeps the expiry while it has
-- a holder, else sets it to 'i' ms (20 s when no grant recorded 'i') and
-- not before a lock delay ends. A waiter mark over an empty queue is
-- cleared first.
local function m_save(m, q, st)
  if st.w and redis.call('LLEN', q) == 0 then
    st.w = false
  end
  local v = m_encode(st)
  if st.held then
    redis.call('SET', m, v, 'PX', string.format('%.0f', st.held))
    return
  end
  if st.hid and st.exists then
    redis.call('SET', m, v, 'KEEPTTL')
    return
  end
  local keep = tonumber(st.i or idle_ms(false))
  if st.free then
    keep = math.max(keep, tonumber(st.free) - now_ms())
  end
  redis.call('SET', m, v, 'PX', string.format('%.0f', keep))
end

-- m_grant makes hid the holder in st and returns its new token. hid's
-- session's lock delay is copied so that it still applies after that
-- session's lease is gone, and its TTL sets how long the mutex is kept once
-- idle.
local function m_grant(p, st, hid)
  local l = redis.call('HMGET', p .. K_LEASE .. sid_of(hid), 'ld', 'ttl')
  local tok = math.max(tonumber(st.tok or '0') + 1, now_us())
  st.hid, st.tok, st.ld, st.i = hid, string.format('%.0f', tok), l[1] or '0', idle_ms(l[2])
  st.free, st.held = false, held_ms(l[2], l[1])
  return tok
end

-- m_handoff grants the mutex in st (free) to the first live waiter of queue
-- q, if any, and notifies it with "g|<hid>|<token>|<name>". Returns that
-- hold id or nil. The caller saves st.
local function m_handoff(p, st, q, sharded, name)
  if not st.w then
    return nil -- the common case: nobody waits (see w above)
  end
  if grace_left(p) ~= 0 then
    return nil -- no grants during a restart grace: waiters re-check after it
  end
  local nxt = first_live(p, q)
  if not nxt then
    return nil
  end
  redis.call('LPOP', q)
  local tok = m_grant(p, st, nxt)
  notify(p, sharded, nxt, 'g', tok, name)
  return nxt
end

-- m_free reports whether the mutex in st has no live holder and no lock
-- delay pending; a holder whose lease is gone is cleared, starting its lock
-- delay (st changes; the caller saves it). The second result is the time to
-- wait (ms) when it is not free, at least 1 (see lease_pttl).
local function m_free(p, st)
  if st.hid then
    if alive(p, st.hid) then
      return false, lease_pttl(p, st.hid)
    end
    local ld = tonumber(st.ld or '0')
    if ld > 0 then
      st.free = string.format('%.0f', now_ms() + ld)
    end
    st.hid, st.changed = false, true
  end
  if st.free then
    local wait = tonumber(st.free) - now_ms()
    if wait > 0 then
      return false, wait
    end
    st.free, st.changed = false, true
  end
  return true, 0
end
local p = prefix_of(m)
local sharded, name = string.sub(sh, 1, 1), string.sub(m, #p + 3)
local q = p .. K_QUEUE .. 'm:' .. name
if string.sub(sh, 2, 2) == '1' then
  withdraw(p, hid)
end
local st = m_load(m)
if st.hid == hid then
  if string.sub(sh, 2, 2) == '1' then
    -- A late first attempt (queue "2", see mutex_acquire.lua) that ran
    -- after its retry queued hid may have queued it a second time: the
    -- client withdraws every hold whose acquire had an unknown outcome,
    -- so that entry goes here, before the hand-off could find it.
    redis.call('LREM', q, '0', hid)
  end
  st.hid = false
  m_handoff(p, st, q, sharded, name)
  m_save(m, q, st)
  return REL_FREED
end
if redis.call('LREM', q, '0', hid) > 0 then
  if st.exists then
    m_save(m, q, st) -- the waiter mark, and maybe the idle expiry
  end
  return REL_DEQUEUED
end
if st.changed then
  m_save(m, q, st) -- an older layout's hash, converted
end
return REL_NOT_FOUND
